// The fused linear kernel; see fused_linear.hpp for what it computes and how.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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

template <bool kHalf>
__global__ void __launch_bounds__(kThreads) fused_linear_kernel(Problem p) {
  extern __shared__ float4 a_raw[];  // the row's activation, K floats (16-byte aligned for float4 reads)
  float* a_s = reinterpret_cast<float*>(a_raw);
  __shared__ float partial_s[kWarps];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t row = blockIdx.y;
  const int k = static_cast<int>(p.k);

  // Prologue: the row's activation, SwiGLU'd and normalized as the model rounds them.
  float squares = 0.f;
  for (int i = tid; i < k; i += kThreads) {
    float v = load<kHalf>(p.x, row * p.x_row_stride + i);
    if (p.swiglu) {
      const float silu = rounded<kHalf>(v / (1.f + expf(-v)));
      v = rounded<kHalf>(silu * load<kHalf>(p.x, row * p.x_row_stride + k + i));
    }
    a_s[i] = v;
    squares = fmaf(v, v, squares);
  }
  if (p.norm_weight != nullptr) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, off);
    if (lane == 0) partial_s[warp] = squares;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += partial_s[w];
    const float inv = rsqrtf(total / static_cast<float>(k) + p.eps);
    for (int i = tid; i < k; i += kThreads) {
      a_s[i] = rounded<kHalf>(rounded<kHalf>(a_s[i] * inv) * load<kHalf>(p.norm_weight, i));
    }
  }
  __syncthreads();

  // `split` warps per output column (a power of two dividing kWarps): 16-byte weight loads (8 elements) from
  // interleaved runs of K, the activation from shared memory; the warps of a column add up through shared memory.
  const int split = p.split;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * (kWarps / split) + warp / split;
  const int slice = warp % split;
  float acc = 0.f;
  if (col < p.n) {
    const uint4* w =
        reinterpret_cast<const uint4*>(static_cast<const char*>(p.weight) + 2 * col * p.weight_row_stride);
    const float4* a4 = reinterpret_cast<const float4*>(a_s);
    const int vecs = k / 8;
#pragma unroll 4
    for (int v = slice * 32 + lane; v < vecs; v += 32 * split) {
      float wf[8];
      unpack8<kHalf>(__ldcs(w + v), wf);  // streamed: read once per call
      const float4 lo = a4[2 * v], hi = a4[2 * v + 1];
      const float af[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(af[e], wf[e], acc);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) partial_s[warp] = acc;
  __syncthreads();
  if (col < p.n && slice == 0 && lane == 0) {
    float sum = 0.f;
    for (int i = 0; i < split; ++i) sum += partial_s[warp + i];  // warp order: deterministic
    float y = rounded<kHalf>(sum);
    if (p.residual != nullptr) y = load<kHalf>(p.residual, row * p.residual_row_stride + col) + y;
    store<kHalf>(p.out, row * p.n + col, y);
  }
}

// Warps per output column: enough warps over all columns to cover the memory latency (about 8192, as the few-row
// GEMV's dot_split in gemv.cu), while each warp keeps at least two rounds of 32 vectors of K.
int column_split(int64_t n, int64_t rows, int64_t k) {
  const int64_t runs = (k / 8 + 31) / 32;
  int split = 1;
  while (split < 4 && n * rows * split < 8192 && runs >= 2 * split * 2) split *= 2;
  return split;
}

}  // namespace

int launch(const Problem& problem, void* stream) {
  if (problem.rows == 0 || problem.n == 0) return 0;
  if (problem.k < 1 || problem.k > kMaxK || problem.k % 8 != 0 || problem.rows > 65535) return cudaErrorInvalidValue;
  Problem p = problem;
  p.split = column_split(p.n, p.rows, p.k);
  const int64_t columns = kWarps / p.split;
  const dim3 grid(static_cast<unsigned>((p.n + columns - 1) / columns), static_cast<unsigned>(p.rows));
  const std::size_t smem = static_cast<std::size_t>(p.k) * sizeof(float);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.fp16) fused_linear_kernel<true><<<grid, kThreads, smem, s>>>(p);
  else fused_linear_kernel<false><<<grid, kThreads, smem, s>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
