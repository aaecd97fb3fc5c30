// aoti_cuda shim — programmatic dependent launch (PDL) for the operator kernels a decode step
// spends most launches on: the few-row GEMV, the int4 weight-streaming kernel, the fused linear
// kernels and decode attention.
//
// Why: a decode step is a chain of small dependent kernels, and between two of them the GPU sits
// idle for the previous grid's completion, the next launch and the DRAM latency of its first loads
// (docs/benchmarks/int4.md: an empty kernel alone costs 0.6-1.3 us per call in a graph). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while its predecessor
// in the stream is still finishing (once every block of the predecessor has exited, or has said
// so with griddepcontrol.launch_dependents): its launch, block scheduling and prologue overlap the
// predecessor's tail, then it waits (griddepcontrol.wait) for the predecessor's completion and
// memory before anything else.
//
// Measured: on the H200 (2026-12-04; docs/benchmarks/int4.md and llm.md, "Dependent launch") the
// int4 kernels back to back in a graph ran 2-23 % faster with it, but a whole decode step of the
// exports of that day (plain GEMVs, no weight loads before the wait) ran slower: bf16dopq
// 0.97-0.99x and int4dopq 0.96-0.99x (positions 128, 1024, 4000; BC job of 14:05 UTC). With the
// fused linear kernels' weight loads before the wait, a whole decode step of the fused-form bf16
// export ran 1.097-1.111x faster (H100, 2026-12-05 15:11 UTC, three runs each way, the same tokens),
// so it is on by default since then (OpSettings). Tried and dropped:
//   * prefetching each kernel's weights into L2 before the wait: int4 back to back up to 28 %
//     faster, decode slower still (bf16 737 against 796 tokens/s prefetching whole matrices at 11:41;
//     int4dopq 0.91-0.95x prefetching only its own int4 blocks at 14:28);
//   * letting dependents start right after the wait: their blocks then hold SM slots while later
//     blocks of the running kernel still wait for one (decode 0.92-0.99x at 13:51); kernels now say
//     so after their main loads, before their reductions and stores.
// Since 2026-12-04 22:18 (measured in a model on 2026-12-05, above): the fused linear
// kernels launch through it too, and when their weights are program constants they, and the plain
// int4 weight-streaming kernel (int4mm::Problem::weights_early), issue their first weight loads into
// registers before the wait, so that a projection's DRAM latency overlaps the previous kernel's
// tail, where the dropped L2 prefetch only added traffic; and the decode attention's merge reads the
// position before its wait. `aoti_cuda_int4_bench --dependent-launch on --weights-early` times the
// int4 kernel that way back to back. `aoti_cuda_fused_linear_bench
// --chain` times 22 layers three ways (plain, overlap, overlap with weights early).
// tests/gpu/test_dependent_launch.cpp runs a decode-like chain with it on and off (bitwise equal
// in every run), and test_int4_mm.cpp the int4 kernel with it on against float64 (passed on the
// H200; the failures of 11:41 and 11:51 were that test's own pageable uploads racing its stream).
//
// The contract every kernel launched through launch() keeps, which makes the overlap safe whatever
// the predecessor is (a Triton kernel of the model library, one of ours, a copy):
//   * before wait_for_predecessor(): no global memory access, except reads of memory that no kernel
//     ever writes: a program's read-only constants (its weights), which the runtime marks when it
//     installs them (shim::is_program_constant; the fused linear kernels' `weights_early`). When a
//     kernel starts, every grid before its predecessor has completed, so only the predecessor could
//     still be writing; it never writes those. Likewise an operator's second kernel, launched right
//     after its first in the same stream, may read before its wait what the first kernel does not
//     write and was final before it started (the operator's inputs): its predecessor is that kernel;
//   * every thread that reads or writes global memory calls wait_for_predecessor() first;
//   * allow_dependents() only after that wait, so a chain of such kernels never runs more than
//     one grid ahead of the data.
// Below sm_90 the device functions are no-ops and launch() launches plainly.
//
// Switched by OpSettings::dependent_launch (TuningOptions::dependent_launch,
// AOTI_CUDA_DEPENDENT_LAUNCH; on by default), so that the gain can be measured in one process.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace aoti_cuda {
namespace shim {
namespace pdl {

/// Whether the calling thread's current device is sm_90 or newer (asked of the driver once per device;
/// false when it cannot be asked). Also what thread-block clusters need (decode_attention_cluster.cu).
bool sm90_or_newer() noexcept;

/// Whether launch() asks for the overlap on the calling thread's current device: the calling
/// Module's OpSettings::dependent_launch is on and the device is sm_90 or newer.
bool allowed() noexcept;

/// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic stream
/// serialization when `overlap` (the kernel then keeps the contract above). Returns the launch's
/// error, else the last error pending on this thread (as cudaGetLastError() after <<<>>>); either
/// way none is left behind.
template <typename... Params, typename... Args>
cudaError_t launch_with(bool overlap, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                        cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (overlap) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  const cudaError_t last = cudaGetLastError();
  return err != cudaSuccess ? err : last;
}

/// launch_with(allowed(), ...): a kernel that keeps the contract above.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                   Args&&... args) {
  return launch_with(allowed(), kernel, grid, block, smem, stream, std::forward<Args>(args)...);
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

#endif  // __CUDACC__

}  // namespace pdl
}  // namespace shim
}  // namespace aoti_cuda
