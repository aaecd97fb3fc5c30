// aoti_cuda shim — matrix multiplies with few rows (private; kernels in gemv.cu).
//
// Why: an LLM's decode step multiplies one row of activations by every weight matrix. That is
// memory bound (each weight byte is used once), and cuBLAS, tuned for real GEMMs, reads the
// weights well below the GPU's bandwidth at one row. These kernels stream the weights with
// 16-byte loads, many in flight per warp, and keep the few activation rows in the cache.
//
// One layout of b (a·b with a: M x K, b: K x N, M <= kMaxRows), the one exported programs pass
// for linear layers: b's columns contiguous (b.row_stride == 1), i.e. a transposed nn.Linear
// weight (also the transposed key cache of q·K^T). One warp (or a few, splitting K) per output
// column: a dot product of a row of `a` with a column of `b`, both read as 16-byte vectors; warps
// then sum through shared memory. fp32 accumulation; c = alpha * a·b + beta * c (beta == 0: c is
// not read).
//
// At one row they match or beat cuBLAS; at four rows cuBLAS was faster, hence
// gemm::gemv_max_rows() defaults to 1 (docs/benchmarks/gemv.md). A second kernel for b's rows
// contiguous (p·V) was slower than cuBLAS at the LLM's shape and was removed.
#pragma once

#include <cstdint>

#include "shim/ops/gemm.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {
namespace gemv {

enum class Element { kFloat32, kFloat16, kBFloat16 };

/// The most rows of `a` these kernels take.
constexpr int kMaxRows = 8;

/// Which kernel (if any) handles c[i] = alpha * a[i]·b[i] + beta * c[i], i < count.
enum class Kernel { kNone, kDot };

/// kDot when the kernel takes these operands, else kNone: a has 1..kMaxRows rows; count <=
/// 65535; sizes below 2^31; a's rows and b's columns contiguous and 16-byte aligned at every row,
/// column and batch; K a multiple of 16 bytes' elements. c may have any strides.
Kernel pick(Element e, const Batch& a, const Batch& b, const Batch& c, int64_t count);

/// Enqueues the multiply with the kernel pick() chose (not kNone; checked) on `stream` of the
/// current device. Returns the launch's cudaError_t (0 = success).
int launch(Kernel kernel, Element e, const Batch& a, const Batch& b, const Batch& c, int64_t count, float alpha,
           float beta, void* stream);

}  // namespace gemv
}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
