// Private to the decode attention kernels (decode_attention.cu: the two-kernel form; decode_attention_cluster.cu: the
// one-kernel form): pass 1's work on one chunk of the cache, which both forms run, and its helpers. What they compute
// is in decode_attention.hpp.
//
// chunk_body, for one block and the kHeads query heads it serves:
//   0. every thread requests its K and V vectors of the chunk (16 bytes per row, below) into registers at once;
//   1. each lane loads its 8 columns of the block's kHeads query rows (rotated in the qkv form), times
//      scale * log2(e), into registers;
//   2. scores: a row of K is held by kLanes = head_dim / 8 lanes, 16 bytes each (so a warp reads
//      32 / kLanes rows per step, coalesced); each lane takes its 8-element slice of the dot
//      product for every query head, and the lanes of the row add them up with shuffles;
//   3. per query head, the chunk's maximum and the sum of 2^(s - max), one warp per head;
//   4. p.V: the same row-per-lane-group split over V, every thread accumulating its 8 output
//      columns for every query head over its rows; the row groups of a warp are added with
//      shuffles, the warps through shared memory;
//   5. per query head and column: the chunk's unnormalized output, its maximum and its sum, to the caller's sink
//      (the two-kernel form writes them to scratch for the merge kernel; the one-kernel form merges them on the fly).
// Scores live in the log2 domain (exp2f), which saves a multiply per exponential. In the update form the step's row
// comes from k_new / v_new, and the block holding it writes it into the cache (step 0).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "shim/ops/decode_attention.hpp"
#include "shim/ops/dependent_launch.hpp"

namespace aoti_cuda {
namespace shim {
namespace decode_attention {
namespace detail {

// Pass 1's warps per block. 8 were slower in the attention bench (qkv form in a graph, 4 heads a block, 2026-12-04
// 20:31 UTC: 9.82 against 8.44 us at position 128, 10.78 against 9.87 at 1024), and so were chunks of 32 positions.
constexpr int kWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kChunkRows = static_cast<int>(kChunk);

// Visible positions of batch b: pos + 1, clamped to [0, L] (a position past the cache sees all of
// it, as the mask `position <= pos` would; a negative one sees nothing).
__device__ __forceinline__ int64_t chunk_count(int64_t cache_len) { return (cache_len + kChunk - 1) / kChunk; }

__device__ __forceinline__ int64_t visible_at(int64_t pos, int64_t cache_len) {
  return pos < 0 ? 0 : (pos >= cache_len ? cache_len : pos + 1);
}
__device__ __forceinline__ int64_t visible(const Problem& p, int64_t b) {
  return visible_at(p.pos[b * p.pos_stride], p.cache_len);
}

// One 16-byte vector (8 elements) of a K or V row; global loads, issued for the whole chunk up front.
__device__ __forceinline__ uint4 load16(const char* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ void store16(char* p, const uint4& v) { *reinterpret_cast<uint4*>(p) = v; }

// The 8 elements of a 16-byte vector as floats.
template <bool kHalf>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&x)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f;
    if constexpr (kHalf) {
      __half2 h;
      memcpy(&h, &words[i], sizeof(h));
      f = __half22float2(h);
    } else {
      __nv_bfloat162 h;
      memcpy(&h, &words[i], sizeof(h));
      f = __bfloat1622float2(h);
    }
    x[2 * i] = f.x;
    x[2 * i + 1] = f.y;
  }
}

// x rounded to the dtype (as the model rounds its rotary output), as float and as 16 bits.
template <bool kHalf>
__device__ __forceinline__ uint16_t bits16(float x) {
  if constexpr (kHalf) return __half_as_ushort(__float2half_rn(x));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
template <bool kHalf>
__device__ __forceinline__ float rounded(float x) {
  if constexpr (kHalf) return __half2float(__float2half_rn(x));
  else return __bfloat162float(__float2bfloat16_rn(x));
}

// The rotary embedding of element d of a head, in float32: with j = d mod D/2, x1 the first half's element j, x2
// the second half's and c, s the table row's entry j, x1 c - x2 s for d in the first half, x2 c + x1 s in the
// second; each product rounded on its own (no fused multiply-add), as the model computes it. The caller rounds
// the result to the dtype, as the model does.
__device__ __forceinline__ float rotate(float x1, float x2, float c, float s, bool first_half) {
  return first_half ? __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)) : __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

// This lane's 16 bytes (elements 8 slice ... 8 slice + 7) of a head row: one vector load when the row is 16-byte
// aligned (`vec`), else eight 2-byte loads, all in flight at once either way.
__device__ __forceinline__ uint4 load_slice(const char* row, int slice, bool vec) {
  if (vec) return load16(row + 16 * slice);
  const unsigned short* e = reinterpret_cast<const unsigned short*>(row) + 8 * slice;
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = static_cast<uint32_t>(__ldg(e + 2 * i)) | (static_cast<uint32_t>(__ldg(e + 2 * i + 1)) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// This lane's rotary entries: for its 8 columns (slice), entries j = (8 slice + e) mod D/2 of the table row (8 divides
// D/2, so they are consecutive). Loaded once per thread, shared by every head it rotates.
template <int kDim>
__device__ __forceinline__ void load_rotary(const float* cos_row, const float* sin_row, int slice, float (&c)[8],
                                            float (&s)[8]) {
  const int j0 = (slice * 8) % (kDim / 2);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    c[e] = __ldg(cos_row + j0 + e);
    s[e] = __ldg(sin_row + j0 + e);
  }
}

// This lane's 8 elements (slice) of a head row at `row`, rotated with its rotary entries c, s: the lane reads its own
// 16 bytes and those of the slice D/2 away, which holds the partner elements.
template <bool kHalf, int kDim>
__device__ __forceinline__ uint4 rotated_slice(const char* row, int slice, const float (&c)[8], const float (&s)[8],
                                               bool vec) {
  constexpr int kSlices = kDim / 8;
  const bool first = slice < kSlices / 2;
  const int partner = first ? slice + kSlices / 2 : slice - kSlices / 2;
  float own[8], other[8];
  unpack8<kHalf>(load_slice(row, slice, vec), own);
  unpack8<kHalf>(load_slice(row, partner, vec), other);
  uint32_t words[4];
#pragma unroll
  for (int e = 0; e < 8; e += 2) {
    uint32_t pair = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float x1 = first ? own[e + i] : other[e + i];
      const float x2 = first ? other[e + i] : own[e + i];
      pair |= static_cast<uint32_t>(bits16<kHalf>(rotate(x1, x2, c[e + i], s[e + i], first))) << (16 * i);
    }
    words[e / 2] = pair;
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

template <bool kHalf>
__device__ __forceinline__ void store(void* base, int64_t i, float x) {
  if constexpr (kHalf) static_cast<__half*>(base)[i] = __float2half_rn(x);
  else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(x);
}

// Pass 1's work for one block: chunk `chunk` of batch b (n visible positions, pos_b its position) for the kHeads query
// heads head0 ... head0 + kHeads - 1 of KV head kv_head. `stores_fresh`: this block writes the step's row into the
// cache when its chunk holds it (one block per KV head does).
template <bool kHalf, int kDim, int kHeads, typename Sink>
__device__ __forceinline__ void chunk_body(const Problem& p, bool q_vectors, int64_t b, int64_t pos_b, int64_t n,
                                           int64_t chunk, int64_t kv_head, int64_t head0, bool stores_fresh,
                                           Sink& sink) {
  constexpr int kLanes = kDim / 8;              // lanes per K/V row
  constexpr int kRowsPerWarp = 32 / kLanes;     // rows a warp reads per step
  constexpr int kRowsPerStep = kRowsPerWarp * kWarps;
  static_assert(kChunkRows % kRowsPerStep == 0, "a chunk is a whole number of block steps");

  __shared__ float s_s[kHeads][kChunkRows];
  __shared__ float red_s[kWarps][kHeads][kDim];
  __shared__ float max_s[kHeads], sum_s[kHeads];

  const int64_t start = chunk * kChunk;
  const int rows = static_cast<int>(n - start < kChunk ? n - start : kChunk);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = lane / kLanes, slice = lane % kLanes;  // this lane's row within the warp step; its 8 columns
  char* const k_base = static_cast<char*>(p.k) +
                       2 * (b * p.k_stride[0] + kv_head * p.k_stride[1] + start * p.k_stride[2] + slice * 8);
  char* const v_base = static_cast<char*>(p.v) +
                       2 * (b * p.v_stride[0] + kv_head * p.v_stride[1] + start * p.v_stride[2] + slice * 8);
  // The update form: the step's row (position pos[b] < L, the last visible one) is read from k_new / v_new,
  // never from the cache; `fresh` is its row in this chunk (-1 when not here or not the update form).
  const int fresh = p.k_new != nullptr && n == pos_b + 1 && n - 1 - start < kChunk ? static_cast<int>(n - 1 - start)
                                                                                    : -1;

  // This thread's K and V vectors (kSteps rows each) of the cache are all requested first: they depend on the
  // position only, so a block has its whole chunk in flight while it rotates the step's row and stages q. Rows
  // past n are not read (zeros), nor is the step's row (taken from k_new / v_new below).
  constexpr int kSteps = kChunkRows / kRowsPerStep;
  uint4 k_raw[kSteps], v_raw[kSteps];
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int row = step * kRowsPerStep + warp * kRowsPerWarp + group;
    k_raw[step] = row < rows && row != fresh ? load16(k_base + 2 * row * p.k_stride[2]) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int row = step * kRowsPerStep + warp * kRowsPerWarp + group;
    v_raw[step] = row < rows && row != fresh ? load16(v_base + 2 * row * p.v_stride[2]) : make_uint4(0, 0, 0, 0);
  }

  // The qkv form: this lane's entries of the table row at the position (clamped to the table).
  const bool rotary = p.rope_cos != nullptr;
  float rc[8], rs[8];
  if (rotary) {
    const int64_t r = pos_b < 0 ? 0 : (pos_b >= p.rope_rows ? p.rope_rows - 1 : pos_b);
    load_rotary<kDim>(p.rope_cos + r * p.rope_stride, p.rope_sin + r * p.rope_stride, slice, rc, rs);
  }
  uint4 fresh_k = make_uint4(0, 0, 0, 0);  // this lane's slice of the step's K row (rotated in the qkv form)
  const char* v_new_base = nullptr;
  if (fresh >= 0) {
    const char* k_new_row =
        static_cast<const char*>(p.k_new) + 2 * (b * p.k_new_stride[0] + kv_head * p.k_new_stride[1]);
    fresh_k = rotary ? rotated_slice<kHalf, kDim>(k_new_row, slice, rc, rs, true) : load16(k_new_row + 16 * slice);
    v_new_base =
        static_cast<const char*>(p.v_new) + 2 * (b * p.v_new_stride[0] + kv_head * p.v_new_stride[1] + slice * 8);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      if (step * kRowsPerStep + warp * kRowsPerWarp + group == fresh) {
        k_raw[step] = fresh_k;
        v_raw[step] = load16(v_new_base);
      }
    }
  }
  // 0. The update form: the block of the group's first query head that holds the step's row stores it in the
  //    cache (one 16-byte vector per lane of the row's lane group).
  if (fresh >= 0 && stores_fresh && warp == 0 && group == 0) {
    store16(k_base + 2 * fresh * p.k_stride[2], fresh_k);
    store16(v_base + 2 * fresh * p.v_stride[2], load16(v_new_base));
  }

  // 1. q (rotated in the qkv form), scaled into the log2 domain: each lane loads its own 8 columns of every query
  //    head straight into registers (no shared-memory stage, no barrier), one round of loads for the block.
  float qr[kHeads][8];
  {
    const char* q_head0 = static_cast<const char*>(p.q) + 2 * (b * p.q_stride[0] + head0 * p.q_stride[1]);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const char* q_row = q_head0 + 2 * h * p.q_stride[1];
      const uint4 raw =
          rotary ? rotated_slice<kHalf, kDim>(q_row, slice, rc, rs, q_vectors) : load_slice(q_row, slice, q_vectors);
      unpack8<kHalf>(raw, qr[h]);
#pragma unroll
      for (int e = 0; e < 8; ++e) qr[h][e] = qr[h][e] * p.scale * kLog2e;  // as rounded before: (x scale) log2(e)
    }
  }

  // 2. scores of the chunk's rows (every lane runs every shuffle).
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int row = step * kRowsPerStep + warp * kRowsPerWarp + group;
    float kx[8];
    unpack8<kHalf>(k_raw[step], kx);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) dot = fmaf(qr[h][e], kx[e], dot);
#pragma unroll
      for (int off = kLanes / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      if (slice == 0) s_s[h][row] = row < rows ? dot : -INFINITY;
    }
  }
  __syncthreads();

  // 3. per head: max and sum of 2^(s - max); s_s becomes the unnormalized probabilities.
  for (int h = warp; h < kHeads; h += kWarps) {
    float m = -INFINITY;
    for (int j = lane; j < kChunkRows; j += 32) m = fmaxf(m, s_s[h][j]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float sum = 0.f;
    for (int j = lane; j < kChunkRows; j += 32) {
      const float e = j < rows ? exp2f(s_s[h][j] - m) : 0.f;  // row 0 is always visible: m is finite
      s_s[h][j] = e;
      sum += e;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
      max_s[h] = m;
      sum_s[h] = sum;
    }
  }
  __syncthreads();

  // K and V are read: the next kernel may start its launch now (dependent_launch.hpp, "when").
  pdl::allow_dependents();
  // 4. p.V over this thread's rows, for its 8 columns and every head.
  float acc[kHeads][8];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.f;
  }
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int row = step * kRowsPerStep + warp * kRowsPerWarp + group;
    float vx[8];
    unpack8<kHalf>(v_raw[step], vx);  // zeros past n, where the probabilities are 0 too
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const float pr = s_s[h][row];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pr, vx[e], acc[h][e]);
    }
  }
  // The row groups of a warp: lanes kLanes, 2 kLanes, ... apart hold the same columns.
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
#pragma unroll
      for (int off = 16; off >= kLanes; off /= 2) acc[h][e] += __shfl_xor_sync(0xffffffffu, acc[h][e], off);
    }
  }
  if (group == 0) {
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
#pragma unroll
      for (int e = 0; e < 8; ++e) red_s[warp][h][slice * 8 + e] = acc[h][e];
    }
  }
  __syncthreads();

  // 5. per head and column: the chunk's unnormalized output, its maximum and its sum, to the sink.
  for (int i = tid; i < kHeads * kDim; i += kWarps * 32) {
    const int h = i / kDim, d = i % kDim;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += red_s[w][h][d];
    sink(h, d, o, max_s[h], sum_s[h]);
  }
}

// q's rows are read as 16-byte vectors when they can be (aligned base and head / batch strides of 8 elements).
inline bool q_vectors(const Problem& p) {
  return reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && p.q_stride[0] % 8 == 0 && p.q_stride[1] % 8 == 0;
}

/// The one-kernel form (decode_attention_cluster.cu) with clusters of `cluster` (8 or 16) blocks; its caller
/// (launch()) has checked the problem. Returns the launch's cudaError_t.
int launch_one_kernel(const Problem& p, int cluster, cudaStream_t stream);

}  // namespace detail
}  // namespace decode_attention
}  // namespace shim
}  // namespace aoti_cuda
