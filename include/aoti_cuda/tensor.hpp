// aoti_cuda — Tensor: the value type exchanged with Module.
//
// A Tensor is a reference to memory (host or CUDA) plus shape, strides (in
// elements, not bytes) and dtype. Copying a Tensor is cheap and the copies
// share the memory. Lifetime of that memory:
//   - empty() and to(): owned; freed when the last copy is destroyed.
//   - from_blob() without an owner: borrowed; the caller keeps the memory
//     alive (and at least as large as shape and strides address) for as long
//     as any copy of the Tensor, or any Module run reading it, uses it.
//   - from_blob() with an owner: the owner is released with the last copy.
//   - Module outputs: owned by the Tensor (see module.hpp).
//
// Errors: every throwing function throws aoti_cuda::Error — kInvalidArgument
// for unusable arguments (invalid dtype, negative or overflowing shape, wrong
// stride count, null data, negative device ordinal, dtype/shape mismatch,
// undefined tensor); kOutOfMemory when an allocation fails; kNoDevice when a
// CUDA call finds no usable GPU/driver (pinned host memory needs one too);
// kCuda for other CUDA failures.
//
// Thread-safety: a Tensor is thread-compatible, like std::shared_ptr: const
// member functions may be called concurrently, and copies of one Tensor may be
// used and destroyed on different threads; mutating one Tensor object
// (assignment, copy_from) needs external synchronization. Nothing synchronizes
// access to the shared element memory itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/export.h"

namespace aoti_cuda {

class AOTI_CUDA_API Tensor {
 public:
  /// An undefined tensor: defined() == false, numel() == 0, data() == nullptr.
  Tensor() = default;

  /// Allocates an uninitialized contiguous tensor. Host memory is 64-byte
  /// aligned; `pinned` host memory is page-locked (cudaMallocHost: faster
  /// transfers, needs a CUDA driver). CUDA memory comes from cudaMalloc on
  /// `device` (not from the shim's pool, so memory.hpp's statistics do not
  /// count it). `pinned` is ignored for CUDA devices.
  static Tensor empty(std::vector<int64_t> shape, DType dtype, Device device = Device::cpu(), bool pinned = false);

  /// Wraps memory the caller owns and keeps alive (borrowed). `data` is the
  /// address of element 0 on `device`; `strides` (in elements) empty means
  /// contiguous. Nothing is copied and the memory is not checked.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device = Device::cpu(),
                          std::vector<int64_t> strides = {});

  /// Like from_blob above, but the memory is kept alive by `owner` (released
  /// when the last copy of the tensor is destroyed), e.g. a shared_ptr with a
  /// custom deleter. `owner` may be null (then the memory is borrowed).
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                          std::shared_ptr<void> owner, std::vector<int64_t> strides = {});

  bool defined() const noexcept { return defined_; }
  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return device_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  const std::vector<int64_t>& strides() const noexcept { return strides_; }
  /// Number of dimensions (0 for a 0-d tensor).
  int64_t dim() const noexcept { return static_cast<int64_t>(shape_.size()); }
  /// Number of elements: the product of shape() (1 for 0-d, 0 when undefined).
  int64_t numel() const noexcept;
  /// numel() * element_size(dtype()): the bytes of the elements, not of the
  /// memory span a strided tensor covers.
  std::size_t nbytes() const noexcept;
  /// True when strides() are row-major for shape() (strides of dimensions of
  /// size 1 are ignored; an empty tensor is contiguous).
  bool is_contiguous() const noexcept;

  /// Address of element 0 (host or device memory, see device()).
  void* data() const noexcept { return data_; }
  /// data() as T*; T is not checked against dtype().
  template <typename T>
  T* data_ptr() const noexcept { return static_cast<T*>(data_); }

  /// Copies into a new owned, contiguous tensor on `device` (always a copy,
  /// even when already there; host results are pinned when `pinned`).
  /// `stream` (a cudaStream_t; null = the legacy default stream) orders the
  /// copy after work already queued on it; the call returns after the copy
  /// has completed.
  Tensor to(Device device, void* stream = nullptr, bool pinned = false) const;
  /// to(Device::cpu()).
  Tensor to_host() const { return to(Device::cpu()); }
  /// to(Device::cuda(index)).
  Tensor to_device(int index = 0) const { return to(Device::cuda(index)); }

  /// Copies the elements of `src` (same dtype and shape, else
  /// kInvalidArgument; any devices and strides) into this tensor's memory.
  /// `stream` as for to(); the copy has completed when the call returns.
  void copy_from(const Tensor& src, void* stream = nullptr);

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::cpu();
  bool defined_ = false;
};

/// Contiguous (row-major) strides, in elements, for a shape (dimensions of
/// size 0 count as 1, so the result is well-defined for empty tensors).
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

}  // namespace aoti_cuda
