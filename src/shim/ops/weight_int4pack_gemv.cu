// aoti_cuda shim — the int4 matmul's weight-streaming kernel (Int4Gemv) for few rows: its
// design in the comment below, its entry points in weight_int4pack_gemv.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/env.hpp"
#include "shim/ops/dependent_launch.hpp"
#include "shim/ops/fused_linear.hpp"
#include "shim/ops/ptx.cuh"
#include "shim/ops/weight_int4pack_gemv.hpp"

namespace aoti_cuda {
namespace shim {
namespace int4mm {
namespace {

using ptx::mma_bf16;

// ---------------------------------------------------------------------------------------------
// Small M (decode; the dispatch's kernel for M <= 8, a tuning candidate up to 16): a weight-
// streaming kernel whose time should be the weight bytes over the memory bandwidth, so everything
// is about keeping enough 16-byte loads in flight. (Measured, it is bound by the per-call latency
// of one kernel per matmul on the 1.1B model's shapes: docs/benchmarks/int4.md.)
//
// Roles are swapped against Int4Gemm: the WEIGHTS are the mma A operand (16 output features =
// two n-tiles) and the activations the B operand (8 rows of x as the 8 mma columns). A lane's
// packed word is the B fragment of its n-tile; a0/a2 of an A fragment are exactly B's b0/b1, so
// the words of n-tiles 2p and 2p+1 give a0/a2 and a1/a3 of one A fragment: no lane exchange,
// and no half-empty tile for M <= 8 (M = 9..16 takes a second B fragment). Each activation
// fragment is then shared by 16 output features.
//
// Work split: block b owns n-tile pairs [NP*b, NP*b+NP), its KW warps split K into chunks of U
// super-tiles (warp w takes chunks w, w+KW, ...). A warp issues ALL of its chunk's weight and
// scale loads (16/8/4-byte, ld.global.nc.L1::no_allocate: read once, keep L1 for x) before
// touching the first one, so U*2*NP loads per lane are in flight; enough blocks and warps cover
// the SMs even for small N. Activations are read as 4-byte fragments straight from global
// memory (L1-resident: every warp of the SM reads the same few KB). The KW partial sums are
// added in shared memory in warp order (deterministic), in fp32, and rounded once to bf16.
// ---------------------------------------------------------------------------------------------

template <int Words>
struct StreamVec;  // ikt/2 packed words, loaded without L1 allocation (each byte is read once)
template <>
struct StreamVec<1> {
  static __device__ __forceinline__ void load(uint32_t (&d)[1], const uint32_t* p) {
    asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(d[0]) : "l"(p));
  }
};
template <>
struct StreamVec<2> {
  static __device__ __forceinline__ void load(uint32_t (&d)[2], const uint32_t* p) {
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "l"(p));
  }
};
template <>
struct StreamVec<4> {
  static __device__ __forceinline__ void load(uint32_t (&d)[4], const uint32_t* p) {
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "l"(p));
  }
};

__device__ __forceinline__ uint32_t ld_stream_u32(const uint32_t* p) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// (a & b) | c in one instruction.
__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t magic) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(mask), "r"(magic));
  return d;
}

// The 4 bf16x2 A-fragment registers of one packed word: nibble pairs at shifts 0, 4, 8, 12 =
// {k-tile 0 at k 2c, k-tile 0 at 2c+8, k-tile 1 at 2c, k-tile 1 at 2c+8} (see dequant_pair in
// weight_int4pack_mm.cu), each brought to bits 0-3 / 16-19 and OR-ed into the mantissa of bf16 128.0
// (ulp 1) by one lop3: 128+q exactly (bf16 has only 7 mantissa bits, so a nibble cannot sit higher).
// The scale-after form multiplies these raw values and applies a group's scale and zero to its sums
// (Int4Gemv::multiply_super_tile).
__device__ __forceinline__ void raw_word(uint32_t (&d)[4], uint32_t word) {
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] = lop3_and_or(word >> (4 * i), 0x000f000fu, 0x43004300u);
}

// The same registers dequantized: minus 136 is exact, so (q-8)*s+z is rounded once, by the FMA, as
// in dequant_pair(). (raw_word's lop3 is repeated here: through raw_word, ptxas orders this form's
// loop differently.)
__device__ __forceinline__ void dequant_word(uint32_t (&d)[4], uint32_t word, uint32_t sz_bits) {
  const __nv_bfloat162 sz2 = bits_bf162(sz_bits);
  const __nv_bfloat162 scale = __low2bfloat162(sz2);
  const __nv_bfloat162 zero = __high2bfloat162(sz2);
  const __nv_bfloat162 bias = bits_bf162(0x43084308u);  // {136, 136}
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t biased = lop3_and_or(word >> (4 * i), 0x000f000fu, 0x43004300u);
    d[i] = bf162_bits(__hfma2(__hsub2(bits_bf162(biased), bias), scale, zero));
  }
}

constexpr int kMaxWarps = 512 / kLanes;  // warps a block at most (the kernels' launch bounds)

struct GemvShape {
  int m, n, k, n_tiles, k_super, group_shift;
};

// What the fused linear kernels add (fused_linear.hpp): x [rows, k_x] (bf16 rows x_row_stride apart), the block
// rows of rows_per_block (<= 8) rows each, n_out output columns, the up features' first n-tile pair (SwiGLU).
struct FusedArgs {
  const __nv_bfloat16* x = nullptr;
  int64_t x_row_stride = 0;
  int k_x = 0;
  const __nv_bfloat16* norm_weight = nullptr;
  float eps = 0;
  const __nv_bfloat16* residual = nullptr;
  int64_t residual_row_stride = 0;
  int rows = 0, rows_per_block = 8, n_out = 0, up_pairs = 0;
  bool weights_early = false;  // no kernel writes the weights: their first loads may go out before the wait
  bool norm_early = false;     // no kernel writes norm_weight: this thread's first norm vector is loaded before it
  bool norm_after = false;     // the norm's 1/rms applied to the sums in the epilogue (Int4Problem::norm_after)
#ifdef AOTI_CUDA_INT4_ABLATION
  int ablate = 0;  // bench/fused_linear_bench.cu's ablation build only: the kAblate* parts left out
#endif
};

// kFuse: kNone, the plain multiply; kLinear, aoti_cuda's fused linear (fused_linear.hpp): the residual added on
// store; kSwiglu, that with the SwiGLU epilogue: the block's first NP/2 n-tile pairs are gate features, its last
// NP/2 the up features up_pairs pairs further, and it stores silu(gate) * up.
// The fused kernels stage their activation rows in shared memory (a prologue; RMS-normalized with a norm weight),
// zero past x's K (the packing pads K). Also without a norm: on the 1.1 B model's int4 export, reading the row
// from global memory as the plain multiply does made down (2048 x 5632) 7.4 -> 9.9 us and o (2048 x 2048)
// 4.0 -> 4.3 us in a decode replay (traces of 2026-12-04 16:19 and 19:11), unlike the bf16 kernel.
enum Fuse { kNone, kLinear, kSwiglu };

// What the ablation build of the fused linear bench (AOTI_CUDA_INT4_ABLATION, AOTI_CUDA_INT4_ABLATE=bits) leaves out
// of the fused kernels, to time what each part costs in a decode chain; the results are then wrong. Never compiled
// into the SDK.
enum Ablate {
  kAblateNorm = 1,       // the RMSNorm: the rows are staged as they are
  kAblateStaging = 2,    // the prologue: no residual load, no staging, the multiply reads stale shared memory
  kAblateMath = 4,       // dequantize and mma: each weight word is folded into one accumulator instead
  kAblateReduction = 8,  // the K-split sum across warps and the epilogue: warp 0 stores its own partial sums
};

// kScaleAfter (only where a group covers whole super-tiles, group >= 16 * IKT): the multiply takes the raw nibbles as
// 128 + q (raw_word: a shift and a lop3 a register, dequant_word four instructions) and each super-tile's sums get
// the scale and zero in float32 afterwards: sum (q - 8) s + z over the group = s (A - 136 X) + z X, with A the mma's
// sum of (128 + q) x and X the sum of x over the group (a second mma against ones, in the layout of A's
// accumulators). Nsight Compute (2026-12-06, H100) put the int4 kernels at 5.3 instructions a weight with 24-32 %
// of the issue slots busy and long-scoreboard and barrier stalls first: the multiply's instructions lengthen the
// part of each call that waits for the previous kernel's output. The weights are not rounded to bf16 before the
// multiply (the dequantize-first form rounds (q - 8) s + z once, as torch's kernel does), so results differ from
// that form in the last bits. AOTI_CUDA_INT4_SCALE_AFTER=0 keeps the dequantize-first form (scale_after below).
template <int IKT, int U, int NP, int T, int kFuse = kNone, bool kScaleAfter = false>
struct Int4Gemv {
  static constexpr int kWords = IKT / 2;
  static constexpr int kAcc = NP * T * 4;  // fp32 accumulators per lane
  static constexpr int kOutPairs = kFuse == kSwiglu ? NP / 2 : NP;  // n-tile pairs of output per block
  static_assert(kFuse == kNone || T == 1, "the fused kernels take 8 rows per block row");
  static_assert(kFuse != kSwiglu || NP % 2 == 0, "SwiGLU pairs gate and up n-tile pairs");

  // Bytes of the epilogue's partial sums at the start of the dynamic shared memory; the staged rows follow.
  static __host__ __device__ constexpr int reduction_bytes(int warps) { return warps * kAcc * kLanes * 4; }
  // 32-bit words of one staged row: K/2, plus 4 so that the 8 rows of a fragment start in different banks.
  static __host__ __device__ constexpr int staged_row_words(int k) { return k / 2 + 4; }

  static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint32_t* w, const uint32_t* sz,
                                             __nv_bfloat16* out, const GemvShape sh, const FusedArgs& f = {}) {
    extern __shared__ __align__(16) unsigned char gemv_smem[];
    const int warp = threadIdx.x / kLanes;
    const int lane = threadIdx.x % kLanes;
    const int kw = blockDim.x / kLanes;
    const int g = lane >> 2;
    const int c = lane & 3;
    const int pair0 = blockIdx.x * kOutPairs;
    // n-tile pair of the block's j-th pair.
    auto pair_of = [&](int j) {
      if constexpr (kFuse == kSwiglu) return j < NP / 2 ? pair0 + j : pair0 + (j - NP / 2) + f.up_pairs;
      else return pair0 + j;
    };
    // Launched with programmatic dependent launch (dependent_launch.hpp): nothing is read before the wait, except
    // (weights_early) the first chunk's weights, which no kernel writes.
    const bool early = f.weights_early;
    if (!early) pdl::wait_for_predecessor();
    float acc[NP][T][4];
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][t][e] = 0.f;
    // Activation rows of this lane's B fragments (token g, and g+8 when T == 2), at this lane's first word
    // (b_fragments). A lane past the rows reads row 0 instead of zeros: its fragment column is a token whose sums
    // are never stored, so no select and no predicate is needed. (Fused: this block row's rows, staged in shared
    // memory by the prologue below.)
    const int rows =
        kFuse == kNone ? sh.m : min(f.rows_per_block, f.rows - static_cast<int>(blockIdx.y) * f.rows_per_block);
    uint32_t* staged = reinterpret_cast<uint32_t*>(gemv_smem + reduction_bytes(kw));
    const uint32_t* xrow[T];
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int row = g + 8 * t < rows ? g + 8 * t : 0;
      if constexpr (kFuse == kNone) {
        xrow[t] = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(row) * sh.k) + c;
      } else {
        xrow[t] = staged + row * staged_row_words(sh.k) + 4 * c;
      }
    }
    // Scales: one group covers whole super-tiles when group >= 16*IKT; then one load per super-tile.
    const bool group_per_super = sh.group_shift >= kSuperShift;
    const int n_chunks = (sh.k_super + U - 1) / U;
    uint32_t wv[NP][2][U][kWords];
    uint32_t sv[NP][2][U][kWords];
    // Every load of a chunk first (tiles past N and super-tiles past K load nothing).
    auto load_chunk = [&](int chunk) {
      const int st0 = chunk * U;
#pragma unroll
      for (int j = 0; j < NP; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * pair_of(j) + h;
          const bool tile = nt < sh.n_tiles;
          const int n = nt * 8 + g;
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int st = st0 + u;
            if (tile && st < sh.k_super) {
              StreamVec<kWords>::load(wv[j][h][u],
                                      w + ((static_cast<size_t>(nt) * sh.k_super + st) * kLanes + lane) * kWords);
#pragma unroll
              for (int q = 0; q < kWords; ++q) {
                if (kScaleAfter && q > 0) break;  // one group a super-tile: its word 0 is all there is
                if (q > 0 && group_per_super) {
                  sv[j][h][u][q] = sv[j][h][u][0];
                } else {
                  const int group = (st * IKT * 16 + q * 32) >> sh.group_shift;
                  sv[j][h][u][q] = ld_stream_u32(sz + static_cast<size_t>(group) * sh.n + n);
                }
              }
            } else {
#pragma unroll
              for (int q = 0; q < kWords; ++q) wv[j][h][u][q] = sv[j][h][u][q] = 0u;  // dequantizes to 0
            }
          }
        }
    };
    auto compute_chunk = [&](int chunk) {
      const int st0 = chunk * U;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int st = st0 + u;
        if (st >= sh.k_super) break;
        multiply_super_tile(acc, wv, sv, u, st, xrow);
      }
    };
    float residual_first = 0.f;  // the fused epilogue's first output's residual, loaded before the weights
    bool rows_scaled = false;    // norm_after: the epilogue multiplies each row's sums by its 1/rms (row_inv)
    if constexpr (kFuse == kNone) {
      if (early) {  // the first chunk's weights in flight across the wait; x is read after it (compute_chunk)
        if (warp < n_chunks) load_chunk(warp);
        pdl::wait_for_predecessor();
        for (int chunk = warp; chunk < n_chunks; chunk += kw) {
          if (chunk != warp) load_chunk(chunk);
          compute_chunk(chunk);
        }
      } else {
        for (int chunk = warp; chunk < n_chunks; chunk += kw) {
          load_chunk(chunk);
          compute_chunk(chunk);
        }
      }
    } else {
      // The first chunk's weight loads go out first, then this thread's residual load (loaded at the end, it would
      // add a memory latency after the last weights: o, 2048 x 2048, 4.80 -> 4.67 us, 2026-12-04 18:53; computing
      // its index before the weight loads put ~90 instructions ahead of them, SASS of 19:20), then the prologue
      // stages the rows while they are in flight. (The prologue's loads through cp.async, as the bf16 kernel's,
      // were slower here: q/k/v 5.57 -> 5.75 us, gate/up 9.94 -> 10.44 us.)
#ifdef AOTI_CUDA_INT4_ABLATION
      const int ablate = f.ablate;
#else
      constexpr int ablate = 0;
#endif
      if (warp < n_chunks) load_chunk(warp);
      // This thread's first norm vector: a program constant is loaded before the wait, as the weights.
      uint4 nw_first = f.norm_early ? norm_vector(f, threadIdx.x) : make_uint4(0, 0, 0, 0);
      if (early) pdl::wait_for_predecessor();
      if (!f.norm_early) nw_first = norm_vector(f, threadIdx.x);
      if (f.residual != nullptr && !(ablate & kAblateStaging)) {
        const Target first = target(threadIdx.x, pair0, rows, f);
        if (first.valid) {
          residual_first = __bfloat162float(f.residual[first.out_row * f.residual_row_stride + first.col]);
        }
      }
      if (!(ablate & kAblateStaging)) stage(f, sh, rows, staged, nw_first, ablate);
      rows_scaled = f.norm_after && f.norm_weight != nullptr && !(ablate & (kAblateStaging | kAblateNorm));
      for (int chunk = warp; chunk < n_chunks; chunk += kw) {
        if (chunk != warp) load_chunk(chunk);
        if (ablate & kAblateMath) {
          fold_words(acc, wv, sv);
        } else {
          compute_chunk(chunk);
        }
      }
      if (ablate & kAblateReduction) {
        pdl::allow_dependents();
        if (warp == 0) store_own_sums(acc, out, pair0, f.n_out);
        return;
      }
    }
    // The weights are read: the next kernel may start its launch now (dependent_launch.hpp, "when").
    pdl::allow_dependents();
    // acc[j][t]: {(feature 16p+g, token 8t+2c), (.., 8t+2c+1), (16p+8+g, 8t+2c), (.., 8t+2c+1)}.
    float* red = reinterpret_cast<float*>(gemv_smem);
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[(warp * kAcc + (j * T + t) * 4 + e) * kLanes + lane] = acc[j][t][e];
    __syncthreads();
    for (int i = threadIdx.x; i < kAcc * kLanes; i += blockDim.x) {
      const int l = i % kLanes;
      const int r = i / kLanes;  // (j * T + t) * 4 + e
      const int e = r % 4;
      const int t = (r / 4) % T;
      const int j = r / (4 * T);
      if (kFuse == kSwiglu && j >= NP / 2) continue;  // the up half: read with its gate half
      float v = 0.f;
      for (int ww = 0; ww < kw; ++ww) v += red[(ww * kAcc + r) * kLanes + l];  // warp order: deterministic
      const int row = 8 * t + 2 * (l & 3) + (e & 1);
      const int nt = 2 * (pair0 + j) + (e >> 1);
      if constexpr (kFuse == kNone) {
        if (row < sh.m && nt < sh.n_tiles) out[static_cast<size_t>(row) * sh.n + nt * 8 + (l >> 2)] = __float2bfloat16_rn(v);
      } else {
        const Target o = target(i, pair0, rows, f);
        if (!o.valid) continue;
        const float inv = rows_scaled ? row_inv(f, row, kw) : 1.f;
        float y = round_bf16(rows_scaled ? v * inv : v);
        if constexpr (kFuse == kSwiglu) {
          const int r_up = r + (NP / 2) * T * 4;
          float up = 0.f;
          for (int ww = 0; ww < kw; ++ww) up += red[(ww * kAcc + r_up) * kLanes + l];
          if (rows_scaled) up *= inv;
          y = round_bf16(round_bf16(y / (1.f + expf(-y))) * round_bf16(up));  // silu(gate) * up, as the model
        }
        if (f.residual != nullptr) {
          y += i == static_cast<int>(threadIdx.x)
                   ? residual_first
                   : __bfloat162float(f.residual[o.out_row * f.residual_row_stride + o.col]);
        }
        out[o.out_row * f.n_out + o.col] = __float2bfloat16_rn(y);
      }
    }
  }

  // The B fragments of packed word q of super-tile st for this lane's rows: the bf16 pairs x[row][k0 + 8e], e =
  // 0..3, k0 = the word's first K + 2 * (lane % 4), i.e. 32-bit words c + 4e of the word's 16 (xrow points at
  // word c of the lane's row). The plain multiply reads them from global memory (L1-resident); the fused kernels
  // stage their rows in fragment order (stage_rows), where the lane's four words are adjacent: one 16-byte load.
  static __device__ __forceinline__ void b_fragments(uint32_t (&b)[T][4], int st, int q,
                                                     const uint32_t* const (&xrow)[T]) {
    const int word0 = st * IKT * 8 + q * 16;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      if constexpr (kFuse == kNone) {
#pragma unroll
        for (int e = 0; e < 4; ++e) b[t][e] = __ldg(xrow[t] + word0 + 4 * e);
      } else {
        const uint4 v = *reinterpret_cast<const uint4*>(xrow[t] + word0);
        b[t][0] = v.x;
        b[t][1] = v.y;
        b[t][2] = v.z;
        b[t][3] = v.w;
      }
    }
  }

  // One super-tile of the chunk in registers (its words wv[.][.][u], scales sv[.][.][u]) into acc. Dequantize-first:
  // each word dequantized (dequant_word) and multiplied into acc. Scale-after (kScaleAfter above): the raw words
  // (raw_word) multiplied into the super-tile's own sums A, X = the sums of x from an mma against ones, then
  // acc += s (A - 136 X) + z X per accumulator, with the scale and zero of the accumulator's feature.
  template <typename Acc, typename Words>
  static __device__ __forceinline__ void multiply_super_tile(Acc& acc, const Words& wv, const Words& sv, int u, int st,
                                                             const uint32_t* const (&xrow)[T]) {
    constexpr uint32_t kOnes[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};  // bf16 1.0 pairs
    float part[NP][T][4];
    float xsum[T][4];
    if constexpr (kScaleAfter) {
#pragma unroll
      for (int t = 0; t < T; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) xsum[t][e] = 0.f;
#pragma unroll
        for (int j = 0; j < NP; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[j][t][e] = 0.f;
      }
    }
    Acc& sums = kScaleAfter ? part : acc;
#pragma unroll
    for (int q = 0; q < kWords; ++q) {
      uint32_t b[T][4];
      b_fragments(b, st, q, xrow);
      if constexpr (kScaleAfter) {
#pragma unroll
        for (int t = 0; t < T; ++t) {
          mma_bf16(xsum[t], kOnes, b[t][0], b[t][1]);
          mma_bf16(xsum[t], kOnes, b[t][2], b[t][3]);
        }
      }
#pragma unroll
      for (int j = 0; j < NP; ++j) {
        uint32_t lo[4], hi[4];  // n-tile 2p (A rows 0-7) and 2p+1 (rows 8-15)
        if constexpr (kScaleAfter) {
          raw_word(lo, wv[j][0][u][q]);
          raw_word(hi, wv[j][1][u][q]);
        } else {
          dequant_word(lo, wv[j][0][u][q], sv[j][0][u][q]);
          dequant_word(hi, wv[j][1][u][q], sv[j][1][u][q]);
        }
        const uint32_t a0[4] = {lo[0], hi[0], lo[1], hi[1]};
        const uint32_t a1[4] = {lo[2], hi[2], lo[3], hi[3]};
#pragma unroll
        for (int t = 0; t < T; ++t) {
          mma_bf16(sums[j][t], a0, b[t][0], b[t][1]);
          mma_bf16(sums[j][t], a1, b[t][2], b[t][3]);
        }
      }
    }
    if constexpr (kScaleAfter) {
#pragma unroll
      for (int j = 0; j < NP; ++j) {
        // Accumulators e = 0, 1 are feature g (n-tile 2p, scale word sv[j][0]), e = 2, 3 feature g + 8 (sv[j][1]).
        float s[2], z[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 sz = __bfloat1622float2(bits_bf162(sv[j][h][u][0]));
          s[h] = sz.x;
          z[h] = sz.y;
        }
#pragma unroll
        for (int t = 0; t < T; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1;
            const float x = xsum[t][e];
            acc[j][t][e] = fmaf(s[h], fmaf(-136.f, x, part[j][t][e]), fmaf(z[h], x, acc[j][t][e]));
          }
      }
    }
  }

  // The fused epilogue's i-th output (i < kAcc * kLanes, as it walks them): its row in the block row, its row of
  // out and its column; valid = a real output of this block (not an up feature, not past the rows or n_out).
  struct Target {
    bool valid;
    int64_t out_row;
    int col;
  };
  static __device__ __forceinline__ Target target(int i, int pair0, int rows, const FusedArgs& f) {
    const int l = i % kLanes;
    const int r = i / kLanes;  // (j * T + t) * 4 + e
    const int e = r % 4;
    const int t = (r / 4) % T;
    const int j = r / (4 * T);
    const int row = 8 * t + 2 * (l & 3) + (e & 1);
    const int col = (2 * (pair0 + j) + (e >> 1)) * 8 + (l >> 2);
    const bool valid = i < kAcc * kLanes && !(kFuse == kSwiglu && j >= NP / 2) && row < rows && col < f.n_out;
    return {valid, static_cast<int64_t>(blockIdx.y) * f.rows_per_block + row, col};
  }

  // Each staged row's sum of squares, one partial per warp (8 rows of at most 16 warps): with norm_after the
  // epilogue adds them up (row_inv); otherwise stage_rows uses row 0's as scratch.
  static __device__ __forceinline__ float* row_squares() {
    __shared__ float squares_s[8 * kMaxWarps];
    return squares_s;
  }

  // 1/rms of staged row `row` from its warps' partial sums of squares, added in warp order (the same in every block
  // and for every output of the row).
  static __device__ __forceinline__ float row_inv(const FusedArgs& f, int row, int warps) {
    const float* squares = row_squares() + row * kMaxWarps;
    float total = 0.f;
    for (int w = 0; w < warps; ++w) total += squares[w];
    return rsqrtf(total / static_cast<float>(f.k_x) + f.eps);
  }

  // The fused kernels' prologue: the block row's `rows` rows of x (K_x = f.k_x columns) as bf16 pairs in `staged`,
  // in fragment order (stage_word), zero from K_x to the packed K. With a norm weight, each row RMS-normalized:
  // - as the model rounds it (float32 sum of squares, the scaled value rounded, times the weight rounded): the sum
  //   of squares needs the whole row, so a barrier and a second pass over the row precede the multiply;
  // - with f.norm_after, in one pass: each element times its weight, rounded, is staged, each warp's partial sum of
  //   squares goes to row_squares(), and the epilogue multiplies the row's sums by its 1/rms (row_inv), which is
  //   linear in the staged row. One rounding less per element than the model's (the results differ in the last
  //   bits), and no barrier or second pass before the multiply.
  // nw_first: this thread's first norm vector (norm_vector, loaded before the dependent-launch wait when it may
  // be). Ends with a barrier.
  static __device__ __forceinline__ void stage_rows(const FusedArgs& f, int k, int rows, uint32_t* staged,
                                                    uint4 nw_first) {
    float* squares_s = row_squares();
    const int vecs = k / 8, x_vecs = f.k_x / 8;
    const int row0 = blockIdx.y * f.rows_per_block;
    const int warps = blockDim.x / kLanes;
    const bool one_pass = f.norm_after && f.norm_weight != nullptr;
    for (int r = 0; r < rows; ++r) {
      const uint4* x4 = reinterpret_cast<const uint4*>(f.x + (row0 + r) * f.x_row_stride);
      uint32_t* row = staged + r * staged_row_words(k);
      float squares = 0.f;
      for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
        const uint4 raw = v < x_vecs ? __ldg(x4 + v) : make_uint4(0, 0, 0, 0);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 p = __bfloat1622float2(bits_bf162(words[i]));
          squares = fmaf(p.x, p.x, fmaf(p.y, p.y, squares));
        }
        if (one_pass) {
          const uint4 nw = v == static_cast<int>(threadIdx.x) ? nw_first : norm_vector(f, v);
          const uint32_t weights[4] = {nw.x, nw.y, nw.z, nw.w};
          uint32_t scaled[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 p = __bfloat1622float2(bits_bf162(words[i]));
            const float2 q = __bfloat1622float2(bits_bf162(weights[i]));
            scaled[i] = bf162_bits(__floats2bfloat162_rn(p.x * q.x, p.y * q.y));
          }
          store_vector(row, v, make_uint4(scaled[0], scaled[1], scaled[2], scaled[3]));
        } else {
          store_vector(row, v, raw);
        }
      }
      if (f.norm_weight == nullptr) continue;
#pragma unroll
      for (int off = kLanes / 2; off > 0; off /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, off);
      if (one_pass) {
        if (threadIdx.x % kLanes == 0) squares_s[r * kMaxWarps + threadIdx.x / kLanes] = squares;
        continue;
      }
      if (threadIdx.x % kLanes == 0) squares_s[threadIdx.x / kLanes] = squares;
      __syncthreads();
      // Every warp sums the warps' partial sums as a tree, in the same order.
      float total = static_cast<int>(threadIdx.x % kLanes) < warps ? squares_s[threadIdx.x % kLanes] : 0.f;
#pragma unroll
      for (int off = kLanes / 2; off > 0; off /= 2) total += __shfl_xor_sync(0xffffffffu, total, off);
      const float inv = rsqrtf(total / static_cast<float>(f.k_x) + f.eps);
      for (int v = threadIdx.x; v < x_vecs; v += blockDim.x) {  // this thread's own vectors
        const uint4 raw = load_vector(row, v);
        const uint4 nw = v == static_cast<int>(threadIdx.x) ? nw_first : norm_vector(f, v);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w}, weights[4] = {nw.x, nw.y, nw.z, nw.w};
        uint32_t normed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 p = __bfloat1622float2(bits_bf162(words[i]));
          const float2 q = __bfloat1622float2(bits_bf162(weights[i]));
          normed[i] = bf162_bits(__floats2bfloat162_rn(round_bf16(p.x * inv) * q.x, round_bf16(p.y * inv) * q.y));
        }
        store_vector(row, v, make_uint4(normed[0], normed[1], normed[2], normed[3]));
      }
      if (r + 1 < rows) __syncthreads();  // squares_s is reused by the next row
    }
    __syncthreads();
  }

  // The fused kernels' prologue: the block stages whole rows (stage_rows), normalized where there is a norm weight;
  // the ablation build's kAblateNorm stages them as they are. (Rows without a norm (o, down) staged warp by warp, each
  // warp only its own chunks' K behind a warp barrier, were faster in the bench's decode chain but slower in the
  // model: int4dopqf 1,611.3 against 1,632.8 tokens/s, 2026-12-06 09:25, H100; docs/benchmarks/int4.md.)
  static __device__ __forceinline__ void stage(const FusedArgs& f, const GemvShape& sh, int rows, uint32_t* staged,
                                               uint4 nw_first, int ablate) {
    if (ablate & kAblateNorm) {
      FusedArgs raw = f;
      raw.norm_weight = nullptr;
      stage_rows(raw, sh.k, rows, staged, nw_first);
    } else {
      stage_rows(f, sh.k, rows, staged, nw_first);
    }
  }

  // The ablation build's stand-ins (Ablate). kAblateMath: each weight word folded into one accumulator, so that the
  // loads stay and the dequantize and mma go. kAblateReduction: warp 0 stores its own sums of the first row.
  template <typename Acc, typename Words>
  static __device__ __forceinline__ void fold_words(Acc& acc, const Words& wv, const Words& sv) {
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int q = 0; q < kWords; ++q) acc[j][0][h] += __uint_as_float(wv[j][h][u][q] ^ sv[j][h][u][0]);
  }
  template <typename Acc>
  static __device__ __forceinline__ void store_own_sums(const Acc& acc, __nv_bfloat16* out, int pair0, int n_out) {
    const int lane = threadIdx.x % kLanes;
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = (2 * (pair0 + j) + (e >> 1)) * 8 + lane / 4;
        if (col < n_out) out[col] = __float2bfloat16_rn(acc[j][0][e]);
      }
  }

  // Norm vector v (8 bf16 weights), or zeros past K_x or without a norm.
  static __device__ __forceinline__ uint4 norm_vector(const FusedArgs& f, int v) {
    if (f.norm_weight == nullptr || v >= f.k_x / 8) return make_uint4(0, 0, 0, 0);
    return __ldg(reinterpret_cast<const uint4*>(f.norm_weight) + v);
  }

  // A staged row in fragment order: within each block of 16 words (32 values), word c + 4e (c, e < 4) is stored
  // at 4c + e, so that the four words of a lane's B fragment (b_fragments) are adjacent. Vector v (words 4v..4v+3,
  // one e for c = 0..3) goes to 4 words 4 apart.
  static __device__ __forceinline__ void store_vector(uint32_t* row, int v, uint4 val) {
    uint32_t* p = row + ((4 * v) & ~15) + (v & 3);
    p[0] = val.x;
    p[4] = val.y;
    p[8] = val.z;
    p[12] = val.w;
  }
  static __device__ __forceinline__ uint4 load_vector(const uint32_t* row, int v) {
    const uint32_t* p = row + ((4 * v) & ~15) + (v & 3);
    return make_uint4(p[0], p[4], p[8], p[12]);
  }

  static __device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

  static constexpr int kSuperShift = IKT == 8 ? 7 : (IKT == 4 ? 6 : 5);  // log2(16 * IKT)
};

// Registers: the one-super-tile kernels of at most two n-tile pairs (q/k/v, o, gate/up, the head) are held to 64 a
// thread (two 16-warp or four 8-warp blocks an SM), which leaves room for the next kernel's blocks under dependent
// launch; left to itself ptxas gave the scale-after gate/up kernel 81 and the head's 83 (three 8-warp blocks).
template <int U, int NP, int T>
constexpr int kMinBlocks = U == 1 && NP <= 2 && T == 1 ? 2 : 1;  // blocks of 512 threads an SM

template <int IKT, int U, int NP, int T, bool kScaleAfter>
__global__ void __launch_bounds__(512, kMinBlocks<U, NP, T>) int4_gemv_kernel(const __nv_bfloat16* __restrict__ x,
                                                         const uint32_t* __restrict__ w,
                                                         const uint32_t* __restrict__ sz,
                                                         __nv_bfloat16* __restrict__ out, GemvShape sh,
                                                         bool weights_early) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  FusedArgs f;  // the plain multiply reads only weights_early of it
  f.weights_early = weights_early;
  Int4Gemv<IKT, U, NP, T, kNone, kScaleAfter>::run(x, w, sz, out, sh, f);
#endif
}

template <int IKT, int U, int NP, int kFuse, bool kScaleAfter>
__global__ void __launch_bounds__(512, kMinBlocks<U, NP, 1>) int4_fused_linear_kernel(const uint32_t* __restrict__ w,
                                                                 const uint32_t* __restrict__ sz,
                                                                 __nv_bfloat16* __restrict__ out, GemvShape sh,
                                                                 FusedArgs f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  Int4Gemv<IKT, U, NP, 1, kFuse, kScaleAfter>::run(nullptr, w, sz, out, sh, f);
#endif
}

// Whether a call takes the scale-after form (Int4Gemv's kScaleAfter): where a group covers whole super-tiles of
// 16 * IKT rows. AOTI_CUDA_INT4_SCALE_AFTER=0 (kernel tuning only, docs/configuration.md; read once per process)
// keeps the dequantize-first form everywhere, so that a whole model can be timed and checked both ways.
bool scale_after(int group_shift, int ikt) {
  static const bool enabled = env_integer_or_warn("AOTI_CUDA_INT4_SCALE_AFTER", 0, 1).value_or(1) == 1;
  return enabled && (1 << group_shift) >= 16 * ikt;
}

// Warps per block: enough to cover K in one pass of U-super-tile chunks, at most kw_max.
int gemv_warps(int k_super, int u, int kw_max) {
  const int chunks = (k_super + u - 1) / u;
  return chunks < kw_max ? chunks : kw_max;
}

}  // namespace

template <int IKT, int U, int NP, int KWMax>
cudaError_t launch_gemv(const Problem& p, const Shape& s, cudaStream_t stream) {
  static_assert(KWMax >= 1 && KWMax * kLanes <= 512, "launch bounds");
  const GemvShape sh{s.m, s.n, s.k, s.n_tiles, s.k_super, s.group_shift};
  const int kw = gemv_warps(sh.k_super, U, KWMax);
  const int pairs = (sh.n_tiles + 1) / 2;
  const dim3 grid(static_cast<unsigned>((pairs + NP - 1) / NP));
  const auto* x = static_cast<const __nv_bfloat16*>(p.x);
  const auto* w = static_cast<const uint32_t*>(p.w);
  const auto* sz = static_cast<const uint32_t*>(p.sz);
  auto* out = static_cast<__nv_bfloat16*>(p.out);
  const dim3 block(static_cast<unsigned>(kw * kLanes));
  const int smem = kw * NP * (p.m <= 8 ? 1 : 2) * 4 * kLanes * 4;
  if (scale_after(sh.group_shift, IKT)) {
    return p.m <= 8 ? pdl::launch(int4_gemv_kernel<IKT, U, NP, 1, true>, grid, block, smem, stream, x, w, sz, out, sh,
                                  p.weights_early)
                    : pdl::launch(int4_gemv_kernel<IKT, U, NP, 2, true>, grid, block, smem, stream, x, w, sz, out, sh,
                                  p.weights_early);
  }
  return p.m <= 8 ? pdl::launch(int4_gemv_kernel<IKT, U, NP, 1, false>, grid, block, smem, stream, x, w, sz, out, sh,
                                p.weights_early)
                  : pdl::launch(int4_gemv_kernel<IKT, U, NP, 2, false>, grid, block, smem, stream, x, w, sz, out, sh,
                                p.weights_early);
}

// The dispatch's choice for M <= 8 (bench/int4_bench.cu --variants, docs/benchmarks/int4.md):
// one super-tile per warp while K fits 16 warps (K <= 2048 for innerKTiles 8), else chunks of 4;
// for many n-tiles, two pairs per block of 8 warps: at 72 registers a 16-warp block of that kernel
// fits once per SM, an 8-warp one three times (measured 8.7 against 11.3 us for 11264 x 2048).
template <int IKT>
cudaError_t launch_gemv_default(const Problem& p, const Shape& s, cudaStream_t stream) {
  if constexpr (IKT != 8) {
    return launch_gemv<IKT, 4, 1, 16>(p, s, stream);
  } else {
    if (s.k_super > 16) return launch_gemv<IKT, 4, 1, 16>(p, s, stream);
    if (s.n_tiles >= 1024) return launch_gemv<IKT, 1, 2, 8>(p, s, stream);
    return launch_gemv<IKT, 1, 1, 16>(p, s, stream);
  }
}

namespace {

template <int IKT, int U, int NP, int KWMax, int kFuse>
cudaError_t launch_fused(const fused_linear::Int4Problem& p, const GemvShape& sh, FusedArgs f, cudaStream_t stream) {
  using Kernel = Int4Gemv<IKT, U, NP, 1, kFuse>;  // (its shared-memory layout is the same in both forms)
  const int kw = gemv_warps(sh.k_super, U, KWMax);
  const int reduction = Kernel::reduction_bytes(kw);
  const int row_bytes = Kernel::staged_row_words(sh.k) * 4;
  // Rows per block row: up to the 8 of an mma fragment, as many as the shared memory holds. A decode row fits the
  // 48 KB every launch gets; only past that is the device's opt-in limit asked for (not on every call).
  constexpr std::size_t kDefaultSmem = 48 * 1024;
  f.rows_per_block = static_cast<int>(std::min<int64_t>(8, p.rows));
  auto smem_for = [&](int rows) {
    return static_cast<std::size_t>(reduction) + static_cast<std::size_t>(rows) * row_bytes;
  };
  if (smem_for(f.rows_per_block) > kDefaultSmem) {
    int max_smem = 0, device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (err != cudaSuccess) return err;
    max_smem -= 1024;  // the prologue's static bytes
    while (f.rows_per_block > 1 && smem_for(f.rows_per_block) > static_cast<std::size_t>(max_smem)) --f.rows_per_block;
    if (smem_for(f.rows_per_block) > static_cast<std::size_t>(max_smem)) return cudaErrorInvalidValue;
    for (auto* kernel : {int4_fused_linear_kernel<IKT, U, NP, kFuse, false>,
                         int4_fused_linear_kernel<IKT, U, NP, kFuse, true>}) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem_for(f.rows_per_block)));
      if (err != cudaSuccess) return err;
    }
  }
  const std::size_t smem = smem_for(f.rows_per_block);
  constexpr int out_pairs_per_block = kFuse == kSwiglu ? NP / 2 : NP;
  const int64_t out_pairs = (f.n_out + 15) / 16;
  const dim3 grid(static_cast<unsigned>((out_pairs + out_pairs_per_block - 1) / out_pairs_per_block),
                  static_cast<unsigned>((p.rows + f.rows_per_block - 1) / f.rows_per_block));
  auto* kernel = scale_after(sh.group_shift, IKT) ? int4_fused_linear_kernel<IKT, U, NP, kFuse, true>
                                                 : int4_fused_linear_kernel<IKT, U, NP, kFuse, false>;
  return pdl::launch(kernel, grid, dim3(static_cast<unsigned>(kw * kLanes)), smem, stream,
                     static_cast<const uint32_t*>(p.qdata), static_cast<const uint32_t*>(p.scale_and_zero),
                     static_cast<__nv_bfloat16*>(p.out), sh, f);
}

// The plain kernel's configurations (launch_gemv_default), with two pairs (gate, up) for SwiGLU.
template <int IKT>
cudaError_t launch_fused_default(const fused_linear::Int4Problem& p, const GemvShape& sh, const FusedArgs& f,
                                cudaStream_t stream) {
  if constexpr (IKT != 8) {
    return p.swiglu ? launch_fused<IKT, 4, 2, 16, kSwiglu>(p, sh, f, stream)
                    : launch_fused<IKT, 4, 1, 16, kLinear>(p, sh, f, stream);
  } else {
    if (p.swiglu) {
      return sh.k_super > 16 ? launch_fused<IKT, 4, 2, 8, kSwiglu>(p, sh, f, stream)
                             : launch_fused<IKT, 1, 2, 8, kSwiglu>(p, sh, f, stream);
    }
    // Problem::small_blocks, for dependent launch: the next call's blocks start early only where this call's blocks
    // leave room on an SM. Registers (ptxas, sm_90): 47 for the 16-warp q/k/v and o kernel, so 192 of its blocks
    // fill 60 SMs twice; 102 for down's 11-warp one. 8-warp blocks leave room in finer steps. From 1024 n-tiles the
    // default's blocks have 8 warps already.
    if (p.small_blocks && sh.n_tiles < 1024) {
      return sh.k_super > 16 ? launch_fused<IKT, 4, 1, 8, kLinear>(p, sh, f, stream)
                             : launch_fused<IKT, 2, 1, 8, kLinear>(p, sh, f, stream);
    }
    if (sh.k_super > 16) return launch_fused<IKT, 4, 1, 16, kLinear>(p, sh, f, stream);
    if (sh.n_tiles >= 1024) return launch_fused<IKT, 1, 2, 8, kLinear>(p, sh, f, stream);
    return launch_fused<IKT, 1, 1, 16, kLinear>(p, sh, f, stream);
  }
}

int log2_exact(int64_t v) {
  int s = 0;
  while ((int64_t{1} << s) < v) ++s;
  return s;
}

}  // namespace

// The instantiations weight_int4pack_mm.cu links against (its dispatch and tuning candidates).
template cudaError_t launch_gemv_default<2>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv_default<4>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv_default<8>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 1, 1, 16>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 1, 2, 16>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 1, 4, 16>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 2, 1, 16>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 4, 1, 16>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 1, 2, 8>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 2, 1, 8>(const Problem&, const Shape&, cudaStream_t);
template cudaError_t launch_gemv<8, 4, 1, 4>(const Problem&, const Shape&, cudaStream_t);

}  // namespace int4mm

namespace fused_linear {

int launch_int4(const Int4Problem& p, void* stream) {
  if (p.rows == 0 || p.n == 0) return 0;
  const bool ikt_ok = p.inner_k_tiles == 2 || p.inner_k_tiles == 4 || p.inner_k_tiles == 8;
  if (!ikt_ok || p.k % (16 * p.inner_k_tiles) != 0 || p.k_x > p.k || p.k_x % 8 != 0 || p.n > p.n_packed ||
      p.n_packed % 8 != 0 || (p.swiglu && p.n % 32 != 0) || p.rows > int64_t{65535} * 8) {
    return cudaErrorInvalidValue;
  }
  const int4mm::GemvShape sh{1, static_cast<int>(p.n_packed), static_cast<int>(p.k), static_cast<int>(p.n_packed / 8),
                             static_cast<int>(p.k / (16 * p.inner_k_tiles)), int4mm::log2_exact(p.group)};
  int4mm::FusedArgs f;
  f.x = static_cast<const __nv_bfloat16*>(p.x);
  f.x_row_stride = p.x_row_stride;
  f.k_x = static_cast<int>(p.k_x);
  f.norm_weight = static_cast<const __nv_bfloat16*>(p.norm_weight);
  f.eps = p.eps;
  f.residual = static_cast<const __nv_bfloat16*>(p.residual);
  f.residual_row_stride = p.residual_row_stride;
  f.rows = static_cast<int>(p.rows);
  f.n_out = static_cast<int>(p.swiglu ? p.n / 2 : p.n);
  f.up_pairs = static_cast<int>(p.n / 2 / 16);
  f.weights_early = p.weights_early;
  f.norm_early = p.norm_early;
  f.norm_after = p.norm_after;
#ifdef AOTI_CUDA_INT4_ABLATION
  static const int ablate = static_cast<int>(env_integer_or_warn("AOTI_CUDA_INT4_ABLATE", 0, 15).value_or(0));
  f.ablate = ablate;
#endif
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.inner_k_tiles) {
    case 2: return static_cast<int>(int4mm::launch_fused_default<2>(p, sh, f, s));
    case 4: return static_cast<int>(int4mm::launch_fused_default<4>(p, sh, f, s));
    default: return static_cast<int>(int4mm::launch_fused_default<8>(p, sh, f, s));
  }
}

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
