// Shared by the kernel benchmarks (int4_bench.cu, gemv_bench.cu): evicting the GPU's L2 cache
// between timed calls, so that a call's operands come from HBM as they do in a model (the
// H200's L2 holds 60 MB).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

}  // namespace aoti_cuda_bench
