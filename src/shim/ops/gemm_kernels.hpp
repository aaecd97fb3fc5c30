// aoti_cuda shim — CUDA helper kernel of the extern GEMM shims (private; gemm_kernels.cu).
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace gemm {

/// A strided 2-D region of device memory (element strides).
struct Strided2d {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

/// dst[r][c] = src[r][c] for dst's extent; src may broadcast (stride 0). Elements of 2 or 4
/// bytes. Enqueued on `stream` of the current device; returns the launch's cudaError_t.
int broadcast_2d(const Strided2d& dst, const Strided2d& src, int element_bytes, void* stream);

}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
