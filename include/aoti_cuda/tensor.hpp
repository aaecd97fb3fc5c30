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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/export.h"

namespace aoti_cuda {

namespace runtime {
struct TensorSlot;  // the library's own in-place access (reuses a Tensor's shape storage between calls)
}  // namespace runtime

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
  /// `data` may point to read-only memory (e.g. a const input buffer): the SDK
  /// never writes a tensor passed as an input (Module copies or borrows it
  /// read-only). Writing through data() or copy_from() into a tensor made from
  /// const memory is the caller's error, as with const_cast.
  static Tensor from_blob(const void* data, std::vector<int64_t> shape, DType dtype, Device device = Device::cpu(),
                          std::vector<int64_t> strides = {});

  /// Like from_blob above, but the memory is kept alive by `owner` (released
  /// when the last copy of the tensor is destroyed), e.g. a shared_ptr with a
  /// custom deleter. `owner` may be null (then the memory is borrowed).
  static Tensor from_blob(const void* data, std::vector<int64_t> shape, DType dtype, Device device,
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
  /// data() as T*, checked: T must be the C++ type of dtype() (see
  /// dtype_matches; std::uint16_t stands for the bits of float16/bfloat16),
  /// else Error(kInvalidArgument) naming both. nullptr for an undefined tensor.
  template <typename T>
  T* data_ptr() const {
    if (defined_ && !dtype_matches<T>(dtype_)) throw_dtype_mismatch(dtype_name(dtype_), type_label<T>());
    return static_cast<T*>(data_);
  }

  /// A new owned, contiguous host tensor holding a copy of `values`, of
  /// `shape` (empty: one dimension of values.size()). The dtype follows T
  /// (float -> kFloat32, double, int64_t, int32_t, int16_t, int8_t, uint8_t,
  /// bool). Error(kInvalidArgument) when shape's element count is not
  /// values.size().
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, std::vector<int64_t> shape = {});

  /// True when T is the element type of `dtype` (uint16_t: float16 or bfloat16 bits).
  template <typename T>
  static constexpr bool dtype_matches(DType dtype) noexcept;

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
  friend struct runtime::TensorSlot;
  template <typename T>
  static constexpr const char* type_label() noexcept;
  [[noreturn]] static void throw_dtype_mismatch(const char* dtype, const char* type);
  [[noreturn]] static void throw_size_mismatch(int64_t numel, std::size_t values);

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

template <typename T>
constexpr bool Tensor::dtype_matches(DType dtype) noexcept {
  if constexpr (std::is_same_v<T, float>) return dtype == DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return dtype == DType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype == DType::kInt64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype == DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int16_t>) return dtype == DType::kInt16;
  else if constexpr (std::is_same_v<T, std::int8_t>) return dtype == DType::kInt8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype == DType::kUInt8;
  else if constexpr (std::is_same_v<T, bool>) return dtype == DType::kBool;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
  else return false;
}

template <typename T>
constexpr const char* Tensor::type_label() noexcept {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64_t";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32_t";
  else if constexpr (std::is_same_v<T, std::int16_t>) return "int16_t";
  else if constexpr (std::is_same_v<T, std::int8_t>) return "int8_t";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8_t";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16_t";
  else return "an unsupported element type";
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, std::vector<int64_t> shape) {
  constexpr DType kDtype = std::is_same_v<T, float>          ? DType::kFloat32
                           : std::is_same_v<T, double>       ? DType::kFloat64
                           : std::is_same_v<T, std::int64_t> ? DType::kInt64
                           : std::is_same_v<T, std::int32_t> ? DType::kInt32
                           : std::is_same_v<T, std::int16_t> ? DType::kInt16
                           : std::is_same_v<T, std::int8_t>  ? DType::kInt8
                           : std::is_same_v<T, std::uint8_t> ? DType::kUInt8
                                                             : DType::kBool;
  static_assert(dtype_matches<T>(kDtype) && !std::is_same_v<T, std::uint16_t>,
                "from_vector: T must be float, double, int64_t, int32_t, int16_t, int8_t, uint8_t or bool");
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Tensor t = empty(std::move(shape), kDtype);
  if (t.numel() != static_cast<int64_t>(values.size())) throw_size_mismatch(t.numel(), values.size());
  std::copy(values.begin(), values.end(), static_cast<T*>(t.data_));  // element-wise: std::vector<bool> is packed
  return t;
}

}  // namespace aoti_cuda
