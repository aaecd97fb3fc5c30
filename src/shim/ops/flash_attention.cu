// The attention kernel; see flash_attention.hpp for what it computes and how.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA), lane = 4 * g + t (g = lane / 4, t = lane % 4):
//   A 16x16 (row-major): reg 0 = row g, cols 2t..2t+1; reg 1 = row g+8, same cols;
//                        reg 2 = row g, cols 8+2t..; reg 3 = row g+8, cols 8+2t..
//   B 16x8 (col-major):  reg 0 = rows (k) 2t..2t+1 of col (n) g; reg 1 = rows 8+2t..
//   C 16x8 (fp32):       c0, c1 = row g, cols 2t, 2t+1; c2, c3 = row g+8, same cols
// So the scores of two adjacent 8-key column tiles, rounded to 16 bits, are exactly the A
// fragment of the p.v multiply over those 16 keys: probabilities never leave registers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "shim/ops/flash_attention.hpp"

namespace aoti_cuda {
namespace shim {
namespace attention {
namespace {

constexpr int kKeysPerTile = 64;
constexpr int kPad = 8;  // shared-memory rows are head_dim + 8 elements: 16-byte aligned, banks staggered
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <bool kHalf>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kHalf) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats rounded to 16 bits each, `lo` in the low half (the lower index of a fragment pair).
template <bool kHalf>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  uint32_t bits;
  if constexpr (kHalf) {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, sizeof(bits));
  } else {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, sizeof(bits));
  }
  return bits;
}

template <bool kHalf>
__device__ __forceinline__ uint16_t round16(float x) {
  if constexpr (kHalf) return __half_as_ushort(__float2half_rn(x));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ __forceinline__ uint32_t join(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Rows [key0, key0 + 64) of a [kv_len, kDim] operand into shared memory; rows past kv_len
// are zeros (masked scores multiply them, and 0 * garbage could be NaN).
template <int kDim>
__device__ __forceinline__ void stage_tile(uint16_t* tile, const uint16_t* src, int64_t row_stride, int64_t key0,
                                           int64_t kv_len, bool vectors) {
  constexpr int kChunks = kDim / 8;  // 8 elements = 16 bytes
  for (int c = threadIdx.x; c < kKeysPerTile * kChunks; c += blockDim.x) {
    const int row = c / kChunks, col = (c % kChunks) * 8;
    uint16_t* dst = tile + row * (kDim + kPad) + col;
    const int64_t key = key0 + row;
    if (key >= kv_len) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    } else if (vectors) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + key * row_stride + col);
    } else {
      for (int e = 0; e < 8; ++e) dst[e] = src[key * row_stride + col + e];
    }
  }
}

template <bool kHalf, int kDim, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) flash_forward(Problem p, bool vectors) {
  constexpr int kRows = 16 * kWarps;
  constexpr int kLd = kDim + kPad;
  __shared__ alignas(16) uint16_t k_tile[kKeysPerTile * kLd];
  __shared__ alignas(16) uint16_t v_tile[kKeysPerTile * kLd];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t block_row = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kRows;  // longest causal first
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const auto* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const auto* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + kv_h * p.k_stride[1];
  const auto* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + kv_h * p.v_stride[1];
  const int64_t row0 = block_row + warp * 16;  // this warp's first query row
  const int64_t rows[2] = {row0 + g, row0 + g + 8};

  // The warp's queries as A fragments, one per 16 columns (read once: element by element).
  uint32_t qa[kDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kDim / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int col = kk * 16 + half * 8 + 2 * t;
        const uint16_t* src = q + rows[r] * p.q_stride[2] + col;
        qa[kk][r + 2 * half] = rows[r] < p.q_len ? join(src[0], src[1]) : 0u;
      }
    }
  }

  float acc[kDim / 8][4];
#pragma unroll
  for (int n = 0; n < kDim / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this thread's share; the quad's four are added at the end
  const float scale = p.scale * kLog2e;  // scores in log2 units: exp2 below

  int64_t kv_end = p.kv_len;
  if (p.causal && block_row + kRows < kv_end) kv_end = block_row + kRows;
  for (int64_t key0 = 0; key0 < kv_end; key0 += kKeysPerTile) {
    __syncthreads();  // every warp is done with the previous tiles
    stage_tile<kDim>(k_tile, k, p.k_stride[2], key0, p.kv_len, vectors);
    stage_tile<kDim>(v_tile, v, p.v_stride[2], key0, p.kv_len, vectors);
    __syncthreads();
    if (row0 >= p.q_len || (p.causal && key0 > row0 + 15)) continue;  // nothing visible to this warp here

    // Scores of the warp's 16 rows against the tile's 64 keys: 8 C fragments.
    float s[kKeysPerTile / 8][4];
#pragma unroll
    for (int j = 0; j < kKeysPerTile / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      const uint16_t* kp = k_tile + (j * 8 + g) * kLd + 2 * t;
#pragma unroll
      for (int kk = 0; kk < kDim / 16; ++kk) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kp + kk * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kp + kk * 16 + 8);
        mma<kHalf>(s[j], qa[kk], b0, b1);
      }
    }
    // Scale, mask, and the running maximum of each row (over the quad that holds it).
    float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int j = 0; j < kKeysPerTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = key0 + j * 8 + 2 * t + (e & 1);
        const int64_t row = rows[e >> 1];
        const bool hidden = key >= p.kv_len || (p.causal && key > row);
        s[j][e] = hidden ? -INFINITY : s[j][e] * scale;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
      }
    }
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float base = tile_max[r] == -INFINITY ? 0.f : tile_max[r];  // no key seen yet: avoid inf - inf
      rescale[r] = exp2f(row_max[r] - base);
      row_max[r] = tile_max[r];
      tile_max[r] = base;
      row_sum[r] *= rescale[r];
    }
#pragma unroll
    for (int j = 0; j < kKeysPerTile / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - tile_max[e >> 1]);
        row_sum[e >> 1] += s[j][e];
      }
    }
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n) {
      acc[n][0] *= rescale[0];
      acc[n][1] *= rescale[0];
      acc[n][2] *= rescale[1];
      acc[n][3] *= rescale[1];
    }
    // acc += p . v, 16 keys per step; p's A fragment is two score fragments side by side.
#pragma unroll
    for (int step = 0; step < kKeysPerTile / 16; ++step) {
      const uint32_t pa[4] = {pack<kHalf>(s[2 * step][0], s[2 * step][1]), pack<kHalf>(s[2 * step][2], s[2 * step][3]),
                              pack<kHalf>(s[2 * step + 1][0], s[2 * step + 1][1]),
                              pack<kHalf>(s[2 * step + 1][2], s[2 * step + 1][3])};
      const uint16_t* vp = v_tile + (step * 16 + 2 * t) * kLd + g;
#pragma unroll
      for (int n = 0; n < kDim / 8; ++n) {
        const uint16_t* col = vp + n * 8;
        mma<kHalf>(acc[n], pa, join(col[0], col[kLd]), join(col[8 * kLd], col[9 * kLd]));
      }
    }
  }

  // Normalize and store; lse from the quad's summed share.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    inv[r] = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
  }
  auto* out = static_cast<uint16_t*>(p.out) + b * p.out_stride[0] + h * p.out_stride[1];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= p.q_len) continue;
    uint16_t* dst = out + rows[r] * p.out_stride[2] + 2 * t;
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n) {
      dst[n * 8] = round16<kHalf>(acc[n][2 * r] * inv[r]);
      dst[n * 8 + 1] = round16<kHalf>(acc[n][2 * r + 1] * inv[r]);
    }
    if (p.lse != nullptr && t == 0) {
      p.lse[(b * p.heads + h) * p.q_len + rows[r]] =
          row_sum[r] > 0.f ? (row_max[r] + log2f(row_sum[r])) * kLn2 : -INFINITY;
    }
  }
}

template <bool kHalf, int kDim>
int launch_dim(const Problem& p, void* stream, int rows, bool vectors) {
  const dim3 grid(static_cast<unsigned>((p.q_len + rows - 1) / rows), static_cast<unsigned>(p.heads),
                  static_cast<unsigned>(p.batch));
  auto s = static_cast<cudaStream_t>(stream);
  if (rows == 64) flash_forward<kHalf, kDim, 4><<<grid, 128, 0, s>>>(p, vectors);
  else flash_forward<kHalf, kDim, 2><<<grid, 64, 0, s>>>(p, vectors);
  return static_cast<int>(cudaGetLastError());
}

// 16-byte rows of K and V (aligned base, strides multiples of 8 elements): vector staging.
bool vector_staging(const Problem& p) {
  auto aligned = [](const void* ptr, const int64_t (&stride)[3]) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 &&
           stride[2] % 8 == 0;
  };
  return aligned(p.k, p.k_stride) && aligned(p.v, p.v_stride);
}

}  // namespace

bool supports_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

int rows_per_block(const Problem& p, int sm_count) {
  const int64_t blocks64 = (p.q_len + 63) / 64 * p.heads * p.batch;
  return blocks64 >= 2 * static_cast<int64_t>(sm_count) ? 64 : 32;
}

int launch(const Problem& p, void* stream, int sm_count) {
  if (p.q_len == 0 || p.batch == 0 || p.heads == 0) return 0;
  if (!supports_head_dim(p.head_dim) || p.kv_heads <= 0 || p.heads % p.kv_heads != 0) return cudaErrorInvalidValue;
  const int rows = rows_per_block(p, sm_count);
  const bool vectors = vector_staging(p);
  if (p.fp16) return p.head_dim == 64 ? launch_dim<true, 64>(p, stream, rows, vectors)
                                      : launch_dim<true, 128>(p, stream, rows, vectors);
  return p.head_dim == 64 ? launch_dim<false, 64>(p, stream, rows, vectors)
                          : launch_dim<false, 128>(p, stream, rows, vectors);
}

}  // namespace attention
}  // namespace shim
}  // namespace aoti_cuda
