// Private low layer: a device-to-device copy between two strided layouts of
// one shape, as one kernel on a stream.
//
// Why a kernel: a re-strided copy (a transposed output written into a
// caller's row-major tensor, an input re-laid out for the model) is not a
// 2-D memcpy, and going through host staging instead would allocate on the
// heap and synchronize the stream. The kernel takes its arguments by value:
// no allocation, nothing waited for (stream-ordered).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace aoti_cuda::common {

/// Most dimensions a strided device copy takes (after dropping size-1 dimensions and merging
/// dimensions that are contiguous in both layouts).
constexpr int kMaxStridedCopyDims = 8;

/// A copy's dimensions after planning, outermost first: size-1 dimensions dropped, and each
/// dimension merged into the one outside it where both layouts step over it contiguously.
struct StridedCopyPlan {
  int64_t sizes[kMaxStridedCopyDims] = {};
  int64_t dst_strides[kMaxStridedCopyDims] = {};
  int64_t src_strides[kMaxStridedCopyDims] = {};
  int ndim = 0;
  int64_t numel = 0;  ///< elements to copy (0: nothing)
};

/// Plans a copy of `sizes` (ndim dimensions) between the two layouts (strides in elements).
/// Returns 0, or cudaErrorInvalidValue when the kernel cannot express it (more than
/// kMaxStridedCopyDims dimensions after merging, a negative stride). Host code: no GPU needed.
int plan_strided_copy(const int64_t* dst_strides, const int64_t* src_strides, const int64_t* sizes, int ndim,
                      StridedCopyPlan& plan) noexcept;

/// Enqueues dst[i...] = src[i...] for every index of `sizes` (ndim dimensions, strides in
/// elements of `element_bytes` bytes: 1, 2, 4 or 8) on `stream`, for device memory (or
/// mapped page-locked host memory) of the current device. Source and destination must not
/// overlap. Returns 0 on success, cudaErrorInvalidValue when the copy is not expressible
/// (too many dimensions, an unsupported element size, a negative stride), else the launch's
/// cudaError_t. Nothing is allocated on the heap.
int launch_strided_copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                        const int64_t* sizes, int ndim, std::size_t element_bytes, cudaStream_t stream) noexcept;

}  // namespace aoti_cuda::common
