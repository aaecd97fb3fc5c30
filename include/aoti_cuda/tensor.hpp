// aoti_cuda — Tensor: the value type exchanged with Module.
//
// A Tensor is a reference to memory (host or CUDA) plus shape, strides (in
// elements) and dtype. Copies of a Tensor share the memory; the memory lives as
// long as any copy does (owning tensors) or as long as the caller keeps it
// alive (borrowed tensors from from_blob without an owner).
//
// Thread-compatibility: distinct Tensor objects may be used from different
// threads; the shared memory itself is not synchronized.
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
  /// An undefined tensor (defined() == false).
  Tensor() = default;

  /// Allocates an uninitialized contiguous tensor. Host memory is 64-byte
  /// aligned; `pinned` host memory is page-locked (faster transfers). CUDA
  /// memory comes from cudaMalloc on `device`.
  static Tensor empty(std::vector<int64_t> shape, DType dtype, Device device = Device::cpu(), bool pinned = false);

  /// Wraps memory the caller owns and keeps alive (borrowed). `strides` empty
  /// means contiguous.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device = Device::cpu(),
                          std::vector<int64_t> strides = {});

  /// Wraps memory kept alive by `owner` (released when the last copy of the
  /// tensor is destroyed), e.g. a shared_ptr with a custom deleter.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                          std::shared_ptr<void> owner, std::vector<int64_t> strides = {});

  bool defined() const noexcept { return defined_; }
  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return device_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  const std::vector<int64_t>& strides() const noexcept { return strides_; }
  int64_t dim() const noexcept { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const noexcept;
  /// numel() * element_size(dtype()).
  std::size_t nbytes() const noexcept;
  bool is_contiguous() const noexcept;

  void* data() const noexcept { return data_; }
  template <typename T>
  T* data_ptr() const noexcept { return static_cast<T*>(data_); }

  /// Copies into a new contiguous tensor on `device` (host results are
  /// pinned when `pinned`). `stream` (a cudaStream_t, may be null) orders the
  /// copy; the call returns after the copy has completed.
  Tensor to(Device device, void* stream = nullptr, bool pinned = false) const;
  Tensor to_host() const { return to(Device::cpu()); }
  Tensor to_device(int index = 0) const { return to(Device::cuda(index)); }

  /// Copies the elements of `src` (same dtype and shape, any devices and
  /// strides) into this tensor, completing before return.
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

/// Contiguous (row-major) strides for a shape.
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
