// aoti_cuda shim — the one kernel the extern GEMM shims need besides cuBLAS: writing addmm's
// broadcast bias (any strides, stride 0 included) into the output before the multiply adds to it.
#include <cuda_runtime.h>

#include <cstdint>

#include "shim/ops/gemm_kernels.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {
namespace {

template <typename T>
__global__ void broadcast_kernel(T* dst, int64_t dst_rs, int64_t dst_cs, const T* src, int64_t src_rs, int64_t src_cs,
                                 int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    dst[r * dst_rs + c * dst_cs] = src[r * src_rs + c * src_cs];
  }
}

}  // namespace

int broadcast_2d(const Matrix& dst, const Matrix& src, int element_bytes, void* stream) {
  const int64_t total = dst.rows * dst.cols;
  if (total == 0) return 0;
  constexpr int kThreads = 256;
  const int64_t wanted = (total + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (element_bytes) {
    case 2:
      broadcast_kernel<<<blocks, kThreads, 0, s>>>(static_cast<uint16_t*>(dst.data), dst.row_stride, dst.col_stride,
                                                   static_cast<const uint16_t*>(src.data), src.row_stride,
                                                   src.col_stride, dst.rows, dst.cols);
      break;
    case 4:
      broadcast_kernel<<<blocks, kThreads, 0, s>>>(static_cast<uint32_t*>(dst.data), dst.row_stride, dst.col_stride,
                                                   static_cast<const uint32_t*>(src.data), src.row_stride,
                                                   src.col_stride, dst.rows, dst.cols);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
