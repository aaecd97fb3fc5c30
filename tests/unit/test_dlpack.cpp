// DLPack interop (aoti_cuda/dlpack.hpp) on the host: dtype/device mapping,
// strides and byte_offset, ownership and deleter accounting, rejections.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "aoti_cuda/dlpack.hpp"
#include "support/test_util.hpp"
#include "aoti_cuda/error.hpp"
#include "aoti_cuda/tensor.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::Tensor;

namespace {

// A producer-side DLManagedTensor over caller-provided memory whose deleter
// only counts its calls (the test owns everything), so "called exactly once"
// and "not called" can be asserted.
struct FakeProducer {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
  int deleter_calls = 0;

  FakeProducer(void* data, std::vector<int64_t> shape_in, DLDataType dtype, std::vector<int64_t> strides_in = {},
               DLDevice device = DLDevice{kDLCPU, 0})
      : shape(std::move(shape_in)), strides(std::move(strides_in)) {
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = device;
    managed.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    managed.dl_tensor.dtype = dtype;
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
    managed.dl_tensor.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<FakeProducer*>(self->manager_ctx)->deleter_calls; };
  }
};

DLDataType dl_type(uint8_t code, uint8_t bits, uint16_t lanes = 1) { return DLDataType{code, bits, lanes}; }

using aoti_cuda_test::expect_error;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct DTypeCase {
  DType dtype;
  uint8_t code;
  uint8_t bits;
};

const std::vector<DTypeCase> kSupported = {
    {DType::kFloat16, kDLFloat, 16},    {DType::kFloat32, kDLFloat, 32},     {DType::kFloat64, kDLFloat, 64},
    {DType::kBFloat16, kDLBfloat, 16},  {DType::kComplex32, kDLComplex, 32}, {DType::kComplex64, kDLComplex, 64},
    {DType::kComplex128, kDLComplex, 128},
    {DType::kInt8, kDLInt, 8},          {DType::kInt16, kDLInt, 16},         {DType::kInt32, kDLInt, 32},
    {DType::kInt64, kDLInt, 64},        {DType::kUInt8, kDLUInt, 8},         {DType::kUInt16, kDLUInt, 16},
    {DType::kUInt32, kDLUInt, 32},      {DType::kUInt64, kDLUInt, 64},       {DType::kBool, 6, 8},
};

}  // namespace

TEST_CASE("dlpack: every supported dtype imports zero-copy and round-trips through to_dlpack") {
  for (const DTypeCase& c : kSupported) {
    CAPTURE(aoti_cuda::dtype_name(c.dtype));
    alignas(16) unsigned char storage[6 * 16];
    for (std::size_t i = 0; i < sizeof(storage); ++i) storage[i] = static_cast<unsigned char>(i * 7 + 1);
    FakeProducer producer(storage, {2, 3}, dl_type(c.code, c.bits));
    {
      Tensor t = aoti_cuda::from_dlpack(&producer.managed);
      CHECK(t.dtype() == c.dtype);
      CHECK(t.device() == Device::cpu());
      CHECK(t.shape() == std::vector<int64_t>{2, 3});
      CHECK(t.strides() == std::vector<int64_t>{3, 1});
      CHECK(t.data() == storage);  // zero-copy
      CHECK(t.nbytes() == 6u * c.bits / 8);

      DLManagedTensor* out = aoti_cuda::to_dlpack(t);
      REQUIRE(out != nullptr);
      CHECK(out->dl_tensor.dtype.code == c.code);
      CHECK(out->dl_tensor.dtype.bits == c.bits);
      CHECK(out->dl_tensor.dtype.lanes == 1);
      CHECK(out->dl_tensor.data == storage);
      CHECK(out->dl_tensor.device.device_type == kDLCPU);

      Tensor back = aoti_cuda::from_dlpack(out);
      CHECK(back.dtype() == c.dtype);
      CHECK(back.data() == storage);
      CHECK(std::memcmp(back.data(), storage, back.nbytes()) == 0);
      CHECK(producer.deleter_calls == 0);  // still referenced by t and back
    }
    CHECK(producer.deleter_calls == 1);
  }
}

TEST_CASE("dlpack: strided and transposed views keep their strides both ways") {
  float data[12];
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  // A 3x4 row-major buffer seen as its 4x3 transpose.
  FakeProducer producer(data, {4, 3}, dl_type(kDLFloat, 32), {1, 4});
  Tensor t = aoti_cuda::from_dlpack(&producer.managed);
  CHECK(t.strides() == std::vector<int64_t>{1, 4});
  CHECK_FALSE(t.is_contiguous());
  Tensor dense = t.to_host();  // contiguous copy of the transpose
  REQUIRE(dense.is_contiguous());
  const float* d = dense.data_ptr<float>();
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) CHECK(d[r * 3 + c] == data[c * 4 + r]);
  }

  DLManagedTensor* out = aoti_cuda::to_dlpack(t);
  REQUIRE(out->dl_tensor.strides != nullptr);
  CHECK(out->dl_tensor.strides[0] == 1);
  CHECK(out->dl_tensor.strides[1] == 4);
  CHECK(out->dl_tensor.shape[0] == 4);
  CHECK(out->dl_tensor.shape[1] == 3);
  CHECK(out->dl_tensor.ndim == 2);
  out->deleter(out);

  // Every other column: a step-2 view.
  FakeProducer every_other(data, {3, 2}, dl_type(kDLFloat, 32), {4, 2});
  Tensor s = aoti_cuda::from_dlpack(&every_other.managed);
  Tensor sd = s.to_host();
  CHECK(sd.data_ptr<float>()[0] == 0.0f);
  CHECK(sd.data_ptr<float>()[1] == 2.0f);
  CHECK(sd.data_ptr<float>()[5] == 10.0f);
}

TEST_CASE("dlpack: byte_offset moves the first element") {
  int32_t data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  FakeProducer producer(data, {4}, dl_type(kDLInt, 32));
  producer.managed.dl_tensor.byte_offset = 3 * sizeof(int32_t);
  Tensor t = aoti_cuda::from_dlpack(&producer.managed);
  CHECK(t.data() == data + 3);
  CHECK(t.data_ptr<int32_t>()[0] == 3);
  CHECK(t.data_ptr<int32_t>()[3] == 6);

  // Export points data at the first element with byte_offset 0.
  DLManagedTensor* out = aoti_cuda::to_dlpack(t);
  CHECK(out->dl_tensor.data == data + 3);
  CHECK(out->dl_tensor.byte_offset == 0);
  out->deleter(out);
}

TEST_CASE("dlpack: 0-d and empty tensors") {
  double scalar = 2.5;
  FakeProducer p0(&scalar, {}, dl_type(kDLFloat, 64));
  Tensor t0 = aoti_cuda::from_dlpack(&p0.managed);
  CHECK(t0.dim() == 0);
  CHECK(t0.numel() == 1);
  CHECK(*t0.data_ptr<double>() == 2.5);
  DLManagedTensor* out0 = aoti_cuda::to_dlpack(t0);
  CHECK(out0->dl_tensor.ndim == 0);
  out0->deleter(out0);

  // Empty tensor with no data pointer at all (allowed: nothing to point at).
  FakeProducer pe(nullptr, {0, 5}, dl_type(kDLFloat, 32));
  Tensor te = aoti_cuda::from_dlpack(&pe.managed);
  CHECK(te.numel() == 0);
}

TEST_CASE("dlpack: the deleter runs exactly once, when the last Tensor copy dies") {
  float data[4] = {1, 2, 3, 4};
  FakeProducer producer(data, {4}, dl_type(kDLFloat, 32));
  Tensor a = aoti_cuda::from_dlpack(&producer.managed);
  Tensor b = a;
  {
    Tensor c = b;
  }
  a = Tensor();
  CHECK(producer.deleter_calls == 0);
  b = Tensor();
  CHECK(producer.deleter_calls == 1);

  // A null deleter is allowed (the producer has nothing to free).
  FakeProducer no_deleter(data, {4}, dl_type(kDLFloat, 32));
  no_deleter.managed.deleter = nullptr;
  CHECK_NOTHROW(aoti_cuda::from_dlpack(&no_deleter.managed));
}

TEST_CASE("dlpack: an exported tensor keeps its memory alive after the original Tensor is gone") {
  DLManagedTensor* out = nullptr;
  {
    Tensor t = Tensor::empty({3, 2}, DType::kInt64);
    for (int i = 0; i < 6; ++i) t.data_ptr<int64_t>()[i] = 100 + i;
    out = aoti_cuda::to_dlpack(t);
  }
  // Under ASan a use-after-free here would be reported.
  REQUIRE(out != nullptr);
  CHECK(out->dl_tensor.dtype.code == kDLInt);
  CHECK(out->dl_tensor.dtype.bits == 64);
  const auto* v = static_cast<const int64_t*>(out->dl_tensor.data);
  for (int i = 0; i < 6; ++i) CHECK(v[i] == 100 + i);

  // Tensor -> DLPack -> Tensor: the re-imported tensor owns the export.
  Tensor back = aoti_cuda::from_dlpack(out);
  CHECK(back.shape() == std::vector<int64_t>{3, 2});
  CHECK(back.data_ptr<int64_t>()[5] == 105);
  // `back` going out of scope calls out->deleter; LeakSanitizer checks it freed.
}

TEST_CASE("dlpack: device mapping (no CUDA access needed to wrap a pointer)") {
  alignas(8) unsigned char fake[64];
  struct Case {
    DLDeviceType type;
    int32_t id;
    Device expected;
  };
  const Case cases[] = {
      {kDLCPU, 0, Device::cpu()},
      {kDLCUDAHost, 0, Device::cpu()},
      {kDLCUDA, 0, Device::cuda(0)},
      {kDLCUDA, 3, Device::cuda(3)},
      {kDLCUDAManaged, 1, Device::cuda(1)},
  };
  for (const Case& c : cases) {
    CAPTURE(static_cast<int>(c.type));
    FakeProducer producer(fake, {4}, dl_type(kDLFloat, 32), {}, DLDevice{c.type, c.id});
    {
      Tensor t = aoti_cuda::from_dlpack(&producer.managed);
      CHECK(t.device() == c.expected);
      CHECK(t.device().index == c.expected.index);
      DLManagedTensor* out = aoti_cuda::to_dlpack(t);
      if (c.expected.is_cuda()) {
        CHECK(out->dl_tensor.device.device_type == kDLCUDA);
        CHECK(out->dl_tensor.device.device_id == c.id);
      } else {
        CHECK(out->dl_tensor.device.device_type == kDLCPU);
      }
      out->deleter(out);
    }
    CHECK(producer.deleter_calls == 1);
  }
}

TEST_CASE("dlpack: rejected imports name the field and leave ownership with the caller") {
  alignas(16) unsigned char data[64] = {};

  SUBCASE("null") {
    Error e = expect_error([] { aoti_cuda::from_dlpack(nullptr); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }

  SUBCASE("unsupported or invalid dtypes and devices") {
  struct Bad {
    const char* what;
    DLDataType dtype;
    DLDevice device;
    ErrorCode code;
    const char* message_part;
  };
  const Bad bad[] = {
      {"vector lanes", dl_type(kDLFloat, 32, 4), {kDLCPU, 0}, ErrorCode::kUnsupported, "lanes 4"},
      {"float 8", dl_type(kDLFloat, 8), {kDLCPU, 0}, ErrorCode::kUnsupported, "code 2 (kDLFloat), bits 8"},
      {"int 4", dl_type(kDLInt, 4), {kDLCPU, 0}, ErrorCode::kUnsupported, "bits 4"},
      {"bfloat 32", dl_type(kDLBfloat, 32), {kDLCPU, 0}, ErrorCode::kUnsupported, "kDLBfloat"},
      {"opaque", dl_type(kDLOpaqueHandle, 64), {kDLCPU, 0}, ErrorCode::kUnsupported, "kDLOpaqueHandle"},
      {"unknown code", dl_type(42, 32), {kDLCPU, 0}, ErrorCode::kUnsupported, "code 42"},
      {"bool 1 bit", dl_type(6, 1), {kDLCPU, 0}, ErrorCode::kUnsupported, "kDLBool"},
      {"OpenCL", dl_type(kDLFloat, 32), {kDLOpenCL, 0}, ErrorCode::kUnsupported, "device_type 4 (kDLOpenCL)"},
      {"ROCm", dl_type(kDLFloat, 32), {kDLROCM, 0}, ErrorCode::kUnsupported, "kDLROCM"},
      {"negative CUDA id", dl_type(kDLFloat, 32), {kDLCUDA, -1}, ErrorCode::kInvalidArgument, "device_id -1"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.what);
    FakeProducer producer(data, {2, 2}, b.dtype, {}, b.device);
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == b.code);
    CHECK_MESSAGE(contains(e.what(), b.message_part), e.what());
    CHECK(contains(e.what(), "from_dlpack"));
    CHECK(producer.deleter_calls == 0);
  }
  }

  SUBCASE("device type outside the DLDeviceType enum") {
    // A C producer may store any int; write it bytewise (a C++ enum cast of 99
    // would itself be undefined behaviour).
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32));
    const std::underlying_type_t<DLDeviceType> bogus = 99;
    static_assert(sizeof(bogus) == sizeof(producer.managed.dl_tensor.device.device_type), "layout");
    std::memcpy(&producer.managed.dl_tensor.device.device_type, &bogus, sizeof(bogus));
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK_MESSAGE(contains(e.what(), "device_type 99 (unknown device type)"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("negative shape") {
    FakeProducer producer(data, {2, -3}, dl_type(kDLFloat, 32));
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(contains(e.what(), "shape[1] is negative (-3)"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("negative stride") {
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32), {-2, 1});
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK_MESSAGE(contains(e.what(), "strides[0] is negative (-2)"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("null shape") {
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32));
    producer.managed.dl_tensor.shape = nullptr;
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(contains(e.what(), "DLTensor.shape is null"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("too many dimensions") {
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32));
    producer.managed.dl_tensor.ndim = 1000;
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK_MESSAGE(contains(e.what(), "ndim 1000"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("negative ndim") {
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32));
    producer.managed.dl_tensor.ndim = -1;
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(contains(e.what(), "DLTensor.ndim is negative (-1)"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("null data for a non-empty tensor") {
    FakeProducer producer(nullptr, {2, 2}, dl_type(kDLFloat, 32));
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(contains(e.what(), "DLTensor.data is null"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("misaligned byte_offset") {
    FakeProducer producer(data, {2}, dl_type(kDLFloat, 32));
    producer.managed.dl_tensor.byte_offset = 2;
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(contains(e.what(), "byte_offset (2)"), e.what());
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("byte size overflow") {
    FakeProducer producer(data, {INT64_MAX / 2, 4}, dl_type(kDLFloat, 32));
    Error e = expect_error([&] { aoti_cuda::from_dlpack(&producer.managed); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(contains(e.what(), "from_dlpack"));
    CHECK(producer.deleter_calls == 0);
  }
  SUBCASE("after a failed import the caller can still import (or free) it") {
    FakeProducer producer(data, {2, 2}, dl_type(kDLFloat, 32, 2));
    CHECK_THROWS_AS(aoti_cuda::from_dlpack(&producer.managed), Error);
    CHECK(producer.deleter_calls == 0);
    producer.managed.dl_tensor.dtype.lanes = 1;  // caller fixes it up and retries
    { Tensor t = aoti_cuda::from_dlpack(&producer.managed); }
    CHECK(producer.deleter_calls == 1);
  }
}

TEST_CASE("dlpack: exporting an undefined tensor or a dtype DLPack lacks is refused") {
  Error undefined = expect_error([] { aoti_cuda::to_dlpack(Tensor()); });
  CHECK(undefined.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(undefined.what(), "undefined"));

  for (DType d : {DType::kQInt8, DType::kFloat8_e4m3fn, DType::kBits16, DType::kQUInt4x2}) {
    CAPTURE(aoti_cuda::dtype_name(d));
    Tensor t = Tensor::empty({2}, d);
    Error e = expect_error([&] { aoti_cuda::to_dlpack(t); });
    CHECK(e.code() == ErrorCode::kUnsupported);
    CHECK(contains(e.what(), aoti_cuda::dtype_name(d)));
  }
}
