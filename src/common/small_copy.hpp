// Private: small copies inside CUDA graph replays as kernel nodes instead of
// memcpy nodes.
//
// A graph replay wraps the captured plan with copy nodes (inputs in, outputs
// out; runtime/graph_cache.hpp). Replays with kernel nodes measured faster
// than with memcpy nodes (docs/design-measurements.md). Page-locked host memory
// from cudaMallocHost/cudaHostAlloc is mapped at the same address under
// unified addressing, so the kernel reads staged host inputs and writes host
// outputs directly. Outside graphs the opposite held: a copy kernel queued on
// the stream in place of cudaMemcpyAsync made plain host I/O calls slower, so
// plain calls keep cudaMemcpyAsync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace aoti_cuda::common {

/// Copies up to this size are kernel nodes (unless the Module's
/// TuningOptions::small_copy_kernels is false: then memcpy nodes whatever
/// their size).
constexpr std::size_t kSmallCopyMax = std::size_t{64} << 10;

/// A copy of `bytes` from `src` to `dst` as a kernel node of `graph` after
/// `deps` (cudaGraphAddKernelNode). Both pointers must be device-accessible:
/// device memory of the graph's device, or page-locked host memory mapped at
/// the same address. Returns the cudaError_t (as int, 0 on success).
int add_copy_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                         void* dst, const void* src, std::size_t bytes) noexcept;
/// Re-points such a node of an instantiated graph (cudaGraphExecKernelNodeSetParams).
int set_copy_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, const void* src,
                         std::size_t bytes) noexcept;

}  // namespace aoti_cuda::common
