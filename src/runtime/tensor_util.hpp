// Private tensor helpers shared by Tensor and Module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda::runtime {

/// Product of `shape`, or throws Error(kInvalidArgument) naming `what` when a
/// dimension is negative or the element count / byte size overflows.
int64_t checked_numel(const std::vector<int64_t>& shape, std::size_t element_size, const char* what);

/// Strides (in elements) of a dense tensor of `sizes` stored in `dim_order`
/// (outermost first). An empty or invalid dim_order means contiguous.
std::vector<int64_t> strides_for_dim_order(const std::vector<int64_t>& sizes, const std::vector<std::uint8_t>& dim_order);

/// True when `strides` equal `want` for every dimension of size > 1.
bool same_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& want);

/// In-place changes to a Tensor that keep the capacity of its shape and
/// strides, so the value table of a call slot, reused call after call, holds
/// the call's tensors without allocating.
struct TensorSlot {
  /// Undefined again (memory released), capacity kept.
  static void reset(Tensor& t) noexcept;
  /// `t` becomes a view of `data` (ndim sizes and strides, already validated
  /// by the shim that made them) owned by `owner`.
  static void assign(Tensor& t, void* data, int64_t ndim, const int64_t* sizes, const int64_t* strides, DType dtype,
                     Device device, std::shared_ptr<void> owner);
};

/// True when (shape, strides) is dense row-major (contiguous), ignoring the
/// strides of size-1 dimensions; any empty tensor is. Allocates nothing.
bool row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) noexcept;

/// Enqueues a copy of `src` into `dst` (same shape and dtype, any strides, both on one CUDA
/// device) on `stream` as one strided-copy kernel: no heap allocation, no synchronization.
/// Returns false, having done nothing, when the tensors are not such a pair (host memory,
/// two devices, another dtype or shape, too many dimensions, a negative stride); the caller
/// then copies another way (Tensor::copy_from). Throws Error on a launch failure.
bool enqueue_device_copy(const Tensor& dst, const Tensor& src, void* stream);

/// "[2, 3, 4]"
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace aoti_cuda::runtime
