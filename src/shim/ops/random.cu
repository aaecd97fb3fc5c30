// Kernels of aoti_torch_cuda_rand / randint_low_out (contract: random.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "shim/ops/random.hpp"

namespace aoti_cuda {
namespace shim {
namespace randop {
namespace {

constexpr int kThreads = 256;

// Elements drawn so far on this device (module globals exist once per device).
__device__ unsigned long long g_drawn = 0;

__global__ void take_base(unsigned long long count, unsigned long long* base) {
  *base = atomicAdd(&g_drawn, count);
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform [0, 1) value with as many random bits as the dtype's significand (so it is exact
// in that dtype and never rounds up to 1).
template <class T, int kDigits>
__device__ __forceinline__ double uniform(uint64_t r) {
  return static_cast<double>(r >> (64 - kDigits)) * (1.0 / static_cast<double>(uint64_t{1} << kDigits));
}

__device__ __forceinline__ void store(void* out, int64_t i, int32_t dtype, bool integers, uint64_t r, int64_t low,
                                      uint64_t range) {
  if (integers) {
    const int64_t v = low + static_cast<int64_t>(r % range);
    switch (dtype) {
      case 0: static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v); return;
      case 1: static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v); return;
      case 2: static_cast<int16_t*>(out)[i] = static_cast<int16_t>(v); return;
      case 3: static_cast<int32_t*>(out)[i] = static_cast<int32_t>(v); return;
      case 4: static_cast<int64_t*>(out)[i] = v; return;
      case 27: static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(v); return;
      case 28: static_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(v); return;
      case 29: static_cast<uint64_t*>(out)[i] = static_cast<uint64_t>(v); return;
      case 5: static_cast<__half*>(out)[i] = __float2half_rn(static_cast<float>(v)); return;
      case 15: static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(static_cast<float>(v)); return;
      case 6: static_cast<float*>(out)[i] = static_cast<float>(v); return;
      case 7: static_cast<double*>(out)[i] = static_cast<double>(v); return;
      default: return;
    }
  }
  switch (dtype) {
    case 5: static_cast<__half*>(out)[i] = __double2half(uniform<__half, 11>(r)); return;
    case 15: static_cast<__nv_bfloat16*>(out)[i] = __double2bfloat16(uniform<__nv_bfloat16, 8>(r)); return;
    case 6: static_cast<float*>(out)[i] = static_cast<float>(uniform<float, 24>(r)); return;
    case 7: static_cast<double*>(out)[i] = uniform<double, 53>(r); return;
    default: return;
  }
}

__global__ void fill_kernel(Problem p, const unsigned long long* base_slot) {
  const uint64_t base = *base_slot;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(p.seed + (base + static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull);
    store(p.out, i, p.dtype, p.integers, r, p.low, p.range);
  }
}

}  // namespace

bool supports_uniform(int32_t dtype) { return dtype == 5 || dtype == 15 || dtype == 6 || dtype == 7; }

bool supports_integers(int32_t dtype) {
  switch (dtype) {
    case 0: case 1: case 2: case 3: case 4: case 27: case 28: case 29: case 5: case 15: case 6: case 7: return true;
    default: return false;
  }
}

int fill(const Problem& p, void* base_slot, void* stream_ptr) {
  if (p.count == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  auto* base = static_cast<unsigned long long*>(base_slot);
  take_base<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(p.count), base);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return static_cast<int>(err);
  const int64_t blocks = (p.count + kThreads - 1) / kThreads;
  fill_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), kThreads, 0, stream>>>(p, base);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace randop
}  // namespace shim
}  // namespace aoti_cuda
