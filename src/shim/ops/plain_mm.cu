// Kernels of ExecuTorch's int{4,5,6,8}_plain_mm ops (formats: plain_mm.hpp).
//
// W is dequantized in fp32 and multiplied with up to kRows activation rows at a time. How the
// weights are read depends on their layout (Problem::by32 / by8):
//   - groups of a multiple of 32, 16-byte aligned packed bits (ExecuTorch's exports): 32
//     consecutive k per 16-byte load (two for int8) and one scale/zero decode per 32. For one or
//     two rows (decode) a warp per output column, lane l taking chunks l, l + 32, ...
//     (plain_mm_kernel); for more rows a block per 8 columns, which loads each activation once
//     for the 8 (plain_mm_by32_kernel).
//   - groups of a multiple of 8: 8 k per 4-byte word, a warp per column;
//   - anything else: one k at a time, a warp per column.
// These kernels are bound by their instruction count (about five per weight), not by memory
// (docs/shim-abi.md has the H200 figures). ExecuTorch sends prefill (M > 4) through its own
// dequantize + GEMM graph, so larger M only has to be correct.
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

// a / b for the kernel's non-negative 32-bit quantities: a shift when b is a power of two
// (b_shift >= 0, every ExecuTorch group size), else 32-bit division (64-bit division costs
// dozens of instructions, and it runs for every group of every row).
__device__ __forceinline__ uint32_t divide(uint32_t a, uint32_t b, int b_shift) {
  return b_shift >= 0 ? a >> b_shift : a / b;
}
__device__ __forceinline__ uint32_t group_of(const Problem& p, int64_t k) {
  return divide(static_cast<uint32_t>(k), static_cast<uint32_t>(p.group), p.group_shift);
}
__device__ __forceinline__ int64_t super_of(const Problem& p, uint32_t g) {
  return divide(g, static_cast<uint32_t>(p.groups_per_super), p.groups_per_super_shift);
}
// The float value of a small unsigned integer: two integer-pipe instructions instead of a
// conversion (2^23 + v is exact in fp32 for v < 2^23).
__device__ __forceinline__ float small_to_float(uint32_t v) { return __uint_as_float(0x4B000000u | v) - 8388608.0f; }

// W[n][k] in fp32 for one format.
template <Kind KIND>
__device__ __forceinline__ float weight(const Problem& p, int64_t n, int64_t k) {
  const int64_t groups = p.groups;
  const int64_t g = group_of(p, k);
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
    const int64_t s = n * p.supers + super_of(p, static_cast<uint32_t>(g));
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

// A group's scale and zero point (int6: 32, its values' offset; int8: zero + 128, see decode8).
struct GroupParams {
  float scale = 0.f;
  float zero = 0.f;
  float zero_scaled = 0.f;  ///< -zero * scale: W = q * scale + zero_scaled, one FMA
};

template <Kind KIND>
__device__ __forceinline__ GroupParams group_params(const Problem& p, int64_t n, uint32_t g) {
  GroupParams gp;
  const int64_t groups = p.groups;
  if constexpr (KIND == Kind::kInt4Legacy) {
    gp.scale = bf16_at(p.scale, g * p.n + n);
    gp.zero = bf16_at(p.zero, g * p.n + n);
  } else if constexpr (KIND == Kind::kInt8) {
    gp.scale = bf16_at(p.scale, n * groups + g);
    gp.zero = code(p.zero, n * groups + g, true) + 128.f;  // decode8 reads q + 128
  } else {
    const int64_t i = n * groups + g;
    const int64_t s = n * p.supers + super_of(p, g);
    gp.scale = code(p.scale, i, p.scale_signed) * half_at(p.scale_step, s);
    if constexpr (KIND != Kind::kInt6) gp.zero = code(p.zero, i, p.zero_signed) * half_at(p.zero_step, s);
    if constexpr (KIND == Kind::kInt6) gp.zero = 32.f;  // q = u - 32
  }
  gp.zero_scaled = -gp.zero * gp.scale;
  return gp;
}

// Eight consecutive weights (k0 a multiple of 8) from their packed bits: `low` holds the eight
// low nibbles (int4/5/6: byte j/2, even j low) or, for int8, the first four bytes with `even`
// the next four; `even` / `odd` the int5 byte or the int6 even/odd bytes of this word of 8.
template <Kind KIND>
__device__ __forceinline__ void decode8(uint32_t low, uint32_t even, uint32_t odd, GroupParams gp, float (&w)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if constexpr (KIND == Kind::kInt8) {
      // The signed byte offset by 128 into 0..255, the offset folded into zero_scaled.
      const uint32_t word = j < 4 ? low : even;
      const uint32_t biased = ((word >> (8 * (j & 3))) & 0xFFu) ^ 0x80u;
      w[j] = fmaf(small_to_float(biased), gp.scale, gp.zero_scaled);
    } else {
      const uint32_t nib = (low >> (4 * j)) & 0xFu;
      if constexpr (KIND == Kind::kInt5) {
        const uint32_t bit = (even >> ((j & 1) * 4 + (j >> 1))) & 1u;
        w[j] = fmaf(small_to_float(nib | (bit << 4)), gp.scale, gp.zero_scaled);
      } else if constexpr (KIND == Kind::kInt6) {
        const uint32_t bits = (((j & 1) ? odd : even) >> (2 * (j >> 1))) & 3u;
        w[j] = fmaf(small_to_float(nib | (bits << 4)), gp.scale, gp.zero_scaled);  // zero_scaled: -32 * scale
      } else {
        w[j] = fmaf(small_to_float(nib), gp.scale, gp.zero_scaled);
      }
    }
  }
}

// Eight activations x[k .. k+7] as floats: one 16-byte load per 8 (bf16 / fp16) or two
// (fp32) when `vec` (16-byte aligned rows), else element by element.
template <class T>
__device__ __forceinline__ void load8(const T* x, bool vec, float (&v)[8]) {
  if constexpr (sizeof(T) == 2) {
    if (vec) {
      const uint4 raw = *reinterpret_cast<const uint4*>(x);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = load_act(e + j);
      return;
    }
  } else {
    if (vec) {
      const float4 a = reinterpret_cast<const float4*>(x)[0], b = reinterpret_cast<const float4*>(x)[1];
      v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = load_act(x + j);
}

template <class T>
__device__ __forceinline__ void accumulate8(const T* x, int64_t ldx, int rows, bool vec, const float (&w)[8],
                                            float (&acc)[kRows]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {
      float v[8];
      load8(x + r * ldx, vec, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] += w[j] * v[j];
    }
  }
}

// The packed bits and group parameters of one column's 32-wide k chunk (by32 layout).
struct Chunk {
  uint4 a;            ///< int4/5/6: the 32 low nibbles; int8: the first 16 bytes
  uint4 b;            ///< int8: the last 16 bytes
  uint2 high;         ///< int5: .x, one byte per 8 k; int6: .x even, .y odd bytes
  GroupParams gp;
};

template <Kind KIND>
__device__ __forceinline__ Chunk load_chunk(const Problem& p, const uint8_t* q, const uint8_t* qh, int64_t n,
                                            int64_t k0) {
  Chunk ch;
  if constexpr (KIND == Kind::kInt8) {
    ch.a = reinterpret_cast<const uint4*>(q + k0)[0];
    ch.b = reinterpret_cast<const uint4*>(q + k0)[1];
  } else {
    ch.a = *reinterpret_cast<const uint4*>(q + k0 / 2);
  }
  if constexpr (KIND == Kind::kInt5) ch.high.x = *reinterpret_cast<const uint32_t*>(qh + k0 / 8);
  if constexpr (KIND == Kind::kInt6) ch.high = *reinterpret_cast<const uint2*>(qh + k0 / 4);
  ch.gp = group_params<KIND>(p, n, group_of(p, k0));
  return ch;
}

// Weights k0 + 8i .. k0 + 8i + 7 of a loaded chunk.
template <Kind KIND>
__device__ __forceinline__ void chunk_weights(const Chunk& ch, int i, float (&w)[8]) {
  uint32_t low, even = 0, odd = 0;
  if constexpr (KIND == Kind::kInt8) {
    const uint4& v = i < 2 ? ch.a : ch.b;
    low = (i & 1) ? v.z : v.x;
    even = (i & 1) ? v.w : v.y;
  } else {
    low = i == 0 ? ch.a.x : i == 1 ? ch.a.y : i == 2 ? ch.a.z : ch.a.w;
    if constexpr (KIND == Kind::kInt5) even = (ch.high.x >> (8 * i)) & 0xFFu;
    if constexpr (KIND == Kind::kInt6) {
      even = (ch.high.x >> (8 * i)) & 0xFFu;
      odd = (ch.high.y >> (8 * i)) & 0xFFu;
    }
  }
  decode8<KIND>(low, even, odd, ch.gp, w);
}

template <Kind KIND, class T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, 4) plain_mm_kernel(Problem p) {
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (n >= p.n) return;  // whole warps leave together: the shuffles below stay full-warp
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  const uint8_t* q = static_cast<const uint8_t*>(p.q) + n * (KIND == Kind::kInt8 ? p.k : p.k / 2);
  const uint8_t* qh = nullptr;  // this row's high bits (int5, int6)
  if constexpr (KIND == Kind::kInt5) qh = static_cast<const uint8_t*>(p.qh) + n * (p.k / 8);
  if constexpr (KIND == Kind::kInt6) qh = static_cast<const uint8_t*>(p.qh) + n * (p.k / 4);
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows; m0 < p.m; m0 += static_cast<int64_t>(gridDim.y) * kRows) {
    const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.m - m0));
    const T* xm = x + m0 * p.ldx;
    float acc[kRows] = {0.f, 0.f, 0.f, 0.f};
    if (p.by32) {
      // Lane l takes the 32-wide chunks l, l + 32, ...; kDepth of them are loaded before any is
      // used, so that several loads are in flight (decode is bound by their latency).
      constexpr int kDepth = 2;
      for (int64_t base = 32 * lane; base < p.k; base += kDepth * 1024) {
        Chunk ch[kDepth];
#pragma unroll
        for (int u = 0; u < kDepth; ++u) {
          if (base + 1024 * u < p.k) ch[u] = load_chunk<KIND>(p, q, qh, n, base + 1024 * u);
        }
#pragma unroll
        for (int u = 0; u < kDepth; ++u) {
          if (base + 1024 * u < p.k) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float w[8];
              chunk_weights<KIND>(ch[u], i, w);
              accumulate8(xm + base + 1024 * u + 8 * i, p.ldx, rows, p.x_vec, w, acc);
            }
          }
        }
      }
    } else if (p.by8) {  // lane l takes k = 8l .. 8l+7, then 8l + 256 ..
      for (int64_t k0 = 8 * lane; k0 < p.k; k0 += 256) {
        const GroupParams gp = group_params<KIND>(p, n, group_of(p, k0));
        uint32_t low, even = 0, odd = 0;
        if constexpr (KIND == Kind::kInt8) {
          low = reinterpret_cast<const uint32_t*>(q + k0)[0];
          even = reinterpret_cast<const uint32_t*>(q + k0)[1];
        } else {
          low = *reinterpret_cast<const uint32_t*>(q + k0 / 2);
          if constexpr (KIND == Kind::kInt5) {
            even = qh[k0 / 8];
          } else if constexpr (KIND == Kind::kInt6) {
            const int64_t word = (k0 >> 3) & 3;
            even = qh[8 * (k0 >> 5) + word];
            odd = qh[8 * (k0 >> 5) + 4 + word];
          }
        }
        float w[8];
        decode8<KIND>(low, even, odd, gp, w);
        accumulate8(xm + k0, p.ldx, rows, false, w, acc);
      }
    } else {
      for (int64_t k = lane; k < p.k; k += 32) {
        const float w = weight<KIND>(p, n, k);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) acc[r] += w * load_act(xm + r * p.ldx + k);
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

// The 32-bit word `i` (0..3) of a 16-byte load.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The by32 layout (plain_mm.hpp: Problem::by32): a block of kBy32Threads threads computes
// kBy32Cols output columns. Thread t takes the 32-wide k chunks t, t + kBy32Threads, ... of
// all kBy32Cols columns: one 16-byte load of packed bits per column and chunk (eight loads in
// flight per thread), and its activations loaded once for the eight columns. The partial sums
// are reduced across the warp, then across the block's warps through shared memory.
constexpr int kBy32Threads = 128;
constexpr int kBy32Cols = 8;

template <Kind KIND, class T>
__global__ void __launch_bounds__(kBy32Threads) plain_mm_by32_kernel(Problem p) {
  __shared__ float partial[kBy32Threads / 32][kRows][kBy32Cols];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBy32Cols;
  const int cols = static_cast<int>(min(static_cast<int64_t>(kBy32Cols), p.n - n0));
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  const int64_t q_row = KIND == Kind::kInt8 ? p.k : p.k / 2;
  const int64_t qh_row = KIND == Kind::kInt5 ? p.k / 8 : p.k / 4;
  const int64_t chunks = p.k / 32;
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * kRows; m0 < p.m; m0 += static_cast<int64_t>(gridDim.y) * kRows) {
    const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.m - m0));
    const T* xm = x + m0 * p.ldx;
    float acc[kRows][kBy32Cols];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < kBy32Cols; ++j) acc[r][j] = 0.f;
    }
    for (int64_t c = t; c < chunks; c += kBy32Threads) {
      const int64_t k0 = 32 * c;
      const uint32_t g = group_of(p, k0);
      uint4 packed[kBy32Cols], packed2[kBy32Cols];  // packed2: int8's second 16 bytes
      uint2 high[kBy32Cols];                        // int5: .x; int6: .x even, .y odd bytes
      GroupParams gp[kBy32Cols];
#pragma unroll
      for (int j = 0; j < kBy32Cols; ++j) {
        if (j < cols) {
          const int64_t n = n0 + j;
          const uint8_t* q = static_cast<const uint8_t*>(p.q) + n * q_row;
          if constexpr (KIND == Kind::kInt8) {
            packed[j] = reinterpret_cast<const uint4*>(q + k0)[0];
            packed2[j] = reinterpret_cast<const uint4*>(q + k0)[1];
          } else {
            packed[j] = *reinterpret_cast<const uint4*>(q + k0 / 2);
          }
          const uint8_t* qh = nullptr;  // int5 / int6 only (null otherwise)
          if constexpr (KIND == Kind::kInt5 || KIND == Kind::kInt6) qh = static_cast<const uint8_t*>(p.qh) + n * qh_row;
          if constexpr (KIND == Kind::kInt5) high[j].x = *reinterpret_cast<const uint32_t*>(qh + k0 / 8);
          if constexpr (KIND == Kind::kInt6) high[j] = *reinterpret_cast<const uint2*>(qh + k0 / 4);
          gp[j] = group_params<KIND>(p, n, g);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // k0 + 8i .. k0 + 8i + 7
        float xv[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) load8(xm + r * p.ldx + k0 + 8 * i, p.x_vec, xv[r]);
        }
#pragma unroll
        for (int j = 0; j < kBy32Cols; ++j) {
          if (j < cols) {
            uint32_t low, even = 0, odd = 0;
            if constexpr (KIND == Kind::kInt8) {
              const uint4& v = i < 2 ? packed[j] : packed2[j];
              low = word_of(v, 2 * (i & 1));
              even = word_of(v, 2 * (i & 1) + 1);
            } else {
              low = word_of(packed[j], i);
              if constexpr (KIND == Kind::kInt5) even = (high[j].x >> (8 * i)) & 0xFFu;
              if constexpr (KIND == Kind::kInt6) {
                even = (high[j].x >> (8 * i)) & 0xFFu;
                odd = (high[j].y >> (8 * i)) & 0xFFu;
              }
            }
            float w[8];
            decode8<KIND>(low, even, odd, gp[j], w);
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              if (r < rows) {
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[r][j] = fmaf(w[e], xv[r][e], acc[r][j]);
              }
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int j = 0; j < kBy32Cols; ++j) {
        float v = acc[r][j];
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0) partial[warp][r][j] = v;
      }
    }
    __syncthreads();
    if (t < kRows * kBy32Cols) {
      const int r = t / kBy32Cols, j = t % kBy32Cols;
      if (r < rows && j < cols) {
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < kBy32Threads / 32; ++w) v += partial[w][r][j];
        store_act(out + (m0 + r) * p.n + n0 + j, v);
      }
    }
    __syncthreads();  // partial is rewritten by the next row tile
  }
}

template <Kind KIND, class T>
void launch_kind(const Problem& p, cudaStream_t stream) {
  const unsigned row_tiles = static_cast<unsigned>(std::min<int64_t>((p.m + kRows - 1) / kRows, 65535));
  // Decode (one or two rows): a warp per column keeps every SM full; more rows: a block per eight
  // columns, which loads each activation once for all eight (measured on an H200: docs/shim-abi.md).
  if (p.by32 && p.m > 2) {
    const dim3 grid(static_cast<unsigned>((p.n + kBy32Cols - 1) / kBy32Cols), row_tiles);
    plain_mm_by32_kernel<KIND, T><<<grid, kBy32Threads, 0, stream>>>(p);
  } else {
    const dim3 grid(static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock), row_tiles);
    plain_mm_kernel<KIND, T><<<grid, kWarpsPerBlock * 32, 0, stream>>>(p);
  }
}

template <class T>
int launch_typed(const Problem& p, cudaStream_t stream) {
  switch (p.kind) {
    case Kind::kInt4Legacy: launch_kind<Kind::kInt4Legacy, T>(p, stream); break;
    case Kind::kInt4: launch_kind<Kind::kInt4, T>(p, stream); break;
    case Kind::kInt5: launch_kind<Kind::kInt5, T>(p, stream); break;
    case Kind::kInt6: launch_kind<Kind::kInt6, T>(p, stream); break;
    case Kind::kInt8: launch_kind<Kind::kInt8, T>(p, stream); break;
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
