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
#include "shim/ops/ptx.cuh"
#include "shim/ops/shared_memory.cuh"

namespace aoti_cuda {
namespace shim {
namespace attention {
namespace {

using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::shared_address;

constexpr int kPad = 8;  // shared-memory rows are head_dim + 8 elements: 16-byte aligned, banks staggered
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <bool kHalf>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kHalf) ptx::mma_f16(c, a, b0, b1);
  else ptx::mma_bf16(c, a, b0, b1);
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

// Keys per shared-memory tile (head_dim 128: 32 keys; 64: 64 keys): one stage, a K and a V
// tile, is 17-18 KiB, so the pipeline's stages share the multiprocessor with other blocks.
template <int kDim>
struct KeysPerTile {
  static constexpr int value = kDim >= 128 ? 32 : 64;
};

// Rows [key0, key0 + keys) of a [kv_len, kDim] operand into a shared-memory tile, as
// asynchronous 16-byte copies (`vectors`) or element by element; rows past kv_len are zeros
// (masked scores multiply them, and 0 * garbage could be NaN).
template <int kDim>
__device__ __forceinline__ void stage_tile(uint16_t* tile, const uint16_t* src, int64_t row_stride, int64_t key0,
                                           int64_t kv_len, bool vectors) {
  constexpr int kChunks = kDim / 8;  // 8 elements = 16 bytes
  constexpr int kKeys = KeysPerTile<kDim>::value;
  for (int c = threadIdx.x; c < kKeys * kChunks; c += blockDim.x) {
    const int row = c / kChunks, col = (c % kChunks) * 8;
    uint16_t* dst = tile + row * (kDim + kPad) + col;
    const int64_t key = key0 + row;
    const bool inside = key < kv_len;
    if (vectors) {
      cp_async16(shared_address(dst), inside ? src + key * row_stride + col : src, inside ? 16 : 0);
    } else {
      for (int e = 0; e < 8; ++e) dst[e] = inside ? src[key * row_stride + col + e] : uint16_t{0};
    }
  }
}

template <int kDim, int kStages>
struct TileSizes {
  static constexpr int kKeys = KeysPerTile<kDim>::value;
  static constexpr int kLd = kDim + kPad;
  static constexpr int kTile = kKeys * kLd;                    // elements of one K or V tile
  static constexpr int kSmemBytes = kStages * 2 * kTile * 2;  // a K and a V tile per stage
};

template <bool kHalf, int kDim, int kWarps, int kStages>
__global__ void __launch_bounds__(kWarps * 32) flash_forward(Problem p, bool vectors) {
  constexpr int kRows = 16 * kWarps;
  constexpr int kKeys = TileSizes<kDim, kStages>::kKeys;
  constexpr int kLd = TileSizes<kDim, kStages>::kLd;
  constexpr int kTile = TileSizes<kDim, kStages>::kTile;
  // kStages stages, each a K tile then a V tile: tiles i + 1 .. i + kStages - 1 are being copied
  // in while tile i is used.
  extern __shared__ __align__(128) uint16_t tiles[];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t block_row = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kRows;  // longest causal first
  const int64_t h = blockIdx.y, b = blockIdx.z;
  const int64_t kv_h = h / (p.heads / p.kv_heads);
  const auto* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const auto* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + kv_h * p.k_stride[1];
  const auto* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + kv_h * p.v_stride[1];
  const int64_t row0 = block_row + warp * 16;  // this warp's first query row
  const int64_t rows[2] = {row0 + g, row0 + g + 8};

  int64_t kv_end = p.kv_len;
  if (p.causal && block_row + kRows < kv_end) kv_end = block_row + kRows;
  const int64_t n_tiles = (kv_end + kKeys - 1) / kKeys;
  // One commit group per tile, empty past the last, so "tile i has landed" is always "at most
  // kStages - 2 groups pending" at the top of iteration i.
  auto stage = [&](int64_t tile) {
    if (tile < n_tiles) {
      uint16_t* base = tiles + (tile % kStages) * 2 * kTile;
      stage_tile<kDim>(base, k, p.k_stride[2], tile * kKeys, p.kv_len, vectors);
      stage_tile<kDim>(base + kTile, v, p.v_stride[2], tile * kKeys, p.kv_len, vectors);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) stage(i);

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
  // ldmatrix row of this lane: matrix m = lane / 8, row lane % 8 of it.
  const int lm = lane / 8, lr = lane % 8;

  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<kStages - 2>();  // this tile's copies are done; later tiles' may be in flight
    __syncthreads();  // ... for every thread's copies; and every warp is done with the previous tile
    stage(tile + kStages - 1);  // into the stage the previous tile used
    const int64_t key0 = tile * kKeys;
    const uint16_t* k_tile = tiles + (tile % kStages) * 2 * kTile;
    const uint16_t* v_tile = k_tile + kTile;
    if (row0 < p.q_len && !(p.causal && key0 > row0 + 15)) {  // else nothing here is visible to this warp
      // Scores of the warp's 16 rows against the tile's keys: C fragments of 8 keys each.
      float s[kKeys / 8][4];
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int jj = 0; jj < kKeys / 16; ++jj) {
#pragma unroll
        for (int kk = 0; kk < kDim / 16; ++kk) {
          // Matrices: keys 16jj..+7 / +8..+15 (m / 2) x columns 16kk..+7 / +8..+15 (m % 2).
          uint32_t kb[4];
          ldmatrix_x4(kb, shared_address(k_tile + (jj * 16 + (lm >> 1) * 8 + lr) * kLd + kk * 16 + (lm & 1) * 8));
          mma<kHalf>(s[2 * jj], qa[kk], kb[0], kb[1]);
          mma<kHalf>(s[2 * jj + 1], qa[kk], kb[2], kb[3]);
        }
      }
      // Scale, mask, and the running maximum of each row (over the quad that holds it).
      float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t key = key0 + j * 8 + 2 * t + (e & 1);
          const bool hidden = key >= p.kv_len || (p.causal && key > rows[e >> 1]);
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
      for (int j = 0; j < kKeys / 8; ++j) {
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
      for (int step = 0; step < kKeys / 16; ++step) {
        const uint32_t pa[4] = {pack<kHalf>(s[2 * step][0], s[2 * step][1]), pack<kHalf>(s[2 * step][2], s[2 * step][3]),
                                pack<kHalf>(s[2 * step + 1][0], s[2 * step + 1][1]),
                                pack<kHalf>(s[2 * step + 1][2], s[2 * step + 1][3])};
#pragma unroll
        for (int nn = 0; nn < kDim / 16; ++nn) {
          // Matrices: keys 16step..+7 / +8..+15 (m % 2) x columns 16nn..+7 / +8..+15 (m / 2), transposed.
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, shared_address(v_tile + (step * 16 + (lm & 1) * 8 + lr) * kLd + nn * 16 + (lm >> 1) * 8));
          mma<kHalf>(acc[2 * nn], pa, vb[0], vb[1]);
          mma<kHalf>(acc[2 * nn + 1], pa, vb[2], vb[3]);
        }
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

template <bool kHalf, int kDim, int kWarps, int kStages>
int launch_kernel(const Problem& p, const dim3& grid, cudaStream_t stream, bool vectors) {
  static SharedMemoryOptIns opted_in{};
  constexpr int kBytes = TileSizes<kDim, kStages>::kSmemBytes;
  auto* kernel = flash_forward<kHalf, kDim, kWarps, kStages>;
  if (const cudaError_t err = opt_in_shared_memory(kernel, kBytes, opted_in); err != cudaSuccess) return err;
  kernel<<<grid, kWarps * 32, kBytes, stream>>>(p, vectors);
  return static_cast<int>(cudaGetLastError());
}

template <bool kHalf, int kDim, int kStages>
int launch_dim(const Problem& p, void* stream, int rows, bool vectors) {
  const dim3 grid(static_cast<unsigned>((p.q_len + rows - 1) / rows), static_cast<unsigned>(p.heads),
                  static_cast<unsigned>(p.batch));
  auto s = static_cast<cudaStream_t>(stream);
  switch (rows) {
    case 64: return launch_kernel<kHalf, kDim, 4, kStages>(p, grid, s, vectors);
    case 32: return launch_kernel<kHalf, kDim, 2, kStages>(p, grid, s, vectors);
    case 16: return launch_kernel<kHalf, kDim, 1, kStages>(p, grid, s, vectors);
    default: return cudaErrorInvalidValue;
  }
}

template <int kStages>
int launch_stages(const Problem& p, void* stream, int rows, bool vectors) {
  if (p.fp16) return p.head_dim == 64 ? launch_dim<true, 64, kStages>(p, stream, rows, vectors)
                                      : launch_dim<true, 128, kStages>(p, stream, rows, vectors);
  return p.head_dim == 64 ? launch_dim<false, 64, kStages>(p, stream, rows, vectors)
                          : launch_dim<false, 128, kStages>(p, stream, rows, vectors);
}

// 16-byte rows of K and V (aligned base, strides multiples of 8 elements): asynchronous staging.
bool vector_staging(const Problem& p) {
  auto aligned = [](const void* ptr, const int64_t (&stride)[3]) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 &&
           stride[2] % 8 == 0;
  };
  return aligned(p.k, p.k_stride) && aligned(p.v, p.v_stride);
}

}  // namespace

bool supports_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

int rows_per_block(const Problem& p) {
  // 64-row blocks were the fastest at every length measured, also where they leave
  // multiprocessors idle (bench/results/attention-2026-12-03.txt): each key tile is staged once
  // for four warps. Shorter queries take the smallest block that holds them.
  return p.q_len <= 16 ? 16 : (p.q_len <= 32 ? 32 : 64);
}

int launch_rows(const Problem& p, void* stream, int rows, int stages) {
  if (p.q_len == 0 || p.batch == 0 || p.heads == 0) return 0;
  if (!supports_head_dim(p.head_dim) || p.kv_heads <= 0 || p.heads % p.kv_heads != 0) return cudaErrorInvalidValue;
  const bool vectors = vector_staging(p);
  switch (stages) {
    case 2: return launch_stages<2>(p, stream, rows, vectors);
    case 4: return launch_stages<4>(p, stream, rows, vectors);
    default: return cudaErrorInvalidValue;
  }
}

int launch(const Problem& p, void* stream) { return launch_rows(p, stream, rows_per_block(p), kDefaultStages); }

}  // namespace attention
}  // namespace shim
}  // namespace aoti_cuda
