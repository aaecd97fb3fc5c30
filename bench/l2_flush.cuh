// Shared by the kernel benchmarks (int4_bench.cu, gemv_bench.cu, fused_linear_bench.cu): evicting
// the GPU's L2 cache between timed calls, so that a call's operands come from HBM as they do in a
// model (the H200's L2 holds 60 MB), and timing a captured graph of back-to-back calls that way
// (captured_per_call_us).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace aoti_cuda_bench {

// Reads every 16 bytes of `p`; never writes in practice (the data is never the magic value),
// but the compiler cannot drop the loads. Reading rather than writing (a memset) leaves L2
// without dirty lines whose write-back would compete with the timed call's reads.
__global__ void read_flush_kernel(const uint4* p, std::size_t n, uint4* sink) {
  uint32_t acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 0, 0, 0);
}

// Enqueues a read of the `bytes` of device memory at `buffer` (a multiple of 16) on the default stream.
inline void flush_l2(void* buffer, std::size_t bytes) {
  read_flush_kernel<<<1024, 512>>>(static_cast<const uint4*>(buffer), bytes / 16, static_cast<uint4*>(buffer));
}

// Median per-call time, in µs, of `exec` (a graph of `calls` back-to-back calls) replayed `reps`
// times on `stream`, each replay after an L2 flush (one untimed replay first). Exits on a CUDA error.
// Exits with a message naming `what` when `err` is not cudaSuccess.
inline void check_or_exit(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "graph replay: %s: %s\n", what, cudaGetErrorString(err));
  std::exit(1);
}

inline double replay_per_call_us(cudaGraphExec_t exec, cudaStream_t stream, int calls, int reps, void* flush,
                                 std::size_t flush_bytes) {
  const auto check = check_or_exit;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = -1; i < reps; ++i) {
    flush_l2(flush, flush_bytes);
    check(cudaDeviceSynchronize(), "flush");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i >= 0) times.push_back(ms * 1000.0 / calls);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The same for `calls` calls that `enqueue(r)` puts on `stream` (call r; it returns a cudaError_t or an int of
// one), captured into one graph here. Warm-up launches, which set kernel attributes, belong before it.
template <typename Enqueue>
double captured_per_call_us(cudaStream_t stream, int calls, int reps, void* flush, std::size_t flush_bytes,
                            Enqueue enqueue) {
  cudaGraph_t graph;
  check_or_exit(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int r = 0; r < calls; ++r) check_or_exit(static_cast<cudaError_t>(enqueue(r)), "launch");
  check_or_exit(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  check_or_exit(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const double us = replay_per_call_us(exec, stream, calls, reps, flush, flush_bytes);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
}

}  // namespace aoti_cuda_bench
