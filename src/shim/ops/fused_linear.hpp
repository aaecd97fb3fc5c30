// Private: the kernel behind aoti_torch_cuda_aoti_cuda_fused_linear (work in progress: not yet run on a GPU),
// the C shim of aoti_cuda::aoti_cuda_fused_linear (tools/export/llm/fused_linear_op.py). fused_linear.cpp
// validates the operands, allocates the output and calls launch().
//
// What it computes, per row r of x (rows = x's elements / its last dimension), in x's dtype T (bf16 or fp16),
// rounding where the model's unfused code rounds:
//   a = x[r]                                    (width K, or 2K with swiglu)
//   swiglu:      a_k = T(T(silu(a_k)) * a_{K+k})  for k < K (gate, then up)
//   norm_weight: a_k = T(T(a_k * rsqrt(mean(a^2) + eps)) * norm_weight_k)   (float32 sum of squares)
//   y_n = T(sum_k a_k weight[n, k])             (float32 sums)
//   residual:    y_n = T(residual[r, n] + y_n)
// How: one block per (group of output columns, row). Each block first stages its row's a in shared memory as
// float (the prologue: the row is at most a few KB and sits in L2 after the first block reads it), then its warps
// stream their columns of weight with 16-byte loads, one to four warps per column as the few-row GEMV splits them
// (gemv.cu), and the column's first warp adds the residual while storing. So a decode step's RMSNorm, SwiGLU and residual adds need no kernels of their own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace fused_linear {

/// The most elements of a (K) a block stages: 47 KB of float32 shared memory (with the kernel's few static
/// bytes, under the 48 KB a launch gets without opting in).
constexpr int64_t kMaxK = 12032;

struct Problem {
  const void* x = nullptr;         ///< [rows, K] (or [rows, 2K] with swiglu), rows x_row_stride apart, unit stride
  int64_t x_row_stride = 0;
  const void* norm_weight = nullptr;  ///< [K] contiguous, or null
  float eps = 0;
  bool swiglu = false;
  const void* weight = nullptr;    ///< [N, K], rows weight_row_stride apart (a multiple of 8), unit stride, 16-byte aligned
  int64_t weight_row_stride = 0;
  const void* residual = nullptr;  ///< [rows, N], rows residual_row_stride apart, unit stride, or null
  int64_t residual_row_stride = 0;
  void* out = nullptr;             ///< [rows, N] contiguous
  int64_t rows = 0, n = 0, k = 0;
  bool fp16 = false;               ///< fp16 operands; bf16 otherwise
  int split = 1;                   ///< warps per output column (launch() sets it)
};

/// Enqueues the call on `stream` (a cudaStream_t of the current device). Requires 1 <= k <= kMaxK, k % 8 == 0,
/// rows <= 65535. Returns the launch's cudaError_t (0 = success); rows or n 0 enqueue nothing.
int launch(const Problem& p, void* stream);

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
