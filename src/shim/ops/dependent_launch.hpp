// aoti_cuda shim — programmatic dependent launch (PDL) for the operator kernels a decode step
// spends most launches on: the few-row GEMV, the int4 weight-streaming kernel and decode attention.
//
// Why: a decode step is a chain of small dependent kernels, and between two of them the GPU sits
// idle for the previous grid's completion, the next launch and the DRAM latency of its first loads
// (docs/benchmarks/int4.md: an empty kernel alone costs 0.6-1.3 us per call in a graph). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while its predecessor
// in the stream is still finishing (once every block of the predecessor has exited, or has said
// so with griddepcontrol.launch_dependents). Our kernels use that window for work that does not
// depend on the predecessor, prefetching their weights into L2, then wait (griddepcontrol.wait)
// for the predecessor's completion and memory before anything else.
//
// The contract every kernel launched through launch() keeps, which makes the overlap safe whatever
// the predecessor is (a Triton kernel of the model library, one of ours, a copy):
//   * before wait_for_predecessor(): no global memory read except L2 prefetches (an L2 prefetch
//     cannot return stale data: L2 is where every SM's writes meet), no global write at all;
//   * every thread that reads or writes global memory calls wait_for_predecessor() first;
//   * allow_dependents() only after that wait, so a chain of such kernels never runs more than
//     one grid ahead of the data.
// Below sm_90 the device functions are no-ops and launch() launches plainly.
//
// Switched by OpSettings::dependent_launch (TuningOptions::dependent_launch,
// AOTI_CUDA_DEPENDENT_LAUNCH), so that the gain can be measured in one process.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace aoti_cuda {
namespace shim {
namespace pdl {

/// Whether launch() asks for the overlap on the calling thread's current device: the calling
/// Module's OpSettings::dependent_launch is on and the device is sm_90 or newer (cached per device).
bool allowed() noexcept;

/// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream
/// serialization when allowed(). The kernel must keep the contract above.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (allowed()) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

#ifdef __CUDACC__
/// Waits until the predecessor grid has completed and its writes are visible (no-op below sm_90
/// and when the kernel was launched plainly).
__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel in the stream, if launched with the overlap, start (its own wait still
/// waits for this grid to complete).
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/// Asks L2 to fetch [p, p + bytes) rounded down to whole 16-byte units; returns at once. A hint:
/// it changes no result, only what the next loads of those bytes cost. Nothing for a p that is not
/// 16-byte aligned (the bulk prefetch requires it).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  bytes &= ~15u;
  if (bytes == 0 || (reinterpret_cast<uintptr_t>(p) & 15u) != 0) return;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

/// Prefetches [p, p + bytes) in pieces of at most 4 KiB: piece i by thread `first + i * step`
/// of the calling ones (the block: threadIdx.x, blockDim.x; one thread: 0, 1).
__device__ __forceinline__ void prefetch_l2_pieces(const void* p, uint64_t bytes, unsigned first, unsigned step) {
  constexpr uint64_t kPiece = 4096;
  const auto* base = static_cast<const char*>(p);
  const uint64_t pieces = (bytes + kPiece - 1) / kPiece;
  for (uint64_t i = first; i < pieces; i += step) {
    const uint64_t offset = i * kPiece;
    prefetch_l2(base + offset, static_cast<uint32_t>(bytes - offset < kPiece ? bytes - offset : kPiece));
  }
}
#endif  // __CUDACC__

}  // namespace pdl
}  // namespace shim
}  // namespace aoti_cuda
