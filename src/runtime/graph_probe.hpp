// Private runtime diagnostics of a captured plan, each off unless its variable is set (docs/configuration.md).
//
// AOTI_CUDA_GRAPH_DOT=<folder> writes each captured plan as Graphviz text (cudaGraphDebugDotPrint, verbose: every
// node's type, launch shape, shared memory and attributes) to <folder>/<method>-<n>.dot, n counting captures in the
// process: what a replay holds (e.g. which nodes sit between a library's kernels).
//
// AOTI_CUDA_GRAPH_PROBE=on (docs/configuration.md) makes every capture also time copies of the plan in which
// kernel nodes are replaced by an empty kernel: all of them (the graph's own cost: launches and the gaps between
// nodes), then, for the first node of each distinct kernel, all but that one. A kernel whose copy costs much more
// than its own run time slows the nodes around it: the question behind issue 32's "stock step <= 1.03x its kernels"
// (docs/benchmarks/llm.md, "The stock export's 1.043x"). Results go to the log (info), one line a kernel.
//
// Measurement only: the copies run the plan's real kernels again on its buffers, so a stateful program's state
// (a KV cache, a counter) advances. Failures are logged and end the probe; the capture goes on either way.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace aoti_cuda::runtime {

/// Writes `graph` for `method` when AOTI_CUDA_GRAPH_DOT is set; a file that cannot be written is logged (warning).
void write_graph_dot(cudaGraph_t graph, const std::string& method);

/// True when AOTI_CUDA_GRAPH_PROBE is on (read at each capture).
bool graph_probe_requested();

/// Times `plan` and its copies on `stream` (the capture's stream, idle) and logs the results for `method`.
void probe_graph(cudaGraph_t plan, cudaStream_t stream, const std::string& method) noexcept;

}  // namespace aoti_cuda::runtime
