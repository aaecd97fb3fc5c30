// Private: small copies inside CUDA graph replays as kernel nodes instead of
// memcpy nodes.
//
// A graph replay wraps the captured plan with copy nodes (inputs in, outputs
// out; runtime/graph_cache.hpp). Replays with kernel nodes measured faster
// than with memcpy nodes (docs/design-measurements.md), and one kernel node
// makes all the small copies of a side (a CopyList): in an LLM decode replay
// each copy node took about 1.1 us, whatever its size (2026-12-04 trace). Page-locked host memory
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

/// Copies one kernel node makes at most (its parameters stay at about 200 bytes).
constexpr int kCopyListMax = 8;

/// The copies of one kernel node: block row i copies bytes[i] from src[i] to dst[i], so a replay
/// with several small inputs (or outputs) pays one kernel node for them, not one each. Both
/// pointers of each copy must be device-accessible: device memory of the graph's device, or
/// page-locked host memory mapped at the same address.
struct CopyList {
  void* dst[kCopyListMax] = {};
  const void* src[kCopyListMax] = {};
  std::size_t bytes[kCopyListMax] = {};
  int count = 0;

  /// Appends a copy; false (nothing added) when the list is full.
  bool add(void* to, const void* from, std::size_t n) noexcept {
    if (count == kCopyListMax) return false;
    dst[count] = to;
    src[count] = from;
    bytes[count] = n;
    ++count;
    return true;
  }
};

/// `list` (1..kCopyListMax copies) as one kernel node of `graph` after `deps`
/// (cudaGraphAddKernelNode). Returns the cudaError_t (as int, 0 on success).
int add_copy_list_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                       const CopyList& list) noexcept;
/// Re-points such a node of an instantiated graph to `list`, which must hold as many copies as
/// the node was made with (cudaGraphExecKernelNodeSetParams).
int set_copy_list_node(cudaGraphExec_t exec, cudaGraphNode_t node, const CopyList& list) noexcept;

}  // namespace aoti_cuda::common
