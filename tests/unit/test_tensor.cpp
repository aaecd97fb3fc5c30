// aoti_cuda::Tensor on the host (and its errors where there is no GPU).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/tensor.hpp"
#include "support/gpu.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::Tensor;

namespace {
template <typename Fn>
ErrorCode error_code(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return static_cast<ErrorCode>(0);
}
}  // namespace

TEST_CASE("tensor: empty host tensors are aligned, contiguous and sized") {
  Tensor undefined;
  CHECK_FALSE(undefined.defined());
  CHECK(undefined.numel() == 0);  // not 1 like a 0-d tensor: there is no element
  CHECK(undefined.nbytes() == 0);
  Tensor t = Tensor::empty({2, 3, 5}, DType::kBFloat16);
  CHECK(t.defined());
  CHECK(t.device().is_cpu());
  CHECK(t.numel() == 30);
  CHECK(t.nbytes() == 60);
  CHECK(t.dim() == 3);
  CHECK(t.strides() == std::vector<int64_t>{15, 5, 1});
  CHECK(t.is_contiguous());
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  Tensor scalar = Tensor::empty({}, DType::kInt64);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.nbytes() == 8);
  Tensor zero = Tensor::empty({4, 0}, DType::kFloat32);
  CHECK(zero.numel() == 0);
  CHECK(zero.nbytes() == 0);
  CHECK(zero.is_contiguous());
}

TEST_CASE("tensor: bad shapes, dtypes and blobs are rejected") {
  CHECK(error_code([] { Tensor::empty({2, -1}, DType::kFloat32); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([] { Tensor::empty({INT64_MAX, 4}, DType::kFloat32); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([] { Tensor::empty({2}, static_cast<DType>(99)); }) == ErrorCode::kInvalidArgument);
  float x[4] = {};
  CHECK(error_code([&] { Tensor::from_blob(x, {2, 2}, DType::kFloat32, Device::cpu(), {1}); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([&] { Tensor::from_blob(nullptr, {2, 2}, DType::kFloat32); }) == ErrorCode::kInvalidArgument);
  CHECK_NOTHROW(Tensor::from_blob(nullptr, {0, 2}, DType::kFloat32));
}

TEST_CASE("tensor: from_blob borrows or keeps an owner alive") {
  float data[6] = {0, 1, 2, 3, 4, 5};
  Tensor b = Tensor::from_blob(data, {2, 3}, DType::kFloat32);
  CHECK(b.data() == data);
  CHECK(b.is_contiguous());
  int released = 0;
  {
    auto* heap = new float[4]{1, 2, 3, 4};
    std::shared_ptr<void> owner(heap, [&released](void* p) { delete[] static_cast<float*>(p); ++released; });
    Tensor o = Tensor::from_blob(heap, {4}, DType::kFloat32, Device::cpu(), owner);
    owner.reset();
    Tensor copy = o;  // copies share the memory
    CHECK(released == 0);
    CHECK(copy.data_ptr<float>()[3] == 4.0f);
  }
  CHECK(released == 1);
}

TEST_CASE("tensor: layouts: size-1 dims ignore strides, transposes are not contiguous") {
  float d[6];
  CHECK(Tensor::from_blob(d, {1, 6}, DType::kFloat32, Device::cpu(), {99, 1}).is_contiguous());
  CHECK_FALSE(Tensor::from_blob(d, {3, 2}, DType::kFloat32, Device::cpu(), {1, 3}).is_contiguous());
  CHECK(aoti_cuda::contiguous_strides({2, 0, 3}) == std::vector<int64_t>{3, 3, 1});
}

TEST_CASE("tensor: host copies, contiguous and strided, and to()") {
  std::vector<int32_t> src(12);
  for (int i = 0; i < 12; ++i) src[i] = i;
  // [3,4] row-major viewed transposed as [4,3].
  Tensor t = Tensor::from_blob(src.data(), {4, 3}, DType::kInt32, Device::cpu(), {1, 4});
  Tensor c = t.to_host();
  REQUIRE(c.is_contiguous());
  const int32_t* p = c.data_ptr<int32_t>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(p[i * 3 + j] == j * 4 + i);
  // Copy a contiguous tensor into a strided destination (every other element).
  std::vector<int32_t> dst(8, -1);
  Tensor d = Tensor::from_blob(dst.data(), {4}, DType::kInt32, Device::cpu(), {2});
  int32_t vals[4] = {10, 11, 12, 13};
  d.copy_from(Tensor::from_blob(vals, {4}, DType::kInt32));
  CHECK(dst == std::vector<int32_t>{10, -1, 11, -1, 12, -1, 13, -1});
  // 0-d and empty copies.
  int64_t one = 7, other = 0;
  Tensor::from_blob(&other, {}, DType::kInt64).copy_from(Tensor::from_blob(&one, {}, DType::kInt64));
  CHECK(other == 7);
  CHECK_NOTHROW(Tensor::empty({0, 3}, DType::kFloat32).copy_from(Tensor::empty({0, 3}, DType::kFloat32)));
}

TEST_CASE("tensor: copy_from checks dtype and shape") {
  Tensor a = Tensor::empty({2, 2}, DType::kFloat32);
  CHECK(error_code([&] { a.copy_from(Tensor::empty({2, 2}, DType::kInt32)); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([&] { a.copy_from(Tensor::empty({4}, DType::kFloat32)); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([&] { a.copy_from(Tensor()); }) == ErrorCode::kInvalidArgument);
  CHECK(error_code([&] { Tensor().to_host(); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("tensor: CUDA and pinned memory without a GPU fail with kNoDevice") {
  if (aoti_cuda_test::gpu_available()) {
    // With a GPU these paths are covered by the GPU suite; here only check they work.
    Tensor d = Tensor::empty({4}, DType::kFloat32, Device::cuda(0));
    CHECK(d.device().is_cuda());
    return;
  }
  CHECK(error_code([] { Tensor::empty({4}, DType::kFloat32, Device::cuda(0)); }) == ErrorCode::kNoDevice);
  CHECK(error_code([] { Tensor::empty({4}, DType::kFloat32, Device::cpu(), /*pinned=*/true); }) == ErrorCode::kNoDevice);
  CHECK(error_code([] { Tensor::empty({4}, DType::kFloat32).to_device(0); }) == ErrorCode::kNoDevice);
  try {
    Tensor::empty({4}, DType::kFloat32, Device::cuda(0));
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("cuda") != std::string::npos);
  }
}
