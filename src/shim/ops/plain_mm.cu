// Kernel of ExecuTorch's int{4,5,6,8}_plain_mm ops (formats: plain_mm.hpp).
//
// One warp per output column n: the lanes walk K together, dequantize W[n][k] once and multiply
// it with up to kRows activation rows, then reduce across the warp. When groups are multiples of
// 8 and the packed weights 4-byte aligned (every ExecuTorch export), each lane takes 8
// consecutive k at a time: one aligned word of packed bits, one scale/zero decode; otherwise one
// k at a time. The ops exist for decode (ExecuTorch routes M <= 4 to them), where the work is
// bound by reading the weights once; larger M re-reads them every kRows rows, which is correct
// but not fast (the exporter sends prefill through its own dequantize + GEMM graph instead).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "shim/ops/plain_mm.hpp"

namespace aoti_cuda {
namespace shim {
namespace plainmm {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRows = 4;

__device__ __forceinline__ float load_act(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load_act(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_act(const float* p) { return *p; }
__device__ __forceinline__ void store_act(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store_act(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_act(float* p, float v) { *p = v; }

__device__ __forceinline__ float code(const void* base, int64_t i, bool is_signed) {
  const uint8_t b = static_cast<const uint8_t*>(base)[i];
  return is_signed ? static_cast<float>(static_cast<int8_t>(b)) : static_cast<float>(b);
}
__device__ __forceinline__ float bf16_at(const void* base, int64_t i) {
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}
__device__ __forceinline__ float half_at(const void* base, int64_t i) {
  return __half2float(static_cast<const __half*>(base)[i]);
}
// Low four bits of element k of a nibble-packed row (even k in the low nibble).
__device__ __forceinline__ uint32_t nibble(const uint8_t* row, int64_t k) {
  return (row[k >> 1] >> ((k & 1) * 4)) & 0xFu;
}

// W[n][k] in fp32 for one format.
template <Kind KIND>
__device__ __forceinline__ float weight(const Problem& p, int64_t n, int64_t k) {
  const int64_t groups = p.k / p.group;
  const int64_t g = k / p.group;
  if constexpr (KIND == Kind::kInt4Legacy) {
    const float q = static_cast<float>(nibble(static_cast<const uint8_t*>(p.q) + n * (p.k / 2), k));
    const int64_t i = g * p.n + n;
    return (q - bf16_at(p.zero, i)) * bf16_at(p.scale, i);
  } else if constexpr (KIND == Kind::kInt8) {
    const float q = static_cast<float>(static_cast<const int8_t*>(p.q)[n * p.k + k]);
    const int64_t i = n * groups + g;
    return (q - code(p.zero, i, true)) * bf16_at(p.scale, i);
  } else {
    const int64_t i = n * groups + g;
    const int64_t s = n * p.supers + g / (groups / p.supers);
    const uint32_t low = nibble(static_cast<const uint8_t*>(p.q) + n * (p.k / 2), k);
    const int64_t c = k >> 5;
    const int64_t w = (k >> 3) & 3;
    const int64_t j = k & 7;
    const float scale = code(p.scale, i, p.scale_signed) * half_at(p.scale_step, s);
    if constexpr (KIND == Kind::kInt4) {
      const float zero = code(p.zero, i, p.zero_signed) * half_at(p.zero_step, s);
      return (static_cast<float>(low) - zero) * scale;
    } else if constexpr (KIND == Kind::kInt5) {
      const uint8_t byte = static_cast<const uint8_t*>(p.qh)[n * (p.k / 8) + 4 * c + w];
      const uint32_t bit = (byte >> ((j & 1) * 4 + (j >> 1))) & 1u;
      const float zero = code(p.zero, i, p.zero_signed) * half_at(p.zero_step, s);
      return scale * (static_cast<float>(low | (bit << 4)) - zero);
    } else {  // kInt6
      const uint8_t byte = static_cast<const uint8_t*>(p.qh)[n * (p.k / 4) + 8 * c + (j & 1) * 4 + w];
      const uint32_t bits = (byte >> (2 * (j >> 1))) & 3u;
      return static_cast<float>(static_cast<int>(low | (bits << 4)) - 32) * scale;
    }
  }
}

// W[n][k0 .. k0+7] for k0 a multiple of 8 inside one group (group % 8 == 0): the packed bits of
// the eight come from one aligned word and the group's scale and zero are decoded once.
template <Kind KIND>
__device__ __forceinline__ void weights8(const Problem& p, int64_t n, int64_t k0, float (&w)[8]) {
  const int64_t groups = p.k / p.group;
  const int64_t g = k0 / p.group;
  if constexpr (KIND == Kind::kInt8) {
    const int64_t i = n * groups + g;
    const float zero = code(p.zero, i, true), scale = bf16_at(p.scale, i);
    const uint32_t* q = reinterpret_cast<const uint32_t*>(static_cast<const int8_t*>(p.q) + n * p.k + k0);
    const uint32_t lo = q[0], hi = q[1];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t word = j < 4 ? lo : hi;
      w[j] = (static_cast<float>(static_cast<int8_t>((word >> (8 * (j & 3))) & 0xFFu)) - zero) * scale;
    }
    return;
  } else {
    const uint32_t low = *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(p.q) + n * (p.k / 2) + k0 / 2);
    float scale, zero = 0.f;
    if constexpr (KIND == Kind::kInt4Legacy) {
      const int64_t i = g * p.n + n;
      scale = bf16_at(p.scale, i);
      zero = bf16_at(p.zero, i);
    } else {
      const int64_t i = n * groups + g;
      const int64_t s = n * p.supers + g / (groups / p.supers);
      scale = code(p.scale, i, p.scale_signed) * half_at(p.scale_step, s);
      if constexpr (KIND != Kind::kInt6) zero = code(p.zero, i, p.zero_signed) * half_at(p.zero_step, s);
    }
    uint32_t even = 0, odd = 0;  // int5 / int6 high bits of this word of 8
    if constexpr (KIND == Kind::kInt5) {
      even = static_cast<const uint8_t*>(p.qh)[n * (p.k / 8) + k0 / 8];
    } else if constexpr (KIND == Kind::kInt6) {
      const int64_t c = k0 >> 5, word = (k0 >> 3) & 3;
      const uint8_t* row = static_cast<const uint8_t*>(p.qh) + n * (p.k / 4) + 8 * c;
      even = row[word];
      odd = row[4 + word];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t nib = (low >> (4 * j)) & 0xFu;
      if constexpr (KIND == Kind::kInt5) {
        const uint32_t bit = (even >> ((j & 1) * 4 + (j >> 1))) & 1u;
        w[j] = scale * (static_cast<float>(nib | (bit << 4)) - zero);
      } else if constexpr (KIND == Kind::kInt6) {
        const uint32_t bits = (((j & 1) ? odd : even) >> (2 * (j >> 1))) & 3u;
        w[j] = static_cast<float>(static_cast<int>(nib | (bits << 4)) - 32) * scale;
      } else {
        w[j] = (static_cast<float>(nib) - zero) * scale;
      }
    }
  }
}

template <Kind KIND, class T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) plain_mm_kernel(Problem p) {
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (n >= p.n) return;  // whole warps leave together: the shuffles below stay full-warp
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows; m0 < p.m; m0 += static_cast<int64_t>(gridDim.y) * kRows) {
    const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.m - m0));
    float acc[kRows] = {0.f, 0.f, 0.f, 0.f};
    if (p.by8) {  // lane l takes k = 8l .. 8l+7, then 8l + 256 ..
      for (int64_t k0 = 8 * lane; k0 < p.k; k0 += 256) {
        float w[8];
        weights8<KIND>(p, n, k0, w);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) {
            const T* xr = x + (m0 + r) * p.ldx + k0;
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r] += w[j] * load_act(xr + j);
          }
        }
      }
    } else {
      for (int64_t k = lane; k < p.k; k += 32) {
        const float w = weight<KIND>(p, n, k);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) acc[r] += w * load_act(x + (m0 + r) * p.ldx + k);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = acc[r];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0 && r < rows) store_act(out + (m0 + r) * p.n + n, v);
    }
  }
}

template <class T>
int launch_typed(const Problem& p, cudaStream_t stream) {
  const dim3 block(kWarpsPerBlock * 32);
  const dim3 grid(static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>(std::min<int64_t>((p.m + kRows - 1) / kRows, 65535)));
  switch (p.kind) {
    case Kind::kInt4Legacy: plain_mm_kernel<Kind::kInt4Legacy, T><<<grid, block, 0, stream>>>(p); break;
    case Kind::kInt4: plain_mm_kernel<Kind::kInt4, T><<<grid, block, 0, stream>>>(p); break;
    case Kind::kInt5: plain_mm_kernel<Kind::kInt5, T><<<grid, block, 0, stream>>>(p); break;
    case Kind::kInt6: plain_mm_kernel<Kind::kInt6, T><<<grid, block, 0, stream>>>(p); break;
    case Kind::kInt8: plain_mm_kernel<Kind::kInt8, T><<<grid, block, 0, stream>>>(p); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch(const Problem& p, void* stream) {
  if (p.m == 0 || p.n == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p.x_dtype) {
    case 15: return launch_typed<__nv_bfloat16>(p, s);
    case 5: return launch_typed<__half>(p, s);
    case 6: return launch_typed<float>(p, s);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace plainmm
}  // namespace shim
}  // namespace aoti_cuda
