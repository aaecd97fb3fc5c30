// Test helpers for the shim C ABI: an owning handle wrapper and small builders.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"

namespace aoti_cuda_test {

/// The dtype and device codes of the shim ABI by name: PyTorch's ScalarType and DeviceType numbers, which the
/// aoti_torch_dtype_* / aoti_torch_device_type_* functions return. `using namespace aoti_cuda_test::codes;` in a test.
namespace codes {
constexpr int32_t kU8 = 0, kI8 = 1, kI32 = 3, kI64 = 4, kF16 = 5, kF32 = 6, kF64 = 7, kC64 = 9, kBool = 11, kBF16 = 15;
constexpr int32_t kCPU = 0, kCUDA = 1;
}  // namespace codes

/// Owns one AtenTensorHandle; deletes it (and checks the delete succeeded) on destruction.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  explicit OwnedTensor(AtenTensorHandle h) : h_(h) {}
  OwnedTensor(OwnedTensor&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  OwnedTensor& operator=(OwnedTensor&& o) noexcept {
    reset();
    h_ = o.h_;
    o.h_ = nullptr;
    return *this;
  }
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;
  ~OwnedTensor() { reset(); }

  void reset() {
    if (h_ != nullptr) {
      AOTITorchError rc = aoti_torch_delete_tensor_object(h_);
      CHECK_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
      h_ = nullptr;
    }
  }
  AtenTensorHandle get() const { return h_; }
  AtenTensorHandle* out() {
    reset();
    return &h_;
  }
  AtenTensorHandle release() {
    AtenTensorHandle h = h_;
    h_ = nullptr;
    return h;
  }

  std::vector<int64_t> sizes() const {
    int64_t dim = 0;
    int64_t* p = nullptr;
    REQUIRE(aoti_torch_get_dim(h_, &dim) == AOTI_TORCH_SUCCESS);
    REQUIRE(aoti_torch_get_sizes(h_, &p) == AOTI_TORCH_SUCCESS);
    return std::vector<int64_t>(p, p + dim);
  }
  std::vector<int64_t> strides() const {
    int64_t dim = 0;
    int64_t* p = nullptr;
    REQUIRE(aoti_torch_get_dim(h_, &dim) == AOTI_TORCH_SUCCESS);
    REQUIRE(aoti_torch_get_strides(h_, &p) == AOTI_TORCH_SUCCESS);
    return std::vector<int64_t>(p, p + dim);
  }
  int64_t offset() const {
    int64_t o = -1;
    REQUIRE(aoti_torch_get_storage_offset(h_, &o) == AOTI_TORCH_SUCCESS);
    return o;
  }
  void* data() const {
    void* p = nullptr;
    REQUIRE(aoti_torch_get_data_ptr(h_, &p) == AOTI_TORCH_SUCCESS);
    return p;
  }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

 private:
  AtenTensorHandle h_ = nullptr;
};

/// empty_strided that must succeed.
inline OwnedTensor empty(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int32_t dtype,
                         int32_t device_type = 0, int32_t device_index = 0) {
  OwnedTensor t;
  AOTITorchError rc = aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(),
                                               strides.empty() ? nullptr : strides.data(), dtype, device_type,
                                               device_index, t.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  return t;
}

/// Contiguous CPU float32 tensor holding 0, 1, 2, ... (as floats).
inline OwnedTensor iota_f32(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides = {}) {
  OwnedTensor t = empty(sizes, strides, aoti_torch_dtype_float32());
  int64_t storage = 0;
  REQUIRE(aoti_torch_get_storage_size(t.get(), &storage) == AOTI_TORCH_SUCCESS);
  auto* p = static_cast<float*>(t.data());
  for (int64_t i = 0; i < storage / 4; ++i) p[i] = static_cast<float>(i);
  return t;
}

/// True when the last shim error on this thread contains `needle`.
inline bool last_error_contains(const std::string& needle) {
  return std::string(aoti_cuda_shim_last_error()).find(needle) != std::string::npos;
}

/// `call(&out)` (a call of the shim named `shim`) fails, resets out, leaves no handle behind, and its message
/// names the shim and holds `needle`.
template <class Call>
void expect_refused(const char* shim, Call call, const std::string& needle) {
  aoti_cuda_shim_clear_error();
  const int64_t live = aoti_cuda_shim_live_handles();
  AtenTensorHandle out = reinterpret_cast<AtenTensorHandle>(0x1);
  CHECK(call(&out) == AOTI_TORCH_FAILURE);
  CHECK(out == nullptr);
  CHECK(aoti_cuda_shim_live_handles() == live);
  INFO("message: " << aoti_cuda_shim_last_error());
  CHECK(last_error_contains(std::string(shim) + ": "));
  CHECK(last_error_contains(needle));
}

}  // namespace aoti_cuda_test
