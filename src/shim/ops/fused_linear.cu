// The fused linear kernel; see fused_linear.hpp for what it computes and how.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "common/env.hpp"
#include "shim/ops/dependent_launch.hpp"
#include "shim/ops/fused_linear.hpp"
#include "shim/ops/ptx.cuh"

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

// 8 floats, each already representable in the dtype, as a 16-byte vector.
template <bool kHalf>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kHalf) {
      const __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    } else {
      w[i] = (__float_as_uint(f[2 * i]) >> 16) | (__float_as_uint(f[2 * i + 1]) & 0xffff0000u);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The silu of an already rounded value, rounded (PyTorch's silu: x / (1 + exp(-x)) in float32).
template <bool kHalf>
__device__ __forceinline__ float silu_rounded(float v) {
  return rounded<kHalf>(v / (1.f + expf(-v)));
}

constexpr int kUnroll = 4;  // 16-byte weight loads in flight per thread and weight row, as the few-row GEMV

// The row's 1/rms from the warps' partial sums of squares (stage_normalized_row), added in warp order.
__device__ __forceinline__ float row_inv(const Problem& p, int vecs, const float* squares_s) {
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total += squares_s[i];
  return rsqrtf(total / static_cast<float>(8 * vecs) + p.eps);
}

// The kernel's prologue with a norm, run while the block's first weight loads are in flight (issued before them,
// its copies made q/k/v 6.18 -> 6.69 us, 2026-12-04 18:49): the row x4 and the norm weight copied together into
// `staged` (vecs = K/8 16-byte vectors each), then, on this thread's own copies (visible to it after the wait):
// - as the model rounds: the sum of squares, a barrier, then a_k = T(T(a_k * inv) * g_k) in place of the row;
// - p.norm_after (bf16): a_k = T(a_k * g_k) in the same pass as the sum of squares; each warp's partial sum goes to
//   squares_s and the epilogue multiplies the column's sums by row_inv() (fused_linear.hpp, Problem::norm_after).
// Ends with a barrier.
template <bool kHalf>
__device__ __forceinline__ void stage_normalized_row(const Problem& p, int vecs, const uint4* x4, uint4* staged,
                                                     float* squares_s) {
  const int tid = threadIdx.x;
  const uint4* nw4 = static_cast<const uint4*>(p.norm_weight);
  for (int v = tid; v < vecs; v += kThreads) {
    ptx::cp_async16_l1(ptx::shared_address(staged + v), x4 + v, 16);
    ptx::cp_async16_l1(ptx::shared_address(staged + vecs + v), nw4 + v, 16);
  }
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
  const bool one_pass = !kHalf && p.norm_after;
  float squares = 0.f;
  for (int v = tid; v < vecs; v += kThreads) {
    float f[8];
    unpack8<kHalf>(staged[v], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) squares = fmaf(f[e], f[e], squares);
    if (one_pass) {
      float g[8];
      unpack8<kHalf>(staged[vecs + v], g);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = rounded<kHalf>(f[e] * g[e]);
      staged[v] = pack8<kHalf>(f);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, off);
  if (tid % 32 == 0) squares_s[tid / 32] = squares;
  __syncthreads();
  if (one_pass) return;
  const float inv = row_inv(p, vecs, squares_s);
  for (int v = tid; v < vecs; v += kThreads) {
    float f[8], g[8];
    unpack8<kHalf>(staged[v], f);
    unpack8<kHalf>(staged[vecs + v], g);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = rounded<kHalf>(rounded<kHalf>(f[e] * inv) * g[e]);
    staged[v] = pack8<kHalf>(f);
  }
  __syncthreads();
}

// Block b computes output columns [b * C, b * C + C) (C = kWarps / split), then those gridDim.x groups further on, so
// a grid capped at one wave stages each row once per block (launch()).
// kSwiglu: each output column c streams weight rows c (gate) and c + n/2 (up) and stores their SwiGLU.
// kNorm (p.norm_weight set): a prologue stages the RMS-normalized row in shared memory, in the dtype (each element
// is rounded to it anyway), while the first weight loads are in flight. Without a norm
// the row is read straight from global memory next to the weights, as the few-row GEMV reads it (measured: staging
// a row that needs no normalization made the 5632-wide down projection ~1.5 us slower, 2026-12-04 16:25).
template <bool kHalf, bool kSwiglu, bool kNorm>
__global__ void __launch_bounds__(kThreads) fused_linear_kernel(Problem p) {
  constexpr int kRows = kSwiglu ? 2 : 1;  // weight rows per output column
  extern __shared__ uint4 staged_s[];     // kNorm: the row (vecs vectors, normalized in place), then the norm weight
  __shared__ float partial_s[kWarps][kRows];
  __shared__ float squares_s[kWarps];     // kNorm: the warps' partial sums of squares of the row
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.y;
  const int vecs = static_cast<int>(p.k / 8);
  const int64_t n_out = kSwiglu ? p.n / 2 : p.n;
  const uint4* x4 = reinterpret_cast<const uint4*>(static_cast<const char*>(p.x) + 2 * row * p.x_row_stride);

  // `split` warps per output column (a power of two dividing kWarps), each taking every split-th run of 32 vectors
  // of K; the warps of a column add up through shared memory.
  const int split = p.split;
  const int columns = kWarps / split;
  const int64_t groups = (n_out + columns - 1) / columns;
  const int slice = warp % split;
  const int stride = 32 * split;
  int64_t col = 0;
  bool active = false;
  const uint4* w[kRows];
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
  // Points w at group g's column for this warp and issues its first round of weight loads (load_residual: the
  // residual of that column).
  float residual = 0.f;
  auto start_weights = [&](int64_t g) {
    col = g * columns + warp / split;
    active = col < n_out;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      w[r] = reinterpret_cast<const uint4*>(static_cast<const char*>(p.weight) +
                                            2 * (col + r * n_out) * p.weight_row_stride);
    }
    load_round(slice * 32 + lane);
  };
  auto load_residual = [&] {
    if (p.residual != nullptr && active && slice == 0 && lane == 0) {
      residual = load<kHalf>(p.residual, row * p.residual_row_stride + col);
    }
  };
  // Launched with programmatic dependent launch (dependent_launch.hpp): the first weight loads go out before the
  // wait only when no kernel writes the weights (weights_early); x, the norm weight and the residual always after it.
  if (!p.weights_early) pdl::wait_for_predecessor();
  start_weights(blockIdx.x);
  if (p.weights_early) pdl::wait_for_predecessor();
  load_residual();

  if constexpr (kNorm) stage_normalized_row<kHalf>(p, vecs, x4, staged_s, squares_s);
  const bool scale_sums = kNorm && !kHalf && p.norm_after;

  for (int64_t group = blockIdx.x;;) {
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int base = slice * 32 + lane, first = 1; base < vecs; base += stride * kUnroll, first = 0) {
      if (!first) load_round(base);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * stride;
        if (!active || i >= vecs) break;
        float af[8];
        unpack8<kHalf>(kNorm ? staged_s[i] : __ldg(x4 + i), af);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float wf[8];
          unpack8<kHalf>(wv[r][u], wf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r] = fmaf(af[e], wf[e], acc[r]);
        }
      }
    }
    // The block's (first group's) weights are read: the next kernel may start its launch (dependent_launch.hpp).
    if (group == blockIdx.x) pdl::allow_dependents();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
      if (lane == 0) partial_s[warp][r] = acc[r];
    }
    __syncthreads();
    if (active && slice == 0 && lane == 0) {
      float y[kRows];
      const float inv = scale_sums ? row_inv(p, vecs, squares_s) : 1.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float sum = 0.f;
        for (int i = 0; i < split; ++i) sum += partial_s[warp + i][r];  // warp order: deterministic
        y[r] = rounded<kHalf>(scale_sums ? sum * inv : sum);
      }
      float out = y[0];
      if constexpr (kSwiglu) out = rounded<kHalf>(silu_rounded<kHalf>(y[0]) * y[1]);
      if (p.residual != nullptr) out = residual + out;
      store<kHalf>(p.out, row * n_out + col, out);
    }
    group += gridDim.x;
    if (!kNorm || group >= groups) break;  // without a norm the grid covers every group (launch())
    __syncthreads();  // partial_s is read above before the next group writes it
    start_weights(group);
    load_residual();
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

// How many blocks of `kernel` (kThreads each, `smem` bytes of dynamic shared memory) an SM of the current device
// holds. The occupancy query costs microseconds and a launch is on eager decode's per-call path, so the answer for
// the last (device, smem) asked is kept in `cache`, one per kernel: (device << 32 | smem << 8 | blocks).
cudaError_t blocks_per_sm(std::atomic<uint64_t>& cache, const void* kernel, std::size_t smem, int* blocks) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t key = static_cast<uint64_t>(device) << 32 | static_cast<uint64_t>(smem) << 8;  // smem < 2^24
  const uint64_t cached = cache.load(std::memory_order_relaxed);
  if ((cached & ~uint64_t{0xff}) == key) {
    *blocks = static_cast<int>(cached & 0xff);
    return cudaSuccess;
  }
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, kThreads, smem);
  if (err == cudaSuccess) cache.store(key | static_cast<uint64_t>(std::min(*blocks, 255)), std::memory_order_relaxed);
  return err;
}

template <bool kHalf, bool kSwiglu, bool kNorm>
cudaError_t launch_kernel(Problem p, int64_t n_out, int sm_count, cudaStream_t s) {
  auto* kernel = fused_linear_kernel<kHalf, kSwiglu, kNorm>;
  // With a norm: the row and the norm weight as 16-byte vectors (<= 48 KB for K <= kMaxK).
  const std::size_t smem = kNorm ? static_cast<std::size_t>(p.k) * 4 : 0;
  if (p.split == 0) p.split = kNorm ? 1 : column_split(p.n, p.rows, p.k);
  const int64_t columns = kWarps / p.split;
  int64_t groups = (n_out + columns - 1) / columns;
  if constexpr (kNorm) {
    // Each block pays the prologue once, so the grid is capped at what the GPU holds at once and a block takes
    // every gridDim.x-th group of columns: the blocks of a second wave would pay it again after the first wave's
    // loads. Measured on q/k/v (3072 columns, 2026-12-04 18:42): 8 columns a block, 384 blocks, one wave: 6.16 us
    // (plain GEMV 5.81); 4 columns a block, 768 blocks, 1.5 waves: 8.83 us. Likewise one warp per column: the
    // most columns per staged row.
    static std::atomic<uint64_t> occupancy{~uint64_t{0}};  // no device has index 2^32 - 1: empty
    int per_sm = 0;
    const cudaError_t err = blocks_per_sm(occupancy, reinterpret_cast<const void*>(kernel), smem, &per_sm);
    if (err != cudaSuccess) return err;
    const int64_t resident = static_cast<int64_t>(std::max(1, per_sm)) * std::max(1, sm_count);
    groups = std::min(groups, std::max<int64_t>(1, resident / p.rows));
  }
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(p.rows));
  return pdl::launch(kernel, grid, dim3(kThreads), smem, s, p);
}

template <bool kHalf, bool kSwiglu>
cudaError_t launch_typed(const Problem& p, int64_t n_out, int sm_count, cudaStream_t s) {
  return p.norm_weight != nullptr ? launch_kernel<kHalf, kSwiglu, true>(p, n_out, sm_count, s)
                                  : launch_kernel<kHalf, kSwiglu, false>(p, n_out, sm_count, s);
}

}  // namespace

bool norm_after_enabled() {
  static const bool enabled = env_integer_or_warn("AOTI_CUDA_NORM_AFTER", 0, 1).value_or(1) == 1;
  return enabled;
}

int launch(const Problem& p, void* stream, int sm_count) {
  if (p.rows == 0 || p.n == 0) return 0;
  if (p.k < 1 || p.k > kMaxK || p.k % 8 != 0 || p.rows > 65535 || (p.swiglu && p.n % 2 != 0) ||
      !(p.split == 0 || p.split == 1 || p.split == 2 || p.split == 4 || p.split == 8)) {
    return cudaErrorInvalidValue;
  }
  const int64_t n_out = p.swiglu ? p.n / 2 : p.n;
  auto s = static_cast<cudaStream_t>(stream);
  if (p.fp16) {
    return p.swiglu ? launch_typed<true, true>(p, n_out, sm_count, s)
                    : launch_typed<true, false>(p, n_out, sm_count, s);
  }
  return p.swiglu ? launch_typed<false, true>(p, n_out, sm_count, s)
                  : launch_typed<false, false>(p, n_out, sm_count, s);
}

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
