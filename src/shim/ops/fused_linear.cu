// The fused linear kernel; see fused_linear.hpp for what it computes and how.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "shim/ops/fused_linear.hpp"

namespace aoti_cuda {
namespace shim {
namespace fused_linear {
namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kWarps = kThreads / 32;

template <bool kHalf>
__device__ __forceinline__ float load(const void* base, int64_t i) {
  if constexpr (kHalf) return __half2float(static_cast<const __half*>(base)[i]);
  else return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}
// x rounded to the dtype, as float.
template <bool kHalf>
__device__ __forceinline__ float rounded(float x) {
  if constexpr (kHalf) return __half2float(__float2half_rn(x));
  else return __bfloat162float(__float2bfloat16_rn(x));
}
template <bool kHalf>
__device__ __forceinline__ void store(void* base, int64_t i, float x) {
  if constexpr (kHalf) static_cast<__half*>(base)[i] = __float2half_rn(x);
  else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(x);
}
// The 8 elements of a 16-byte vector as floats.
template <bool kHalf>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&f)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kHalf) {
      __half2 h;
      memcpy(&h, &w[i], 4);
      const float2 p = __half22float2(h);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    } else {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

// The silu of an already rounded value, rounded (PyTorch's silu: x / (1 + exp(-x)) in float32).
template <bool kHalf>
__device__ __forceinline__ float silu_rounded(float v) {
  return rounded<kHalf>(v / (1.f + expf(-v)));
}

constexpr int kUnroll = 4;  // 16-byte weight loads in flight per thread and weight row, as the few-row GEMV

// kSwiglu: each output column c streams weight rows c (gate) and c + n/2 (up) and stores their SwiGLU.
// kNorm (p.norm_weight set): a prologue stages the RMS-normalized row in shared memory; without a norm the row is
// read straight from global memory next to the weights, as the few-row GEMV reads it (measured: staging a row that
// needs no normalization made the 5632-wide down projection ~1.5 us slower, 2026-12-04 16:25).
template <bool kHalf, bool kSwiglu, bool kNorm>
__global__ void __launch_bounds__(kThreads) fused_linear_kernel(Problem p) {
  constexpr int kRows = kSwiglu ? 2 : 1;  // weight rows per output column
  extern __shared__ float4 a_raw[];       // the row's activation, K floats (16-byte aligned for float4 reads)
  float4* a4_s = a_raw;
  __shared__ float partial_s[kWarps][kRows];
  __shared__ float squares_s[kWarps];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t row = blockIdx.y;
  const int k = static_cast<int>(p.k);
  const int vecs = k / 8;
  const int64_t n_out = kSwiglu ? p.n / 2 : p.n;

  // `split` warps per output column (a power of two dividing kWarps), each taking every split-th run of 32 vectors
  // of K; the warps of a column add up through shared memory.
  const int split = p.split;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * (kWarps / split) + warp / split;
  const int slice = warp % split;
  const int stride = 32 * split;
  const bool active = col < n_out;
  const uint4* w[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    w[r] = reinterpret_cast<const uint4*>(static_cast<const char*>(p.weight) +
                                          2 * (col + r * n_out) * p.weight_row_stride);
  }
  uint4 wv[kRows][kUnroll];
  auto load_round = [&](int base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * stride;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (active && i < vecs) wv[r][u] = __ldcs(w[r] + i);  // streamed: read once per call
      }
    }
  };
  // The weights do not depend on the prologue: their first round is in flight while it runs.
  int base = slice * 32 + lane;
  load_round(base);

  const uint4* x4 = reinterpret_cast<const uint4*>(static_cast<const char*>(p.x) + 2 * row * p.x_row_stride);
  if constexpr (kNorm) {
    // Prologue: the row's activation as float, normalized as the model rounds it; 16-byte loads, all in flight.
    float squares = 0.f;
#pragma unroll 2
    for (int v = tid; v < vecs; v += kThreads) {
      float f[8];
      unpack8<kHalf>(__ldg(x4 + v), f);
#pragma unroll
      for (int e = 0; e < 8; ++e) squares = fmaf(f[e], f[e], squares);
      a4_s[2 * v] = make_float4(f[0], f[1], f[2], f[3]);
      a4_s[2 * v + 1] = make_float4(f[4], f[5], f[6], f[7]);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, off);
    if (lane == 0) squares_s[warp] = squares;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total += squares_s[i];
    const float inv = rsqrtf(total / static_cast<float>(k) + p.eps);
    const uint4* nw4 = static_cast<const uint4*>(p.norm_weight);
#pragma unroll 2
    for (int v = tid; v < vecs; v += kThreads) {  // this thread's own vectors: no barrier needed before
      float g[8];
      unpack8<kHalf>(__ldg(nw4 + v), g);
      const float4 lo = a4_s[2 * v], hi = a4_s[2 * v + 1];
      float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = rounded<kHalf>(rounded<kHalf>(f[e] * inv) * g[e]);
      a4_s[2 * v] = make_float4(f[0], f[1], f[2], f[3]);
      a4_s[2 * v + 1] = make_float4(f[4], f[5], f[6], f[7]);
    }
    __syncthreads();
  }

  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  for (bool first = true; base < vecs; base += stride * kUnroll, first = false) {
    if (!first) load_round(base);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * stride;
      if (!active || i >= vecs) break;
      float af[8];
      if constexpr (kNorm) {
        const float4 lo = a4_s[2 * i], hi = a4_s[2 * i + 1];
        af[0] = lo.x, af[1] = lo.y, af[2] = lo.z, af[3] = lo.w, af[4] = hi.x, af[5] = hi.y, af[6] = hi.z, af[7] = hi.w;
      } else {
        unpack8<kHalf>(__ldg(x4 + i), af);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wf[8];
        unpack8<kHalf>(wv[r][u], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(af[e], wf[e], acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
    if (lane == 0) partial_s[warp][r] = acc[r];
  }
  __syncthreads();
  if (active && slice == 0 && lane == 0) {
    float y[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float sum = 0.f;
      for (int i = 0; i < split; ++i) sum += partial_s[warp + i][r];  // warp order: deterministic
      y[r] = rounded<kHalf>(sum);
    }
    float out = y[0];
    if constexpr (kSwiglu) out = rounded<kHalf>(silu_rounded<kHalf>(y[0]) * y[1]);
    if (p.residual != nullptr) out = load<kHalf>(p.residual, row * p.residual_row_stride + col) + out;
    store<kHalf>(p.out, row * n_out + col, out);
  }
}

// Warps per output column: enough warps over all columns to cover the memory latency (about 8192, as the few-row
// GEMV's dot_split in gemv.cu), while each warp keeps at least two rounds of 32 vectors of K.
int column_split(int64_t columns, int64_t rows, int64_t k) {
  const int64_t runs = (k / 8 + 31) / 32;
  int split = 1;
  while (split < kWarps && columns * rows * split < 8192 && runs >= 2 * split * 2) split *= 2;
  return split;
}

template <bool kHalf, bool kSwiglu>
void launch_typed(const Problem& p, dim3 grid, std::size_t smem, cudaStream_t s) {
  if (p.norm_weight != nullptr) fused_linear_kernel<kHalf, kSwiglu, true><<<grid, kThreads, smem, s>>>(p);
  else fused_linear_kernel<kHalf, kSwiglu, false><<<grid, kThreads, 0, s>>>(p);
}

}  // namespace

int launch(const Problem& problem, void* stream, int sm_count) {
  if (problem.rows == 0 || problem.n == 0) return 0;
  if (problem.k < 1 || problem.k > kMaxK || problem.k % 8 != 0 || problem.rows > 65535 ||
      (problem.swiglu && problem.n % 2 != 0) ||
      !(problem.split == 0 || problem.split == 1 || problem.split == 2 || problem.split == 4 || problem.split == 8)) {
    return cudaErrorInvalidValue;
  }
  Problem p = problem;
  const int64_t n_out = p.swiglu ? p.n / 2 : p.n;
  const std::size_t smem = static_cast<std::size_t>(p.k) * sizeof(float);
  auto blocks = [&](int split) { return (n_out + kWarps / split - 1) / (kWarps / split) * p.rows; };
  if (p.split == 0) p.split = column_split(p.n, p.rows, p.k);
  if (problem.split == 0 && p.norm_weight != nullptr) {
    // Staging blocks pay the prologue once per block: more blocks than fit the GPU at once would pay it again in
    // a second wave, after the first wave's loads (measured: q/k/v, 3072 columns, 1.5 waves, 9.6 us against
    // 5.8 us for the plain GEMV; 2026-12-04 16:25). So fewer warps per column until one wave holds them all.
    const int by_threads = 2048 / kThreads;
    const int by_smem = static_cast<int>((227 * 1024) / (smem + 1024));
    const int64_t resident = static_cast<int64_t>(sm_count) * std::max(1, std::min(by_threads, by_smem));
    while (p.split > 1 && blocks(p.split) > resident) p.split /= 2;
  }
  const int64_t columns = kWarps / p.split;
  const dim3 grid(static_cast<unsigned>((n_out + columns - 1) / columns), static_cast<unsigned>(p.rows));
  auto s = static_cast<cudaStream_t>(stream);
  if (p.fp16) {
    if (p.swiglu) launch_typed<true, true>(p, grid, smem, s);
    else launch_typed<true, false>(p, grid, smem, s);
  } else {
    if (p.swiglu) launch_typed<false, true>(p, grid, smem, s);
    else launch_typed<false, false>(p, grid, smem, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
