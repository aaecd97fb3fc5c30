// What one call of a weight-streaming kernel costs at the least, measured as the kernel benchmarks time
// back-to-back calls (a captured graph of `copies` launches, per-call time after an L2 flush): an empty kernel
// (launch and drain alone), and the streaming-read kernel over `bytes` of a distinct buffer per launch (a perfect
// weight stream of the same size). Shared by int4_bench.cu (beside each shape) and read_bw.cu (--per-call, the
// bf16 projections' bytes). Exits with a message on a CUDA error, as the benchmarks do.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "l2_flush.cuh"
#include "stream_read.cuh"

namespace aoti_cuda_bench {

__global__ void empty_kernel() {}

// Buffer copies of a back-to-back measurement over `bytes` a call: enough for >= 256 MiB, so every call reads HBM.
inline int copies_for(double bytes) {
  return static_cast<int>(std::min(4096.0, std::max(8.0, std::floor((256.0 * (1 << 20)) / bytes) + 1)));
}

struct CallFloors {
  double empty_us = -1, read_us = -1;
};

inline CallFloors measure_call_floors(std::size_t bytes, int copies, int reps, void* flush, std::size_t flush_bytes) {
  const std::size_t stride = (bytes + 255) / 256 * 256;
  void* buf = nullptr;
  check_or_exit(cudaMalloc(&buf, stride * copies), "cudaMalloc(floor)");
  check_or_exit(cudaMemset(buf, 0x5A, stride * copies), "cudaMemset(floor)");
  int device = 0, sms = 0, per_sm = 0;
  check_or_exit(cudaGetDevice(&device), "cudaGetDevice");
  check_or_exit(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "attribute");
  check_or_exit(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_read_kernel, 512, 0), "occupancy");
  const std::size_t vecs = bytes / 16;
  const unsigned blocks = static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(sms) * per_sm, (vecs + 511) / 512)));
  cudaStream_t stream;
  check_or_exit(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  CallFloors f;
  for (int which = 0; which < 2; ++which) {
    (which == 0 ? f.empty_us : f.read_us) = captured_per_call_us(stream, copies, reps, flush, flush_bytes, [&](int r) {
      if (which == 0) {
        empty_kernel<<<static_cast<unsigned>(sms), 256, 0, stream>>>();
      } else {
        const uint4* p = reinterpret_cast<const uint4*>(static_cast<char*>(buf) + r * stride);
        stream_read_kernel<<<blocks, 512, 0, stream>>>(p, vecs, static_cast<uint4*>(buf));
      }
      return cudaGetLastError();
    });
  }
  cudaStreamDestroy(stream);
  cudaFree(buf);
  return f;
}

}  // namespace aoti_cuda_bench
