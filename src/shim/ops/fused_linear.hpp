// Private: the kernels behind aoti_torch_cuda_aoti_cuda_fused_linear and its int4 form
// aoti_torch_cuda_aoti_cuda_fused_linear_int4, the C shims of aoti_cuda::aoti_cuda_fused_linear(_int4)
// (tools/export/llm/fused_linear_op.py). fused_linear.cpp validates the operands, allocates the output and calls
// launch() / launch_int4().
//
// What they compute, per row r of x (rows = x's elements / its last dimension K), in x's dtype T (bf16 or fp16;
// int4: bf16), rounding where the model's unfused code rounds:
//   a = x[r]
//   norm_weight: a_k = T(T(a_k * rsqrt(mean(a^2) + eps)) * norm_weight_k)   (float32 sum of squares)
//   y_n = T(sum_k a_k weight[n, k])             (float32 sums; int4: the weight dequantized as _weight_int4pack_mm)
// By default (norm_after, bf16 and int4) the norm's scale moves past the sums, one rounding less per element:
//   a_k = T(a_k * norm_weight_k), y_n = T(rsqrt(mean(x[r]^2) + eps) * sum_k a_k weight[n, k])
//   swiglu:      y_n = T(T(silu(y_n)) * y_{n + N/2})  for n < N/2 (weight's rows: the gate's, then the up's)
//   residual:    y_n = T(residual[r, n] + y_n)
// So a decode step's RMSNorms, SwiGLU and residual adds need no kernels of their own.
//
// How: the weights stream as in the few-row kernels (gemv.cu: 16-byte loads, one to eight warps per output column;
// int4: weight_int4pack_gemv.cu's kernel, 16 output features per n-tile pair). Each block first issues its first
// weight loads (and its residual load), then stages its row(s) of a in shared memory while they are in flight (the
// prologue: the row is a few KB; read through L1, which the blocks of an SM share), then multiplies; the SwiGLU
// pairs a gate column with its up column in the same warp (int4: the same block), and the residual is added on
// store. The bf16 / fp16 kernel stages only to normalize (without a norm it reads the row next to the weights) and
// then caps its grid at one wave, each block taking every gridDim.x-th group of columns: a second wave's blocks
// would pay the prologue again after the first wave's loads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace fused_linear {

/// The most elements of a (K) the bf16 / fp16 kernel stages: the row and the norm weight, 47 KB of shared memory
/// (with the kernel's few static bytes, under the 48 KB a launch gets without opting in).
constexpr int64_t kMaxK = 12032;

struct Problem {
  const void* x = nullptr;         ///< [rows, K]: unit-stride rows x_row_stride apart, 16-byte aligned
  int64_t x_row_stride = 0;        ///< a multiple of 8 (every row stays 16-byte aligned)
  const void* norm_weight = nullptr;  ///< [K] contiguous, 16-byte aligned, or null
  float eps = 0;
  bool swiglu = false;             ///< N even: the output has N/2 columns
  const void* weight = nullptr;    ///< [N, K]: unit-stride rows weight_row_stride apart, 16-byte aligned
  int64_t weight_row_stride = 0;   ///< a multiple of 8
  const void* residual = nullptr;  ///< [rows, N or N/2], rows residual_row_stride apart, unit stride, or null
  int64_t residual_row_stride = 0;
  void* out = nullptr;             ///< [rows, N or N/2] contiguous
  int64_t rows = 0, n = 0, k = 0;
  bool fp16 = false;               ///< fp16 operands; bf16 otherwise
  /// Warps per output column: 0 lets launch() choose (what the shim passes); 1, 2, 4 or 8 forces it (benchmarks).
  int split = 0;
  /// No kernel writes weight (a program constant: shim::is_program_constant): with dependent launch the kernel then
  /// issues its first weight loads before it waits for the previous kernel (dependent_launch.hpp); x, norm_weight
  /// and residual are read after the wait either way.
  bool weights_early = false;
  /// With a norm weight and bf16 operands (ignored for fp16): the row is staged as T(a_k * norm_weight_k) in one
  /// pass and each output's float32 sum is multiplied by the row's rsqrt(mean(a^2) + eps) before it is rounded,
  /// instead of the model's two roundings per element after a pass that needs the whole row's sum of squares first.
  /// Results differ in the last bits; no barrier and no second pass before the multiply. (fp16 keeps the model's
  /// form: a_k * norm_weight_k unscaled may overflow it.) The shims set it from norm_after_enabled().
  bool norm_after = false;
};

/// AOTI_CUDA_NORM_AFTER (1, the default, or 0; kernel tuning only, docs/configuration.md; read once per process):
/// whether the shims ask both forms for Problem::norm_after / Int4Problem::norm_after.
bool norm_after_enabled();

/// Enqueues the call on `stream` (a cudaStream_t of the current device, whose multiprocessor count is `sm_count`).
/// Requires 1 <= k <= kMaxK, k % 8 == 0, rows <= 65535, n even with swiglu, split 0 or a power of two up to 8.
/// Returns the launch's cudaError_t (0 = success); rows or n 0 enqueue nothing.
int launch(const Problem& p, void* stream, int sm_count);

/// The int4 form: the weight as torchao's tile_packed_to_4d packs it (_weight_int4pack_mm's operands), x bf16.
struct Int4Problem {
  const void* x = nullptr;             ///< bf16 [rows, k_x], rows x_row_stride apart (a multiple of 8), 16-byte aligned
  int64_t x_row_stride = 0;
  int64_t k_x = 0;                     ///< x's K: a multiple of 8, at most k (the packing pads K with zeros)
  const void* norm_weight = nullptr;   ///< bf16 [k_x] contiguous, 16-byte aligned, or null
  float eps = 0;
  bool swiglu = false;                 ///< n a multiple of 32: the output has n/2 columns
  const void* qdata = nullptr;         ///< int32 [n_packed/8, k/(16*inner_k_tiles), 32, inner_k_tiles/2]
  const void* scale_and_zero = nullptr;  ///< bf16 [k/group, n_packed, 2]
  int64_t k = 0, n_packed = 0, group = 0;
  int inner_k_tiles = 8;               ///< 2, 4 or 8
  const void* residual = nullptr;      ///< bf16 [rows, n or n/2], rows residual_row_stride apart, or null
  int64_t residual_row_stride = 0;
  void* out = nullptr;                 ///< bf16 [rows, n or n/2] contiguous
  int64_t rows = 0;
  int64_t n = 0;                       ///< the weight's logical output features (<= n_packed)
  bool weights_early = false;          ///< as Problem::weights_early, for qdata and scale_and_zero
  bool norm_early = false;             ///< the same for norm_weight: its first loads go out before the wait
  bool small_blocks = false;           ///< without SwiGLU: blocks of at most 8 warps, not 16 (AOTI_CUDA_INT4_FUSED_WARPS)
  bool norm_after = false;             ///< as Problem::norm_after
};

/// Enqueues the int4 call on `stream` of the current device (weight_int4pack_gemv.cu). Returns the launch's
/// cudaError_t (0 = success; cudaErrorInvalidValue for a problem outside the contract above).
int launch_int4(const Int4Problem& p, void* stream);

}  // namespace fused_linear
}  // namespace shim
}  // namespace aoti_cuda
