// aoti_cuda shim — CUDA helper kernel of the extern GEMM shims (private; gemm_kernels.cu).
#pragma once

#include <cstdint>

#include "shim/ops/gemm.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {

/// dst[r][c] = src[r][c] for dst's extent (src.data is only read); src may broadcast (stride 0). Elements of 2 or 4
/// bytes. Enqueued on `stream` of the current device; returns the launch's cudaError_t.
int broadcast_2d(const Matrix& dst, const Matrix& src, int element_bytes, void* stream);

}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
