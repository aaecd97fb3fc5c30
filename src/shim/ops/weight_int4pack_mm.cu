// aoti_cuda shim — CUDA kernels of the int4 weight-only matrix multiply
// (aoti_torch_cuda__weight_int4pack_mm). Formats: weight_int4pack_mm.hpp.
//
// Two kernel families, tensor cores throughout (mma.sync m16n8k16, bf16 in, fp32 accumulate):
//
// Int4Gemv (M <= 8, decode): weight streaming. The weights are the mma A
//   operand, 8 activation rows the B operand; every warp issues all loads of its chunk of K at
//   once (weight_int4pack_gemv.cu).
//
// Int4Gemm (M > 16):
//   * The packed weight word of a lane IS its mma B fragment for two k-tiles, so weights go
//     straight from global memory to registers (16/8/4-byte coalesced loads, one k-super-tile
//     prefetched ahead), are dequantized in registers (4 bit ops + 2 bf16x2 FMAs per pair)
//     and never touch shared memory.
//   * Activations are staged per warp in shared memory with cp.async (32 k at a time,
//     double-buffered, XOR-swizzled rows so ldmatrix is bank-conflict free) and read with
//     ldmatrix; rows past M are zero-filled by cp.async.
//   * A block owns an output tile of 16*MT rows x 8*NT columns; its KW warps split K (each
//     takes every KW-th k-super-tile), then reduce through shared memory.
// M = 9..64: MT = 1, 8 warps splitting K, a 3-deep super-tile pipeline. Large M: MT = 4 (64 rows)
// so each dequantized weight feeds 4 mma and each activation fragment feeds NT = 4. (M >= 65
// normally goes to dequantize + cuBLAS instead: weight_int4pack_mm.cpp.)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/env.hpp"
#include "shim/ops/ptx.cuh"
#include "shim/ops/shared_memory.cuh"
#include "shim/ops/int4_common.cuh"
#include "shim/ops/weight_int4pack_gemv.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"

namespace aoti_cuda {
namespace shim {
namespace int4mm {
namespace {

using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma_bf16;

constexpr int kRowBytes = 64;  // one staged activation row: 32 bf16 (one packed word's k range)

// Nibbles (shift, shift+16) of `word` -> bf16x2 {(q0-8)*s+z, (q1-8)*s+z}. OR-ing a nibble
// into the mantissa of bf16 128.0 (0x4300, ulp 1) gives 128+q exactly; subtracting 136 is
// exact too, so the only rounding is the final FMA's, as in PyTorch's kernel.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, int shift, __nv_bfloat162 scale,
                                                 __nv_bfloat162 zero) {
  const uint32_t biased = ((word >> shift) & 0x000f000fu) | 0x43004300u;
  const __nv_bfloat162 q = __hsub2(bits_bf162(biased), bits_bf162(0x43084308u));  // {136, 136}
  return bf162_bits(__hfma2(q, scale, zero));
}

// Byte offset of 16-byte chunk c (0..3) of staged row r: chunks are XOR-swizzled by (r/2)%4 so
// the 8 rows an ldmatrix phase reads (64-byte stride) fall in 8 distinct bank groups.
__device__ __forceinline__ uint32_t staged_offset(int r, int c) {
  return static_cast<uint32_t>(r * kRowBytes + ((c ^ ((r >> 1) & 3)) << 4));
}

template <int Words>
struct WordVec;  // the ikt/2 packed words of one lane for one (n-tile, k-super-tile)
template <>
struct WordVec<1> {
  static __device__ __forceinline__ void load(uint32_t (&d)[1], const uint32_t* p) { d[0] = __ldg(p); }
};
template <>
struct WordVec<2> {
  static __device__ __forceinline__ void load(uint32_t (&d)[2], const uint32_t* p) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    d[0] = v.x;
    d[1] = v.y;
  }
};
template <>
struct WordVec<4> {
  static __device__ __forceinline__ void load(uint32_t (&d)[4], const uint32_t* p) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    d[0] = v.x;
    d[1] = v.y;
    d[2] = v.z;
    d[3] = v.w;
  }
};


// How a warp moves through its k-super-tiles:
//   kWord:   activations staged one 32-k word at a time (2 slots), weights one super-tile ahead
//            (large M: many mma per byte hide the latency);
//   kSuper:  a Depth-stage pipeline of whole super-tiles, weights and activations (cp.async to
//            shared memory) together, so the next Depth-1 super-tiles' loads are in flight.
// (A third way, activation fragments loaded straight into registers, was replaced by Int4Gemv.)
enum class Pipe { kWord, kSuper };

template <int IKT, int MT, int NT, int KW, bool HalfM, Pipe P, int Depth>
struct Int4Gemm {
  static constexpr bool Deep = P != Pipe::kWord;
  static constexpr int kWords = IKT / 2;                 // packed words per lane per super-tile
  static constexpr int kRows = HalfM ? 8 : 16 * MT;      // staged activation rows
  static constexpr int kSlotBytes = kRows * kRowBytes;   // one 32-k activation slice
  static constexpr int kDepth = Depth;                   // Deep: super-tiles in the pipeline
  static constexpr int kStageBytes = Deep ? KW * kDepth * kWords * kSlotBytes : KW * 2 * kSlotBytes;
  static constexpr int kReduceBytes = KW * MT * NT * 4 * kLanes * 4;
  static constexpr int kSmemBytes = kStageBytes > kReduceBytes ? kStageBytes : kReduceBytes;
  static_assert(!HalfM || MT == 1, "HalfM stages 8 rows: one m-tile");
  static_assert(kSmemBytes <= 200 * 1024, "dynamic shared memory budget");

  struct Frag {
    uint32_t w[NT][kWords];  // packed weights
    uint32_t s[NT][kWords];  // (scale, zero) bf16x2 of each word's group
  };

  // Weight words and their scales for super-tile `st` (n-tiles past N load nothing).
  static __device__ __forceinline__ void load_frag(Frag& f, const uint32_t* w, const uint32_t* sz,
                                                   const Shape& sh, int nt0, int st, int lane) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int nt = nt0 + j;
      if (nt >= sh.n_tiles) continue;
      const uint32_t* p = w + ((static_cast<size_t>(nt) * sh.k_super + st) * kLanes + lane) * kWords;
      WordVec<kWords>::load(f.w[j], p);
      const int n = nt * 8 + (lane >> 2);
#pragma unroll
      for (int q = 0; q < kWords; ++q) {
        const int group = (st * IKT * 16 + q * 32) >> sh.group_shift;
        f.s[j][q] = __ldg(sz + static_cast<size_t>(group) * sh.n + n);
      }
    }
  }

  // cp.async of the activation slice [m0, m0+kRows) x [k0, k0+32) into `slot`.
  static __device__ __forceinline__ void stage_x(uint32_t slot, const __nv_bfloat16* x, const Shape& sh,
                                                 int m0, int k0, int lane) {
#pragma unroll
    for (int i = 0; i < kRows * 4 / kLanes; ++i) {
      const int chunk = lane + i * kLanes;
      const int r = chunk >> 2;
      const int c = chunk & 3;
      const bool valid = m0 + r < sh.m;
      const __nv_bfloat16* src = valid ? x + static_cast<size_t>(m0 + r) * sh.k + k0 + c * 8 : x;
      cp_async16(slot + staged_offset(r, c), src, valid ? 16 : 0);
    }
  }

  // A fragments of both k-tiles of the staged slice: a[mi][kt].
  static __device__ __forceinline__ void load_a(uint32_t (&a)[MT][2][4], uint32_t slot, int lane) {
    if constexpr (HalfM) {
      uint32_t r[4];
      ldmatrix_x4(r, slot + staged_offset(lane & 7, lane >> 3));  // k 0-7, 8-15, 16-23, 24-31
      a[0][0][0] = r[0]; a[0][0][1] = 0u; a[0][0][2] = r[1]; a[0][0][3] = 0u;
      a[0][1][0] = r[2]; a[0][1][1] = 0u; a[0][1][2] = r[3]; a[0][1][3] = 0u;
    } else {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int kt = 0; kt < 2; ++kt) {
          const int row = mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          ldmatrix_x4(a[mi][kt], slot + staged_offset(row, kt * 2 + (lane >> 4)));
        }
      }
    }
  }

  static __device__ __forceinline__ void mma_word(float (&acc)[MT][NT][4], const uint32_t (&a)[MT][2][4],
                                                  const Frag& f, int q, const Shape& sh, int nt0) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (nt0 + j >= sh.n_tiles) continue;
      const __nv_bfloat162 sz2 = bits_bf162(f.s[j][q]);
      const __nv_bfloat162 scale = __low2bfloat162(sz2);
      const __nv_bfloat162 zero = __high2bfloat162(sz2);
      const uint32_t word = f.w[j][q];
      const uint32_t b00 = dequant_pair(word, 0, scale, zero);
      const uint32_t b01 = dequant_pair(word, 4, scale, zero);
      const uint32_t b10 = dequant_pair(word, 8, scale, zero);
      const uint32_t b11 = dequant_pair(word, 12, scale, zero);
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        mma_bf16(acc[mi][j], a[mi][0], b00, b01);
        mma_bf16(acc[mi][j], a[mi][1], b10, b11);
      }
    }
  }

  // Sums the KW warps' partial tiles and writes bf16 output (rows < M, n-tiles < N/8).
  static __device__ __forceinline__ void reduce_store(float (&acc)[MT][NT][4], unsigned char* smem,
                                                      __nv_bfloat16* out, const Shape& sh, int m0, int nt0,
                                                      int warp, int lane) {
    float* red = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warp is done with its staged activations
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) red[((warp * MT + mi) * NT + j) * 4 * kLanes + c * kLanes + lane] = acc[mi][j][c];
    __syncthreads();
    constexpr int kPairs = MT * NT * 2 * kLanes;  // bf16x2 outputs of the tile
    for (int pidx = threadIdx.x; pidx < kPairs; pidx += KW * kLanes) {
      const int l = pidx % kLanes;
      const int half = (pidx / kLanes) & 1;
      const int tile = pidx / (2 * kLanes);  // mi * NT + j
      const int mi = tile / NT;
      const int j = tile % NT;
      const int row = m0 + mi * 16 + (l >> 2) + half * 8;
      const int nt = nt0 + j;
      if (row >= sh.m || nt >= sh.n_tiles) continue;
      float v0 = 0.f, v1 = 0.f;
      for (int w = 0; w < KW; ++w) {
        const float* base = red + (w * MT * NT + tile) * 4 * kLanes;
        v0 += base[(half * 2) * kLanes + l];
        v1 += base[(half * 2 + 1) * kLanes + l];
      }
      const int col = nt * 8 + (l & 3) * 2;
      *reinterpret_cast<__nv_bfloat162*>(out + static_cast<size_t>(row) * sh.n + col) = __floats2bfloat162_rn(v0, v1);
    }
  }

  // Weights, scales and activations of super-tile `st` into one Deep stage.
  static __device__ __forceinline__ void issue_super(Frag& f, uint32_t stage, const __nv_bfloat16* x,
                                                     const uint32_t* w, const uint32_t* sz, const Shape& sh, int m0,
                                                     int nt0, int st, int lane) {
    load_frag(f, w, sz, sh, nt0, st, lane);
#pragma unroll
    for (int q = 0; q < kWords; ++q) stage_x(stage + q * kSlotBytes, x, sh, m0, st * IKT * 16 + q * 32, lane);
  }

  static __device__ __forceinline__ void deep_loop(float (&acc)[MT][NT][4], uint32_t stages, const __nv_bfloat16* x,
                                                   const uint32_t* w, const uint32_t* sz, const Shape& sh, int m0,
                                                   int nt0, int warp, int lane) {
    constexpr int kStage = kWords * kSlotBytes;
    const int count = warp < sh.k_super ? (sh.k_super - warp + KW - 1) / KW : 0;  // this warp's super-tiles
    Frag ring[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth - 1; ++d) {
      if (d < count) issue_super(ring[d], stages + d * kStage, x, w, sz, sh, m0, nt0, warp + d * KW, lane);
      cp_async_commit();
    }
    for (int i0 = 0; i0 < count; i0 += kDepth) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {  // unrolled: ring[] indices are compile-time
        const int i = i0 + d;
        if (i >= count) break;
        const int ahead = i + kDepth - 1;
        if (ahead < count) {
          issue_super(ring[(d + kDepth - 1) % kDepth], stages + ((d + kDepth - 1) % kDepth) * kStage, x, w, sz, sh,
                      m0, nt0, warp + ahead * KW, lane);
        }
        cp_async_commit();
        cp_async_wait<kDepth - 1>();
        __syncwarp();
#pragma unroll
        for (int q = 0; q < kWords; ++q) {
          uint32_t a[MT][2][4];
          load_a(a, stages + d * kStage + q * kSlotBytes, lane);
          mma_word(acc, a, ring[d], q, sh, nt0);
        }
        __syncwarp();  // this stage is refilled next iteration
      }
    }
  }

  static __device__ __forceinline__ void word_loop(float (&acc)[MT][NT][4], uint32_t stage, const __nv_bfloat16* x,
                                                   const uint32_t* w, const uint32_t* sz, const Shape& sh, int m0,
                                                   int nt0, int warp, int lane) {
    int st = warp;
    if (st >= sh.k_super) return;
    Frag cur, next;
    load_frag(cur, w, sz, sh, nt0, st, lane);
    stage_x(stage, x, sh, m0, st * IKT * 16, lane);
    cp_async_commit();
    int slot = 0;
    for (; st < sh.k_super; st += KW) {
      const bool more = st + KW < sh.k_super;
      if (more) load_frag(next, w, sz, sh, nt0, st + KW, lane);
#pragma unroll
      for (int q = 0; q < kWords; ++q) {
        // Prefetch the next 32-k activation slice (this super-tile's next word, or the next
        // super-tile's first) into the other slot, then wait for the current one.
        if (q + 1 < kWords) {
          stage_x(stage + (slot ^ 1) * kSlotBytes, x, sh, m0, st * IKT * 16 + (q + 1) * 32, lane);
        } else if (more) {
          stage_x(stage + (slot ^ 1) * kSlotBytes, x, sh, m0, (st + KW) * IKT * 16, lane);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncwarp();
        uint32_t a[MT][2][4];
        load_a(a, stage + slot * kSlotBytes, lane);
        mma_word(acc, a, cur, q, sh, nt0);
        __syncwarp();  // the slot is refilled two words from now
        slot ^= 1;
      }
      if (more) cur = next;
    }
  }

  static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint32_t* w, const uint32_t* sz,
                                             __nv_bfloat16* out, Shape sh) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int warp = threadIdx.x / kLanes;
    const int lane = threadIdx.x % kLanes;
    const int nt0 = blockIdx.x * NT;
    const int m0 = blockIdx.y * 16 * MT;
    const uint32_t per_warp = kStageBytes / KW;
    const uint32_t stage = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * per_warp;
    float acc[MT][NT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mi][j][c] = 0.f;
    if constexpr (Deep) {
      deep_loop(acc, stage, x, w, sz, sh, m0, nt0, warp, lane);
    } else {
      word_loop(acc, stage, x, w, sz, sh, m0, nt0, warp, lane);
    }
    reduce_store(acc, smem, out, sh, m0, nt0, warp, lane);
  }
};

template <int IKT, int MT, int NT, int KW, bool HalfM, Pipe P, int Depth>
__global__ void __launch_bounds__(KW * 32) int4_gemm_kernel(const __nv_bfloat16* __restrict__ x,
                                                            const uint32_t* __restrict__ w,
                                                            const uint32_t* __restrict__ sz,
                                                            __nv_bfloat16* __restrict__ out, Shape sh) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  Int4Gemm<IKT, MT, NT, KW, HalfM, P, Depth>::run(x, w, sz, out, sh);
#endif
}

// Kernel configurations, by M: <= 8 rows (weight streaming), <= 64 rows (16-row m-tiles), more.
// (M = 9..16 stays on the tile kernel: measured faster there than the streaming kernel with its
// second B fragment, int4.md.)
enum class Config { kGemv, kSmallM, kLargeM };

constexpr int64_t kGemvMaxM = 8;

Config pick_config(int64_t m) { return m <= kGemvMaxM ? Config::kGemv : (m <= 64 ? Config::kSmallM : Config::kLargeM); }

template <int IKT, int MT, int NT, int KW, bool HalfM, Pipe P, int Depth>
cudaError_t launch_one(const Problem& p, const Shape& sh, cudaStream_t stream) {
  using Gemm = Int4Gemm<IKT, MT, NT, KW, HalfM, P, Depth>;
  auto* kernel = int4_gemm_kernel<IKT, MT, NT, KW, HalfM, P, Depth>;
  static SharedMemoryOptIns opted_in{};
  if (const cudaError_t err = opt_in_shared_memory(kernel, Gemm::kSmemBytes, opted_in); err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((sh.n_tiles + NT - 1) / NT),
                  static_cast<unsigned>((p.m + 16 * MT - 1) / (16 * MT)));
  kernel<<<grid, KW * 32, Gemm::kSmemBytes, stream>>>(
      static_cast<const __nv_bfloat16*>(p.x), static_cast<const uint32_t*>(p.w), static_cast<const uint32_t*>(p.sz),
      static_cast<__nv_bfloat16*>(p.out), sh);
  return cudaGetLastError();
}

template <int IKT>
cudaError_t launch_ikt(const Problem& p, const Shape& sh, cudaStream_t stream) {
  switch (pick_config(p.m)) {
    case Config::kGemv: return launch_gemv_default<IKT>(p, sh, stream);
    case Config::kSmallM: return launch_one<IKT, 1, 2, 8, false, Pipe::kSuper, 3>(p, sh, stream);
    case Config::kLargeM: return launch_one<IKT, 4, 4, 4, false, Pipe::kWord, 2>(p, sh, stream);
  }
  return cudaErrorInvalidValue;
}

// Tuning candidates for bench/int4_bench.cu --variants (innerKTiles 8 only); 0 is the dispatch.
// "gemv Uu NPn KWk": the weight-streaming kernel with chunks of u super-tiles, n n-tile pairs per
// block, at most k warps per block. The "super" ones are the tensor-core tile kernel that served
// M <= 16 before the streaming kernel (kept for comparison in the same run).
struct Variant {
  const char* name;
  int max_m;
  cudaError_t (*fn)(const Problem&, const Shape&, cudaStream_t);
};
const Variant kVariants[] = {
    {"default dispatch", 1 << 30, nullptr},
    {"gemv   U1 NP1 KW16 m<=16", 16, launch_gemv<8, 1, 1, 16>},
    {"gemv   U1 NP2 KW16 m<=16", 16, launch_gemv<8, 1, 2, 16>},
    {"gemv   U1 NP4 KW16 m<=16", 16, launch_gemv<8, 1, 4, 16>},
    {"gemv   U2 NP1 KW16 m<=16", 16, launch_gemv<8, 2, 1, 16>},
    {"gemv   U4 NP1 KW16 m<=16", 16, launch_gemv<8, 4, 1, 16>},
    {"gemv   U1 NP2 KW8 m<=16", 16, launch_gemv<8, 1, 2, 8>},
    // Smaller blocks, for dependent launch: the next call's blocks start early only where the running call's
    // blocks leave room on an SM, and smaller blocks leave it in finer steps as the call ends. Unmeasured.
    {"gemv   U2 NP1 KW8 m<=16", 16, launch_gemv<8, 2, 1, 8>},
    {"gemv   U4 NP1 KW4 m<=16", 16, launch_gemv<8, 4, 1, 4>},
    {"super  NT2 KW8 D3 m<=8 (old M<=8)", 8, launch_one<8, 1, 2, 8, true, Pipe::kSuper, 3>},
    {"super  NT2 KW8 D3 m<=64", 64, launch_one<8, 1, 2, 8, false, Pipe::kSuper, 3>},
    {"word   MT2 NT4 KW4", 1 << 30, launch_one<8, 2, 4, 4, false, Pipe::kWord, 2>},
    {"word   MT4 NT2 KW4", 1 << 30, launch_one<8, 4, 2, 4, false, Pipe::kWord, 2>},
    {"word   MT4 NT4 KW2", 1 << 30, launch_one<8, 4, 4, 2, false, Pipe::kWord, 2>},
    {"word   MT2 NT4 KW8", 1 << 30, launch_one<8, 2, 4, 8, false, Pipe::kWord, 2>},
};

int log2_exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

}  // namespace

const char* config_name(const Problem& p, int /*sm_count*/) {
  switch (pick_config(p.m)) {
    case Config::kGemv: return "m<=8: weight streaming, weights as mma A, <=16 warps split K";
    case Config::kSmallM: return "m<=64: 16x16 tiles, 8 warps split K, 3-deep super-tile pipeline";
    case Config::kLargeM: return "m>64: 64x32 tiles, 4 warps split K";
  }
  return "?";
}

static Shape make_shape(const Problem& p) {
  Shape sh{};
  sh.m = static_cast<int>(p.m);
  sh.n = static_cast<int>(p.n);
  sh.k = static_cast<int>(p.k);
  sh.n_tiles = static_cast<int>(p.n / 8);
  sh.k_super = static_cast<int>(p.k / (16 * p.inner_k_tiles));
  sh.group_shift = log2_exact(p.group);
  return sh;
}

int variant_count() { return static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0])); }

const char* variant_name(int v) { return v >= 0 && v < variant_count() ? kVariants[v].name : "?"; }

int launch_variant(const Problem& p, void* stream, int v) {
  if (v == 0) return launch(p, stream, 0);
  if (v < 0 || v >= variant_count() || p.inner_k_tiles != 8 || p.m > kVariants[v].max_m) return cudaErrorInvalidValue;
  return kVariants[v].fn(p, make_shape(p), static_cast<cudaStream_t>(stream));
}

// AOTI_CUDA_INT4_VARIANT=v (kernel tuning only, docs/configuration.md): tuning
// candidate v instead of the dispatch wherever it applies (innerKTiles 8, M
// within the candidate's range), so that a whole model can be timed with it.
// Read once; a value out of 0..variant_count()-1 is logged and ignored.
int forced_variant() {
  static const int v = static_cast<int>(
      env_integer_or_warn("AOTI_CUDA_INT4_VARIANT", 0, variant_count() - 1).value_or(0));
  return v;
}

namespace {

// One thread per packed word (8 values of one row n): the 4 bf16 pairs {k, k+1} it holds go to
// dst[n - n0][k] (row-major, K wide), dequantized exactly as the matmul kernels do.
__global__ void dequantize_kernel(const uint32_t* __restrict__ w, const uint32_t* __restrict__ sz,
                                  __nv_bfloat16* __restrict__ dst, int n_total, int k, int k_super, int ikt,
                                  int group_shift, int nt0, int n_tiles) {
  const int words = ikt / 2;
  const int64_t per_tile = static_cast<int64_t>(k_super) * kLanes * words;
  const int64_t total = static_cast<int64_t>(n_tiles) * per_tile;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int p = static_cast<int>(i % words);
    const int lane = static_cast<int>((i / words) % kLanes);
    const int st = static_cast<int>((i / (words * kLanes)) % k_super);
    const int nt = nt0 + static_cast<int>(i / per_tile);
    const uint32_t word = __ldg(w + (static_cast<int64_t>(nt) * k_super + st) * kLanes * words + lane * words + p);
    const int n = nt * 8 + (lane >> 2);
    const int k_base = 16 * (ikt * st + 2 * p) + 2 * (lane & 3);
    const __nv_bfloat162 sz2 = bits_bf162(__ldg(sz + static_cast<int64_t>(k_base >> group_shift) * n_total + n));
    const __nv_bfloat162 scale = __low2bfloat162(sz2);
    const __nv_bfloat162 zero = __high2bfloat162(sz2);
    uint32_t* row = reinterpret_cast<uint32_t*>(dst + static_cast<int64_t>(n - nt0 * 8) * k);
#pragma unroll
    for (int q = 0; q < 4; ++q) row[(k_base + 8 * q) / 2] = dequant_pair(word, 4 * q, scale, zero);
  }
}

}  // namespace

int dequantize(const Problem& p, int64_t n0, int64_t rows, void* dst, void* stream) {
  if (n0 % 8 != 0 || rows % 8 != 0 || n0 < 0 || n0 + rows > p.n) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const Shape sh = make_shape(p);
  const int64_t threads = rows / 8 * sh.k_super * kLanes * (p.inner_k_tiles / 2);
  constexpr int kThreads = 256;
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  dequantize_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0,
                      static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint32_t*>(p.w), static_cast<const uint32_t*>(p.sz), static_cast<__nv_bfloat16*>(dst),
      sh.n, sh.k, sh.k_super, p.inner_k_tiles, sh.group_shift, static_cast<int>(n0 / 8), static_cast<int>(rows / 8));
  return cudaGetLastError();
}

int launch(const Problem& p, void* stream, int /*sm_count*/) {
  if (p.m == 0) return cudaSuccess;
  const Shape sh = make_shape(p);
  auto s = static_cast<cudaStream_t>(stream);
  if (const int v = forced_variant(); v > 0 && p.inner_k_tiles == 8 && p.m <= kVariants[v].max_m) {
    return kVariants[v].fn(p, sh, s);
  }
  switch (p.inner_k_tiles) {
    case 2: return launch_ikt<2>(p, sh, s);
    case 4: return launch_ikt<4>(p, sh, s);
    case 8: return launch_ikt<8>(p, sh, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace int4mm
}  // namespace shim
}  // namespace aoti_cuda
