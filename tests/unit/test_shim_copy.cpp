// Shim C ABI on CPU tensors: copy_, clone variants, zero_, item_*, scalar_to_tensor_*, conversions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "aoti_cuda/shim.h"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::iota_f32;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;

namespace {
const int32_t kF32 = 6;

// Element [i][j] of a 2-D float view through its strides.
float at2(const OwnedTensor& t, int64_t i, int64_t j) {
  std::vector<int64_t> st = t.strides();
  return t.data_as<float>()[i * st[0] + j * st[1]];
}
}  // namespace

TEST_CASE("shim copy_: contiguous to contiguous") {
  OwnedTensor src = iota_f32({3, 4});
  OwnedTensor dst = empty({3, 4}, {}, kF32);
  REQUIRE(aoti_torch_copy_(dst.get(), src.get(), 0) == 0);
  for (int i = 0; i < 12; ++i) CHECK(dst.data_as<float>()[i] == static_cast<float>(i));
}

TEST_CASE("shim copy_: transposed source into contiguous destination and back") {
  OwnedTensor base = iota_f32({3, 4});  // base[i][j] = 4i + j
  int64_t sizes[] = {4, 3};
  int64_t strides[] = {1, 4};
  OwnedTensor tr;  // tr[j][i] = base[i][j]
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 0, tr.out()) == 0);
  OwnedTensor dst = empty({4, 3}, {}, kF32);
  REQUIRE(aoti_torch_copy_(dst.get(), tr.get(), 0) == 0);
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 3; ++i) CHECK(at2(dst, j, i) == static_cast<float>(4 * i + j));
  }
  // contiguous -> transposed destination
  OwnedTensor back_base = empty({3, 4}, {}, kF32);
  OwnedTensor back;
  REQUIRE(aoti_torch__reinterpret_tensor(back_base.get(), 2, sizes, strides, 0, back.out()) == 0);
  REQUIRE(aoti_torch_copy_(back.get(), dst.get(), 0) == 0);
  for (int k = 0; k < 12; ++k) CHECK(back_base.data_as<float>()[k] == static_cast<float>(k));
}

TEST_CASE("shim copy_: offset and gapped views only touch their elements") {
  OwnedTensor base = iota_f32({4, 5});  // values 0..19
  // dst: a 2x2 window at row 1, col 2 (offset 7, strides {5, 1})
  int64_t sizes[] = {2, 2};
  int64_t strides[] = {5, 1};
  OwnedTensor window;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 7, window.out()) == 0);
  std::vector<float> values = {-1, -2, -3, -4};
  int64_t vsizes[] = {2, 2};
  OwnedTensor src;
  REQUIRE(aoti_torch_create_tensor_from_blob(values.data(), 2, vsizes, nullptr, 0, kF32, 0, 0, src.out()) == 0);
  REQUIRE(aoti_torch_copy_(window.get(), src.get(), 0) == 0);
  const float* b = base.data_as<float>();
  for (int k = 0; k < 20; ++k) {
    float expected = static_cast<float>(k);
    if (k == 7) expected = -1;
    if (k == 8) expected = -2;
    if (k == 12) expected = -3;
    if (k == 13) expected = -4;
    CHECK(b[k] == expected);
  }
}

TEST_CASE("shim copy_: 3-d permuted and broadcast sources") {
  OwnedTensor src = iota_f32({2, 3, 4});  // src[a][b][c] = 12a + 4b + c
  int64_t psizes[] = {4, 2, 3};
  int64_t pstrides[] = {1, 12, 4};  // permuted view p[c][a][b] = src[a][b][c]
  OwnedTensor perm;
  REQUIRE(aoti_torch__reinterpret_tensor(src.get(), 3, psizes, pstrides, 0, perm.out()) == 0);
  OwnedTensor dst = empty({4, 2, 3}, {}, kF32);
  REQUIRE(aoti_torch_copy_(dst.get(), perm.get(), 0) == 0);
  const float* d = dst.data_as<float>();
  for (int c = 0; c < 4; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b) CHECK(d[c * 6 + a * 3 + b] == static_cast<float>(12 * a + 4 * b + c));

  // Broadcast: a [3] row into [2, 3]; a 0-d scalar into [2, 3].
  OwnedTensor row = iota_f32({3});
  OwnedTensor out = empty({2, 3}, {}, kF32);
  REQUIRE(aoti_torch_copy_(out.get(), row.get(), 0) == 0);
  for (int k = 0; k < 6; ++k) CHECK(out.data_as<float>()[k] == static_cast<float>(k % 3));
  OwnedTensor scalar;
  REQUIRE(aoti_torch_scalar_to_tensor_float32(7.5f, scalar.out()) == 0);
  REQUIRE(aoti_torch_copy_(out.get(), scalar.get(), 0) == 0);
  for (int k = 0; k < 6; ++k) CHECK(out.data_as<float>()[k] == 7.5f);
}

TEST_CASE("shim copy_: errors for shape mismatch, unsupported conversion, bad handles") {
  OwnedTensor a = iota_f32({2, 3});
  OwnedTensor b = empty({3, 2}, {}, kF32);
  CHECK(aoti_torch_copy_(b.get(), a.get(), 0) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("shape mismatch: cannot copy a source of sizes [2, 3] into a destination of sizes [3, 2]"));
  OwnedTensor c = empty({6}, {}, 9);  // complex64
  OwnedTensor d = empty({6}, {}, kF32);
  CHECK(aoti_torch_copy_(d.get(), c.get(), 0) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("dtype conversion complex64 -> float32 is not supported"));
  CHECK(aoti_torch_copy_(nullptr, a.get(), 0) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_copy_(a.get(), nullptr, 0) == AOTI_TORCH_FAILURE);
  // complex -> complex is a plain copy
  OwnedTensor c2 = empty({6}, {}, 9);
  std::memset(c.data(), 0x3c, 48);
  REQUIRE(aoti_torch_copy_(c2.get(), c.get(), 0) == 0);
  CHECK(std::memcmp(c2.data(), c.data(), 48) == 0);
}

TEST_CASE("shim copy_: dtype conversions on CPU") {
  std::vector<float> f = {1.5f, -2.75f, 3.0e9f, std::nanf(""), -1.0e20f, 0.0f};
  int64_t n[] = {6};
  OwnedTensor src;
  REQUIRE(aoti_torch_create_tensor_from_blob(f.data(), 1, n, nullptr, 0, kF32, 0, 0, src.out()) == 0);

  OwnedTensor i32 = empty({6}, {}, 3);
  REQUIRE(aoti_torch_copy_(i32.get(), src.get(), 0) == 0);
  const int32_t* pi = i32.data_as<int32_t>();
  CHECK(pi[0] == 1);
  CHECK(pi[1] == -2);                                      // truncation toward zero
  CHECK(pi[2] == std::numeric_limits<int32_t>::max());    // saturates
  CHECK(pi[3] == 0);                                       // NaN -> 0
  CHECK(pi[4] == std::numeric_limits<int32_t>::min());
  CHECK(pi[5] == 0);

  OwnedTensor f64 = empty({6}, {}, 7);
  REQUIRE(aoti_torch_copy_(f64.get(), src.get(), 0) == 0);
  CHECK(f64.data_as<double>()[1] == -2.75);

  OwnedTensor half = empty({6}, {}, 5);
  REQUIRE(aoti_torch_copy_(half.get(), src.get(), 0) == 0);
  const uint16_t* ph = half.data_as<uint16_t>();
  CHECK(ph[0] == 0x3e00);  // 1.5
  CHECK(ph[1] == 0xc180);  // -2.75
  CHECK(ph[2] == 0x7c00);  // overflow -> +inf
  CHECK((ph[3] & 0x7c00) == 0x7c00);
  CHECK((ph[3] & 0x03ff) != 0);  // NaN stays NaN
  CHECK(ph[4] == 0xfc00);        // -inf

  OwnedTensor bf = empty({6}, {}, 15);
  REQUIRE(aoti_torch_copy_(bf.get(), src.get(), 0) == 0);
  CHECK(bf.data_as<uint16_t>()[0] == 0x3fc0);  // 1.5
  CHECK(bf.data_as<uint16_t>()[1] == 0xc030);  // -2.75

  OwnedTensor b = empty({6}, {}, 11);
  REQUIRE(aoti_torch_copy_(b.get(), src.get(), 0) == 0);
  const uint8_t* pb = b.data_as<uint8_t>();
  CHECK(pb[0] == 1);
  CHECK(pb[3] == 1);  // NaN is truthy
  CHECK(pb[5] == 0);

  // half -> float round trip, int64 -> uint8 wraps, bool -> float
  OwnedTensor back = empty({6}, {}, kF32);
  REQUIRE(aoti_torch_copy_(back.get(), half.get(), 0) == 0);
  CHECK(back.data_as<float>()[0] == 1.5f);
  CHECK(std::isinf(back.data_as<float>()[2]));
  std::vector<int64_t> big = {257, -1};
  int64_t two[] = {2};
  OwnedTensor i64;
  REQUIRE(aoti_torch_create_tensor_from_blob(big.data(), 1, two, nullptr, 0, 4, 0, 0, i64.out()) == 0);
  OwnedTensor u8 = empty({2}, {}, 0);
  REQUIRE(aoti_torch_copy_(u8.get(), i64.get(), 0) == 0);
  CHECK(u8.data_as<uint8_t>()[0] == 1);
  CHECK(u8.data_as<uint8_t>()[1] == 255);
}

namespace {
// Converts float32 values to `dtype` bit patterns through copy_ (public API).
std::vector<uint16_t> f32_to_16bit(const std::vector<float>& values, int32_t dtype) {
  int64_t n[] = {static_cast<int64_t>(values.size())};
  OwnedTensor src;
  REQUIRE(aoti_torch_create_tensor_from_blob(const_cast<float*>(values.data()), 1, n, nullptr, 0, kF32, 0, 0,
                                             src.out()) == 0);
  OwnedTensor dst = empty({n[0]}, {}, dtype);
  REQUIRE(aoti_torch_copy_(dst.get(), src.get(), 0) == 0);
  const uint16_t* p = dst.data_as<uint16_t>();
  return std::vector<uint16_t>(p, p + n[0]);
}
std::vector<float> bits16_to_f32(const std::vector<uint16_t>& bits, int32_t dtype) {
  int64_t n[] = {static_cast<int64_t>(bits.size())};
  OwnedTensor src;
  REQUIRE(aoti_torch_create_tensor_from_blob(const_cast<uint16_t*>(bits.data()), 1, n, nullptr, 0, dtype, 0, 0,
                                             src.out()) == 0);
  OwnedTensor dst = empty({n[0]}, {}, kF32);
  REQUIRE(aoti_torch_copy_(dst.get(), src.get(), 0) == 0);
  const float* p = dst.data_as<float>();
  return std::vector<float>(p, p + n[0]);
}
}  // namespace

TEST_CASE("shim: float16 and bfloat16 conversions round to nearest even") {
  const std::vector<float> in = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 65504.0f,
                                 65520.0f,                       // rounds up to inf
                                 std::ldexp(1.0f, -24),          // smallest subnormal
                                 std::ldexp(1.0f, -25),          // exactly half of it: ties to even (0)
                                 std::ldexp(1.5f, -25),          // above half: rounds up
                                 1.0f + std::ldexp(1.0f, -11),   // tie -> even (down)
                                 1.0f + std::ldexp(3.0f, -11)};  // tie -> even (up)
  const std::vector<uint16_t> expected = {0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00,
                                          0x0001, 0x0000, 0x0001, 0x3c00, 0x3c02};
  CHECK(f32_to_16bit(in, 5) == expected);
  std::vector<float> back = bits16_to_f32({0x3c00, 0x0001, 0xc000, 0x7c00, 0x7e00}, 5);
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == std::ldexp(1.0f, -24));
  CHECK(back[2] == -2.0f);
  CHECK(std::isinf(back[3]));
  CHECK(std::isnan(back[4]));
  // Every finite positive half survives half -> float -> half exactly.
  std::vector<uint16_t> all(0x7c00);
  for (uint32_t b = 0; b < 0x7c00; ++b) all[b] = static_cast<uint16_t>(b);
  CHECK(f32_to_16bit(bits16_to_f32(all, 5), 5) == all);

  std::vector<uint16_t> bf = f32_to_16bit({1.0f, 1.0f + std::ldexp(1.0f, -8), std::nanf("")}, 15);
  CHECK(bf[0] == 0x3f80);
  CHECK(bf[1] == 0x3f80);  // tie -> even
  CHECK(std::isnan(bits16_to_f32({bf[2]}, 15)[0]));
  CHECK(bits16_to_f32({0x3f80}, 15)[0] == 1.0f);
}

TEST_CASE("shim clone: preserves dense layouts, densifies the rest") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  {
    OwnedTensor base = iota_f32({3, 4});
    int64_t tsizes[] = {4, 3};
    int64_t tstrides[] = {1, 4};
    OwnedTensor tr;
    REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, tsizes, tstrides, 0, tr.out()) == 0);
    OwnedTensor c;
    REQUIRE(aoti_torch_clone(tr.get(), c.out()) == 0);
    CHECK(c.strides() == std::vector<int64_t>{1, 4});  // dense permutation kept
    CHECK(c.data() != base.data());
    CHECK(c.offset() == 0);
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) CHECK(at2(c, j, i) == at2(tr, j, i));

    // A gapped view (every other column) becomes contiguous.
    int64_t gsizes[] = {3, 2};
    int64_t gstrides[] = {4, 2};
    OwnedTensor gapped;
    REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, gsizes, gstrides, 1, gapped.out()) == 0);
    OwnedTensor g;
    REQUIRE(aoti_torch_clone(gapped.get(), g.out()) == 0);
    CHECK(g.strides() == std::vector<int64_t>{2, 1});
    int64_t storage = 0;
    REQUIRE(aoti_torch_get_storage_size(g.get(), &storage) == 0);
    CHECK(storage == 24);
    const float expect[] = {1, 3, 5, 7, 9, 11};
    for (int k = 0; k < 6; ++k) CHECK(g.data_as<float>()[k] == expect[k]);
    // Writing the clone does not touch the source.
    g.data_as<float>()[0] = -5;
    CHECK(base.data_as<float>()[1] == 1.0f);
    CHECK(aoti_torch_clone(nullptr, g.out()) == AOTI_TORCH_FAILURE);
    CHECK(aoti_torch_clone(base.get(), nullptr) == AOTI_TORCH_FAILURE);
  }
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim clone_preserve_strides: copies the covering span, offset 0") {
  OwnedTensor base = iota_f32({20});
  int64_t sizes[] = {2, 3};
  int64_t strides[] = {6, 2};  // span 1 + 6 + 4 = 11 elements
  OwnedTensor view;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 3, view.out()) == 0);
  OwnedTensor c;
  REQUIRE(aoti_torch_clone_preserve_strides(view.get(), c.out()) == 0);
  CHECK(c.sizes() == std::vector<int64_t>{2, 3});
  CHECK(c.strides() == std::vector<int64_t>{6, 2});
  CHECK(c.offset() == 0);
  int64_t storage = 0;
  REQUIRE(aoti_torch_get_storage_size(c.get(), &storage) == 0);
  CHECK(storage == 44);
  for (int k = 0; k < 11; ++k) CHECK(c.data_as<float>()[k] == static_cast<float>(3 + k));  // gaps included
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(at2(c, i, j) == at2(view, i, j));
}

TEST_CASE("shim zero_: dense and strided views") {
  OwnedTensor base = iota_f32({4, 4});
  int64_t sizes[] = {2, 2};
  int64_t strides[] = {4, 2};
  OwnedTensor view;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 5, view.out()) == 0);
  REQUIRE(aoti_torch_zero_(view.get()) == 0);
  const float* b = base.data_as<float>();
  for (int k = 0; k < 16; ++k) {
    bool zeroed = k == 5 || k == 7 || k == 9 || k == 11;
    CHECK(b[k] == (zeroed ? 0.0f : static_cast<float>(k)));
  }
  REQUIRE(aoti_torch_zero_(base.get()) == 0);
  for (int k = 0; k < 16; ++k) CHECK(b[k] == 0.0f);
  CHECK(aoti_torch_zero_(nullptr) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim tensor_copy_: deprecated (src, dst) argument order") {
  OwnedTensor src = iota_f32({5});
  OwnedTensor dst = empty({5}, {}, kF32);
  REQUIRE(aoti_torch_tensor_copy_(src.get(), dst.get()) == 0);
  CHECK(dst.data_as<float>()[4] == 4.0f);
}

TEST_CASE("shim item and scalar_to_tensor round trips for every dtype") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  {
    OwnedTensor t;
    auto check_tensor = [&](int32_t dtype) {
      int64_t dim = -1;
      REQUIRE(aoti_torch_get_dim(t.get(), &dim) == 0);
      CHECK(dim == 0);
      int32_t got = -1;
      REQUIRE(aoti_torch_get_dtype(t.get(), &got) == 0);
      CHECK(got == dtype);
      REQUIRE(aoti_torch_get_device_type(t.get(), &got) == 0);
      CHECK(got == 0);  // scalar tensors are CPU, like libtorch
    };
    REQUIRE(aoti_torch_scalar_to_tensor_float32(1.25f, t.out()) == 0);
    check_tensor(6);
    float f32 = 0;
    REQUIRE(aoti_torch_item_float32(t.get(), &f32) == 0);
    CHECK(f32 == 1.25f);
    REQUIRE(aoti_torch_scalar_to_tensor_float64(-2.5e300, t.out()) == 0);
    check_tensor(7);
    double f64 = 0;
    REQUIRE(aoti_torch_item_float64(t.get(), &f64) == 0);
    CHECK(f64 == -2.5e300);
    REQUIRE(aoti_torch_scalar_to_tensor_uint8(250, t.out()) == 0);
    check_tensor(0);
    uint8_t u8 = 0;
    REQUIRE(aoti_torch_item_uint8(t.get(), &u8) == 0);
    CHECK(u8 == 250);
    REQUIRE(aoti_torch_scalar_to_tensor_uint16(65000, t.out()) == 0);
    check_tensor(27);
    uint16_t u16 = 0;
    REQUIRE(aoti_torch_item_uint16(t.get(), &u16) == 0);
    CHECK(u16 == 65000);
    REQUIRE(aoti_torch_scalar_to_tensor_uint32(4000000000u, t.out()) == 0);
    check_tensor(28);
    uint32_t u32 = 0;
    REQUIRE(aoti_torch_item_uint32(t.get(), &u32) == 0);
    CHECK(u32 == 4000000000u);
    REQUIRE(aoti_torch_scalar_to_tensor_uint64(UINT64_C(18000000000000000000), t.out()) == 0);
    check_tensor(29);
    uint64_t u64 = 0;
    REQUIRE(aoti_torch_item_uint64(t.get(), &u64) == 0);
    CHECK(u64 == UINT64_C(18000000000000000000));
    REQUIRE(aoti_torch_scalar_to_tensor_int8(-100, t.out()) == 0);
    check_tensor(1);
    int8_t i8 = 0;
    REQUIRE(aoti_torch_item_int8(t.get(), &i8) == 0);
    CHECK(i8 == -100);
    REQUIRE(aoti_torch_scalar_to_tensor_int16(-30000, t.out()) == 0);
    check_tensor(2);
    int16_t i16 = 0;
    REQUIRE(aoti_torch_item_int16(t.get(), &i16) == 0);
    CHECK(i16 == -30000);
    REQUIRE(aoti_torch_scalar_to_tensor_int32(-2000000000, t.out()) == 0);
    check_tensor(3);
    int32_t i32 = 0;
    REQUIRE(aoti_torch_item_int32(t.get(), &i32) == 0);
    CHECK(i32 == -2000000000);
    REQUIRE(aoti_torch_scalar_to_tensor_int64(INT64_C(-9000000000000000000), t.out()) == 0);
    check_tensor(4);
    int64_t i64 = 0;
    REQUIRE(aoti_torch_item_int64(t.get(), &i64) == 0);
    CHECK(i64 == INT64_C(-9000000000000000000));
    REQUIRE(aoti_torch_scalar_to_tensor_bool(true, t.out()) == 0);
    check_tensor(11);
    bool b = false;
    REQUIRE(aoti_torch_item_bool(t.get(), &b) == 0);
    CHECK(b);

    // float16 / bfloat16 / complex64 via 1-element tensors
    OwnedTensor h = empty({1}, {}, 5);
    h.data_as<uint16_t>()[0] = 0x4248;  // 3.140625
    uint16_t bits = 0;
    REQUIRE(aoti_torch_item_float16(h.get(), &bits) == 0);
    CHECK(bits == 0x4248);
    REQUIRE(aoti_torch_item_float32(h.get(), &f32) == 0);  // converting read
    CHECK(f32 == 3.140625f);
    OwnedTensor bf = empty({1, 1}, {}, 15);
    bf.data_as<uint16_t>()[0] = 0xc040;  // -3.0
    REQUIRE(aoti_torch_item_bfloat16(bf.get(), &bits) == 0);
    CHECK(bits == 0xc040);
    REQUIRE(aoti_torch_item_int64(bf.get(), &i64) == 0);
    CHECK(i64 == -3);
    REQUIRE(aoti_torch_item_float16(bf.get(), &bits) == 0);  // bf16 -> f16
    CHECK(bits == 0xc200);
    OwnedTensor cx = empty({}, {}, 9);
    float parts[2] = {1.5f, -0.5f};
    std::memcpy(cx.data(), parts, sizeof(parts));
    float got[2] = {0, 0};
    REQUIRE(aoti_torch_item_complex64(cx.get(), got) == 0);
    CHECK(got[0] == 1.5f);
    CHECK(got[1] == -0.5f);
    OwnedTensor real;
    REQUIRE(aoti_torch_scalar_to_tensor_int32(7, real.out()) == 0);
    REQUIRE(aoti_torch_item_complex64(real.get(), got) == 0);
    CHECK(got[0] == 7.0f);
    CHECK(got[1] == 0.0f);
  }
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim item: error paths") {
  OwnedTensor many = iota_f32({2});
  float f = 0;
  CHECK(aoti_torch_item_float32(many.get(), &f) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("exactly one element, got 2"));
  OwnedTensor one = iota_f32({1});
  CHECK(aoti_torch_item_float32(one.get(), nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret_value is null"));
  CHECK(aoti_torch_item_bool(one.get(), nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_item_float32(nullptr, &f) == AOTI_TORCH_FAILURE);
  OwnedTensor cx = empty({1}, {}, 9);
  CHECK(aoti_torch_item_float32(cx.get(), &f) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("cannot read a complex64 element as float32"));
  CHECK(aoti_torch_scalar_to_tensor_int32(1, nullptr) == AOTI_TORCH_FAILURE);
  // A strided 1-element view reads the element at its offset.
  OwnedTensor base = iota_f32({6});
  int64_t sizes[] = {1, 1};
  int64_t strides[] = {3, 2};
  OwnedTensor v;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 4, v.out()) == 0);
  REQUIRE(aoti_torch_item_float32(v.get(), &f) == 0);
  CHECK(f == 4.0f);
}

TEST_CASE("shim copy_: overlapping source and destination in one storage") {
  OwnedTensor base = iota_f32({10});
  int64_t sizes[] = {8};
  int64_t strides[] = {1};
  OwnedTensor dst;
  OwnedTensor src;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 1, sizes, strides, 1, dst.out()) == 0);
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 1, sizes, strides, 0, src.out()) == 0);
  REQUIRE(aoti_torch_copy_(dst.get(), src.get(), 0) == 0);  // shift right by one element
  const float expected[] = {0, 0, 1, 2, 3, 4, 5, 6, 7, 9};
  for (int k = 0; k < 10; ++k) CHECK(base.data_as<float>()[k] == expected[k]);
  REQUIRE(aoti_torch_copy_(base.get(), base.get(), 0) == 0);  // self copy is a no-op
  for (int k = 0; k < 10; ++k) CHECK(base.data_as<float>()[k] == expected[k]);
}

TEST_CASE("shim: huge storage offsets are rejected, not wrapped") {
  OwnedTensor base = iota_f32({4});
  int64_t zero[] = {0};
  OwnedTensor v;
  CHECK(aoti_torch__reinterpret_tensor(base.get(), 1, zero, nullptr, int64_t{1} << 62, v.out()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("overflows int64"));
  float x = 0;
  CHECK(aoti_torch_create_tensor_from_blob(&x, 1, zero, nullptr, int64_t{1} << 62, kF32, 0, 0, v.out()) ==
        AOTI_TORCH_FAILURE);
}
