// Private: small host<->device copies done by a kernel instead of a DMA copy.
//
// On the H200 machine a queued cudaMemcpyAsync of a few bytes occupies the
// stream for several microseconds (the copy engine's start-up), which is most
// of a small call's host I/O cost. Page-locked host memory from
// cudaMallocHost/cudaHostAlloc is mapped into the device's address space at
// the same address (unified addressing), so a kernel can read a host input
// from it, or write a host output into it, directly. For small copies the
// kernel's launch is cheaper than the copy engine's start-up.
// bench/copy_latency_probe.cu measures both.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace aoti_cuda::common {

/// Copies below this size may use copy_with_kernel (AOTI_CUDA_SMALL_COPY).
constexpr std::size_t kSmallCopyMax = std::size_t{64} << 10;

/// Whether small staged copies use copy_with_kernel: AOTI_CUDA_SMALL_COPY=
/// "kernel" or "dma" (read once per process); the default is kernel.
bool small_copies_by_kernel() noexcept;

/// Queues a copy of `bytes` from `src` to `dst` on `stream` as a kernel. Both
/// pointers must be device-accessible: device memory of the current device,
/// or page-locked host memory (mapped at the same address). Returns the
/// launch's cudaError_t (as int, 0 on success).
int copy_with_kernel(void* dst, const void* src, std::size_t bytes, void* stream) noexcept;

/// The same copy as a kernel node of `graph` after `deps` (cudaGraphAddKernelNode).
int add_copy_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                         void* dst, const void* src, std::size_t bytes) noexcept;
/// Re-points such a node of an instantiated graph (cudaGraphExecKernelNodeSetParams).
int set_copy_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, const void* src,
                         std::size_t bytes) noexcept;

}  // namespace aoti_cuda::common
