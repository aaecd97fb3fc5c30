// The roofline's ceiling: the GPU's streaming-read bandwidth, measured in the same job as the
// kernels it judges (docs/benchmarks/int4.md, llm.md). A grid that fills every SM reads a buffer
// of >= 1 GiB once with 16-byte loads that skip L1 (ld.global.nc.L1::no_allocate, as a weight
// stream does), four loads in flight per thread; the data dwarfs the L2 (60 MB on an H200), so
// the rate is the DRAM's. Shared by int4_bench.cu and read_bw.cu.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace aoti_cuda_bench {

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Reads n 16-byte vectors (n a multiple of 4 * gridDim.x * blockDim.x is not required). Writes
// `sink` only if the XOR of everything is a value random data practically never gives, so the
// loads cannot be dropped and nothing is written in practice.
__global__ void stream_read_kernel(const uint4* __restrict__ p, std::size_t n, uint4* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = load_stream(p + i), b = load_stream(p + i + stride), c = load_stream(p + i + 2 * stride),
                d = load_stream(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = load_stream(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 1, 2, 3);
}

struct ReadBandwidth {
  double median_gbps = 0, best_gbps = 0;
  std::size_t bytes = 0;
  int reps = 0;
};

// Median and best of `reps` timed reads of `bytes` (first one untimed); fills the buffer with a
// non-zero pattern first. Returns median 0 on any CUDA error (the caller reports it).
inline ReadBandwidth measure_read_bandwidth(std::size_t bytes = std::size_t{2} << 30, int reps = 15) {
  ReadBandwidth r;
  r.bytes = bytes;
  r.reps = reps;
  void* buf = nullptr;
  if (cudaMalloc(&buf, bytes) != cudaSuccess) return r;
  cudaMemset(buf, 0x5A, bytes);
  int device = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  constexpr int kThreads = 512;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_read_kernel, kThreads, 0);
  const unsigned blocks = static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> gbps;
  for (int i = -1; i < reps; ++i) {
    cudaEventRecord(start);
    stream_read_kernel<<<blocks, kThreads>>>(static_cast<const uint4*>(buf), bytes / 16, static_cast<uint4*>(buf));
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 0 && ms > 0) gbps.push_back(static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  const bool ok = cudaGetLastError() == cudaSuccess;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(buf);
  if (!ok || gbps.empty()) return r;
  std::sort(gbps.begin(), gbps.end());
  r.median_gbps = gbps[gbps.size() / 2];
  r.best_gbps = gbps.back();
  return r;
}

}  // namespace aoti_cuda_bench
