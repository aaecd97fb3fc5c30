// Public .npy I/O (aoti_cuda/npy.hpp) and Tensor's typed helpers
// (from_vector<T>, checked data_ptr<T>).
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/npy.hpp"
#include "aoti_cuda/tensor.hpp"
#include "support/test_util.hpp"

using aoti_cuda::DType;
using aoti_cuda::ErrorCode;
using aoti_cuda::Tensor;

namespace {

std::string temp(const std::string& name) { return std::string(AOTI_CUDA_BINARY_DIR) + "/npy_" + name; }

std::vector<std::uint8_t> bytes_of(const std::string& text) { return std::vector<std::uint8_t>(text.begin(), text.end()); }

// A version-1 .npy image with `header` (padded by the caller or not) and `data`.
std::vector<std::uint8_t> npy_image(const std::string& header, const std::string& data, int version = 1) {
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  if (version == 1) {
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
  } else {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return bytes_of(out + header + data);
}

ErrorCode parse_error(const std::vector<std::uint8_t>& b) {
  return aoti_cuda_test::expect_error([&] { aoti_cuda::parse_npy({b.data(), b.size()}, "x.npy"); }).code();
}

}  // namespace

TEST_CASE("from_vector: dtype from T, shape checked, std::vector<bool> unpacked") {
  const Tensor f = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(f.dtype() == DType::kFloat32);
  CHECK(f.shape() == std::vector<int64_t>{2, 3});
  CHECK(f.data_ptr<float>()[5] == 6.0f);
  CHECK(Tensor::from_vector(std::vector<int64_t>{7, 8}).shape() == std::vector<int64_t>{2});
  const Tensor b = Tensor::from_vector(std::vector<bool>{true, false, true});
  CHECK(b.dtype() == DType::kBool);
  CHECK(b.data_ptr<bool>()[2]);
  CHECK_FALSE(b.data_ptr<bool>()[1]);
  const aoti_cuda::Error e = aoti_cuda_test::expect_error([] { Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(e.what()).find("the shape holds 4 elements, 3 values given") != std::string::npos);
}

TEST_CASE("data_ptr<T> is checked against the dtype") {
  const Tensor f = Tensor::from_vector(std::vector<float>{1.5f});
  CHECK(*f.data_ptr<float>() == 1.5f);
  const aoti_cuda::Error e = aoti_cuda_test::expect_error([&] { (void)f.data_ptr<std::int32_t>(); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(e.what()).find("data_ptr<int32_t>() on a float32 tensor") != std::string::npos);
  const Tensor bf = Tensor::empty({2}, DType::kBFloat16);
  CHECK(bf.data_ptr<std::uint16_t>() == bf.data());  // raw 16-bit storage
  CHECK(Tensor().data_ptr<double>() == nullptr);     // undefined: nothing to check
}

TEST_CASE("save_npy / load_npy round-trip every supported dtype and shape") {
  const std::vector<std::pair<DType, std::vector<int64_t>>> cases = {
      {DType::kFloat32, {2, 3}}, {DType::kFloat64, {4}},   {DType::kFloat16, {1, 2, 2}}, {DType::kBFloat16, {3}},
      {DType::kInt64, {}},       {DType::kInt32, {0, 5}},  {DType::kInt16, {2}},         {DType::kInt8, {2, 1}},
      {DType::kUInt8, {7}},      {DType::kBool, {2, 2}}};
  for (const auto& [dtype, shape] : cases) {
    CAPTURE(aoti_cuda::dtype_name(dtype));
    Tensor t = Tensor::empty(shape, dtype);
    for (std::size_t i = 0; i < t.nbytes(); ++i) static_cast<std::uint8_t*>(t.data())[i] = static_cast<std::uint8_t>(i % 2);
    const std::string path = temp("roundtrip.npy");
    aoti_cuda::save_npy(t, path);
    const Tensor back = aoti_cuda::load_npy(path);
    CHECK(back.dtype() == dtype);
    CHECK(back.shape() == shape);
    REQUIRE(back.nbytes() == t.nbytes());
    CHECK(std::memcmp(back.data(), t.data(), t.nbytes()) == 0);
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    CHECK((static_cast<std::size_t>(f.tellg()) - t.nbytes()) % 64 == 0);  // data 64-byte aligned, as NumPy writes
  }
}

TEST_CASE("parse_npy accepts NumPy's own headers (versions 1 and 2)") {
  const std::string data(8, '\0');
  auto t = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }          \n", data);
  CHECK(aoti_cuda::parse_npy({t.data(), t.size()}).shape() == std::vector<int64_t>{2});
  t = npy_image("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }\n", data, 2);
  const Tensor v2 = aoti_cuda::parse_npy({t.data(), t.size()});
  CHECK(v2.dtype() == DType::kInt32);
  CHECK(v2.shape() == std::vector<int64_t>{1, 2});
}

TEST_CASE("parse_npy refuses malformed and unsupported files with a specific error") {
  const std::string data(8, '\0');
  CHECK(parse_error(bytes_of("not numpy at all")) == ErrorCode::kInvalidArgument);
  CHECK(parse_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", data)) ==
        ErrorCode::kInvalidArgument);  // 8 bytes for 3 floats
  CHECK(parse_error(npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", data)) ==
        ErrorCode::kUnsupported);
  CHECK(parse_error(npy_image("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", data)) ==
        ErrorCode::kUnsupported);
  CHECK(parse_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", data)) ==
        ErrorCode::kInvalidArgument);
  CHECK(parse_error(npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2x), }\n", data)) ==
        ErrorCode::kInvalidArgument);
  CHECK(parse_error(npy_image("{'fortran_order': False, 'shape': (2,), }\n", data)) == ErrorCode::kInvalidArgument);
  auto truncated = npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", data);
  truncated.resize(20);
  CHECK(parse_error(truncated) == ErrorCode::kInvalidArgument);
  CHECK(aoti_cuda_test::expect_error([] { aoti_cuda::load_npy("/nonexistent.npy"); }).code() == ErrorCode::kNotFound);
  CHECK(aoti_cuda_test::expect_error([] { aoti_cuda::save_npy(Tensor(), temp("x.npy")); }).code() ==
        ErrorCode::kInvalidArgument);
}

TEST_CASE("from_blob takes const memory for inputs (no copy, no cast at the call site)") {
  static const float kInput[4] = {1, 2, 3, 4};
  const Tensor t = Tensor::from_blob(kInput, {2, 2}, DType::kFloat32);
  CHECK(t.data() == static_cast<const void*>(kInput));
  CHECK(t.data_ptr<float>()[3] == 4.0f);
  CHECK_NOTHROW(Tensor::from_blob(nullptr, {0}, DType::kFloat32));  // nullptr still unambiguous
}
