// aoti_cuda shim — the int4 matmul's weight-streaming kernel (Int4Gemv) for few rows: its
// design in the comment below, its entry points in weight_int4pack_gemv.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "shim/ops/dependent_launch.hpp"
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
// weight_int4pack_mm.cu).
// Each pair is brought to bits 0-3 / 16-19 and OR-ed into the mantissa of bf16 128.0 (ulp 1)
// by one lop3: 128+q exactly (bf16 has only 7 mantissa bits, so a nibble cannot sit higher);
// minus 136 is exact, so (q-8)*s+z is rounded once, by the FMA, as in dequant_pair().
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

struct GemvShape {
  int m, n, k, n_tiles, k_super, group_shift;
};

template <int IKT, int U, int NP, int T>
struct Int4Gemv {
  static constexpr int kWords = IKT / 2;
  static constexpr int kAcc = NP * T * 4;  // fp32 accumulators per lane

  static __device__ __forceinline__ void run(const __nv_bfloat16* x, const uint32_t* w, const uint32_t* sz,
                                             __nv_bfloat16* out, const GemvShape sh) {
    extern __shared__ __align__(16) unsigned char gemv_smem[];
    const int warp = threadIdx.x / kLanes;
    const int lane = threadIdx.x % kLanes;
    const int kw = blockDim.x / kLanes;
    const int g = lane >> 2;
    const int c = lane & 3;
    const int pair0 = blockIdx.x * NP;
    // Launched with programmatic dependent launch (dependent_launch.hpp): nothing is read before.
    pdl::wait_for_predecessor();
    float acc[NP][T][4];
#pragma unroll
    for (int j = 0; j < NP; ++j)
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][t][e] = 0.f;
    // Activation rows of this lane's B fragments (token g, and g+8 when T == 2); past M: zeros.
    const uint32_t* xrow[T];
    bool xvalid[T];
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int row = g + 8 * t;
      xvalid[t] = row < sh.m;
      xrow[t] = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(xvalid[t] ? row : 0) * sh.k);
    }
    // Scales: one group covers whole super-tiles when group >= 16*IKT; then one load per super-tile.
    const bool group_per_super = sh.group_shift >= kSuperShift;
    const int n_chunks = (sh.k_super + U - 1) / U;
    for (int chunk = warp; chunk < n_chunks; chunk += kw) {
      const int st0 = chunk * U;
      uint32_t wv[NP][2][U][kWords];
      uint32_t sv[NP][2][U][kWords];
      // Every load of the chunk first (tiles past N and super-tiles past K load nothing).
#pragma unroll
      for (int j = 0; j < NP; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * (pair0 + j) + h;
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
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int st = st0 + u;
        if (st >= sh.k_super) break;
#pragma unroll
        for (int q = 0; q < kWords; ++q) {
          // B fragments of both k-tiles of this word: x[row][k0 + {0, 8, 16, 24}] pairs.
          const int k0 = st * IKT * 16 + q * 32 + 2 * c;
          uint32_t b[T][4];
#pragma unroll
          for (int t = 0; t < T; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) b[t][e] = xvalid[t] ? __ldg(xrow[t] + (k0 + 8 * e) / 2) : 0u;
#pragma unroll
          for (int j = 0; j < NP; ++j) {
            uint32_t lo[4], hi[4];  // n-tile 2p (A rows 0-7) and 2p+1 (rows 8-15)
            dequant_word(lo, wv[j][0][u][q], sv[j][0][u][q]);
            dequant_word(hi, wv[j][1][u][q], sv[j][1][u][q]);
            const uint32_t a0[4] = {lo[0], hi[0], lo[1], hi[1]};
            const uint32_t a1[4] = {lo[2], hi[2], lo[3], hi[3]};
#pragma unroll
            for (int t = 0; t < T; ++t) {
              mma_bf16(acc[j][t], a0, b[t][0], b[t][1]);
              mma_bf16(acc[j][t], a1, b[t][2], b[t][3]);
            }
          }
        }
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
      float v = 0.f;
      for (int ww = 0; ww < kw; ++ww) v += red[(ww * kAcc + r) * kLanes + l];  // warp order: deterministic
      const int row = 8 * t + 2 * (l & 3) + (e & 1);
      const int nt = 2 * (pair0 + j) + (e >> 1);
      if (row < sh.m && nt < sh.n_tiles) out[static_cast<size_t>(row) * sh.n + nt * 8 + (l >> 2)] = __float2bfloat16_rn(v);
    }
  }

  static constexpr int kSuperShift = IKT == 8 ? 7 : (IKT == 4 ? 6 : 5);  // log2(16 * IKT)
};

template <int IKT, int U, int NP, int T>
__global__ void __launch_bounds__(512) int4_gemv_kernel(const __nv_bfloat16* __restrict__ x,
                                                         const uint32_t* __restrict__ w,
                                                         const uint32_t* __restrict__ sz,
                                                         __nv_bfloat16* __restrict__ out, GemvShape sh) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  Int4Gemv<IKT, U, NP, T>::run(x, w, sz, out, sh);
#endif
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
  return p.m <= 8 ? pdl::launch(int4_gemv_kernel<IKT, U, NP, 1>, grid, block, kw * NP * 4 * kLanes * 4, stream, x, w,
                                sz, out, sh)
                  : pdl::launch(int4_gemv_kernel<IKT, U, NP, 2>, grid, block, kw * NP * 2 * 4 * kLanes * 4, stream, x,
                                w, sz, out, sh);
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

}  // namespace int4mm
}  // namespace shim
}  // namespace aoti_cuda
