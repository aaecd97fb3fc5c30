// The operator shims ExecuTorch 1.3/1.4 programs import (int{4,5,6,8}_plain_mm, sort_stable,
// rand, randint_low_out) and the dtype getters PyTorch 2.12 added, without a GPU: every
// malformed argument fails with AOTI_TORCH_FAILURE and a message naming it, no handle is left
// behind, and well-formed CPU operands are refused only for not being on CUDA (which proves
// the shapes and dtypes were accepted). The numbers are checked on the GPU against PyTorch
// (tests/gpu/et_ops_reference.py).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "aoti_cuda/shim.h"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

// Runs `call` (which returns the shim's result), expects failure naming `function` and
// containing `needle`, and that no handle was created.
void expect_failure(const char* function, const std::function<AOTITorchError()>& call, const std::string& needle) {
  aoti_cuda_shim_clear_error();
  const int64_t live = aoti_cuda_shim_live_handles();
  CHECK(call() == AOTI_TORCH_FAILURE);
  CHECK(aoti_cuda_shim_live_handles() == live);
  INFO("message: " << aoti_cuda_shim_last_error());
  CHECK(last_error_contains(std::string(function) + ": "));
  CHECK(last_error_contains(needle));
}

// A well-formed int4 (1.4 form) problem: M = 2, K = 512, N = 8, group 128 (G = 4, S = 2).
struct Int4 {
  OwnedTensor x = empty({2, 512}, {}, kBF16);
  OwnedTensor q = empty({8, 256}, {}, kU8);
  OwnedTensor scale = empty({8, 4}, {}, kU8);
  OwnedTensor scale_step = empty({8, 2}, {}, kF16);
  OwnedTensor zero = empty({8, 4}, {}, kU8);
  OwnedTensor zero_step = empty({8, 2}, {}, kF16);
  AOTITorchError call(AtenTensorHandle x_, AtenTensorHandle scale_, AtenTensorHandle step_, int64_t group,
                      AtenTensorHandle* out) {
    return aoti_torch_cuda_int4_plain_mm(x_, q.get(), scale_, step_, zero.get(), zero_step.get(), group, out);
  }
};

// ExecuTorch 1.3 declares the same symbol with six parameters; calling it through that
// prototype is exactly what a 1.3 model library does.
using Int4Legacy = AOTITorchError (*)(AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, AtenTensorHandle, int64_t,
                                      AtenTensorHandle*);
Int4Legacy int4_legacy() { return reinterpret_cast<Int4Legacy>(&aoti_torch_cuda_int4_plain_mm); }

}  // namespace

TEST_CASE("PyTorch 2.12 dtype getters return the c10 codes") {
  CHECK(aoti_torch_dtype_float8_e8m0fnu() == 44);
  CHECK(aoti_torch_dtype_float4_e2m1fn_x2() == 45);
}

TEST_CASE("int4_plain_mm (1.4 form): CPU operands, null pointers, dtypes and shapes") {
  Int4 o;
  AtenTensorHandle out = reinterpret_cast<AtenTensorHandle>(0x1);
  const char* fn = "aoti_torch_cuda_int4_plain_mm";
  expect_failure(fn, [&] { return o.call(o.x.get(), o.scale.get(), o.scale_step.get(), 128, &out); },
                 "self must be a CUDA tensor");
  CHECK(out == nullptr);
  expect_failure(fn, [&] { return o.call(o.x.get(), o.scale.get(), o.scale_step.get(), 128, nullptr); }, "ret0 is null");
  expect_failure(fn, [&] { return o.call(nullptr, o.scale.get(), o.scale_step.get(), 128, &out); }, "self");
  expect_failure(fn, [&] { return o.call(o.x.get(), o.scale.get(), nullptr, 128, &out); }, "scale_step");
  OwnedTensor x_i32 = empty({2, 512}, {}, kI32);
  expect_failure(fn, [&] { return o.call(x_i32.get(), o.scale.get(), o.scale_step.get(), 128, &out); },
                 "self must be bfloat16, float16 or float32, got int32");
  OwnedTensor x_t = empty({2, 512}, {1, 2}, kBF16);
  expect_failure(fn, [&] { return o.call(x_t.get(), o.scale.get(), o.scale_step.get(), 128, &out); },
                 "unit stride along K");
  OwnedTensor scale_bf16 = empty({8, 4}, {}, kBF16);
  expect_failure(fn, [&] { return o.call(o.x.get(), scale_bf16.get(), o.scale_step.get(), 128, &out); },
                 "scale must be uint8 or int8, got bfloat16");
  OwnedTensor scale_t = empty({4, 8}, {}, kU8);
  expect_failure(fn, [&] { return o.call(o.x.get(), scale_t.get(), o.scale_step.get(), 128, &out); },
                 "scale must be [8, 4], got [4, 8]");
  OwnedTensor step_f32 = empty({8, 2}, {}, kF32);
  expect_failure(fn, [&] { return o.call(o.x.get(), o.scale.get(), step_f32.get(), 128, &out); },
                 "scale_step must be float16, got float32");
  expect_failure(fn, [&] { return o.call(o.x.get(), o.scale.get(), o.scale_step.get(), 96, &out); },
                 "group_size must be positive and divide K = 512, got 96");
  OwnedTensor x_k = empty({2, 384}, {}, kBF16);  // K = 384: qdata [8, 256] packs 512
  expect_failure(fn, [&] { return o.call(x_k.get(), o.scale.get(), o.scale_step.get(), 128, &out); },
                 "multiple of 256");
}

TEST_CASE("int4_plain_mm (1.3 form, six arguments): told apart by the group size and validated as such") {
  // 1.3: scale and zero bfloat16 [K/group, N] (torchao Int4Tensor's layout).
  OwnedTensor x = empty({1, 256}, {}, kBF16);
  OwnedTensor q = empty({16, 128}, {}, kU8);
  OwnedTensor scale = empty({2, 16}, {}, kBF16);
  OwnedTensor zero = empty({2, 16}, {}, kBF16);
  AtenTensorHandle out = reinterpret_cast<AtenTensorHandle>(0x1);
  const char* fn = "aoti_torch_cuda_int4_plain_mm";
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale.get(), zero.get(), 128, &out); },
                 "self must be a CUDA tensor");
  CHECK(out == nullptr);
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale.get(), zero.get(), 128, nullptr); },
                 "ret0 is null");
  OwnedTensor scale_nk = empty({16, 2}, {}, kBF16);
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale_nk.get(), zero.get(), 128, &out); },
                 "scale must be [2, 16], got [16, 2]");
  OwnedTensor zero_u8 = empty({2, 16}, {}, kU8);
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale.get(), zero_u8.get(), 128, &out); },
                 "zero must be bfloat16, got uint8");
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale.get(), zero.get(), 0, &out); },
                 "zero is null (or an ExecuTorch 1.3 call with group_size 0)");
  expect_failure(fn, [&] { return int4_legacy()(x.get(), q.get(), scale.get(), zero.get(), 100, &out); },
                 "group_size must be positive and divide K = 256, got 100");
}

TEST_CASE("int5_plain_mm, int6_plain_mm, int8_plain_mm: CPU operands and operand checks") {
  AtenTensorHandle out = nullptr;
  OwnedTensor x = empty({3, 256}, {}, kBF16);
  OwnedTensor ql = empty({4, 128}, {}, kI8);
  OwnedTensor s = empty({4, 8}, {}, kU8);  // group 32: G = 8
  OwnedTensor step = empty({4, 1}, {}, kF16);
  OwnedTensor z = empty({4, 8}, {}, kU8);
  {
    const char* fn = "aoti_torch_cuda_int5_plain_mm";
    OwnedTensor qh = empty({4, 32}, {}, kU8);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int5_plain_mm(x.get(), ql.get(), qh.get(), s.get(), step.get(), z.get(), step.get(), 32,
                                           &out);
    }, "self must be a CUDA tensor");
    OwnedTensor qh_bad = empty({4, 64}, {}, kU8);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int5_plain_mm(x.get(), ql.get(), qh_bad.get(), s.get(), step.get(), z.get(), step.get(),
                                           32, &out);
    }, "qh must be [4, 32], got [4, 64]");
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int5_plain_mm(x.get(), ql.get(), qh.get(), s.get(), step.get(), z.get(), nullptr, 32,
                                           &out);
    }, "zero_point_step");
  }
  {
    const char* fn = "aoti_torch_cuda_int6_plain_mm";
    OwnedTensor qh = empty({4, 64}, {}, kU8);
    OwnedTensor steps = empty({4, 2}, {}, kF16);  // S' = 2 divides G = 8
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int6_plain_mm(x.get(), ql.get(), qh.get(), s.get(), steps.get(), 32, &out);
    }, "self must be a CUDA tensor");
    OwnedTensor steps3 = empty({4, 3}, {}, kF16);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int6_plain_mm(x.get(), ql.get(), qh.get(), s.get(), steps3.get(), 32, &out);
    }, "steps must be [N, S] with S dividing K/group_size = 8");
    OwnedTensor x_k = empty({3, 240}, {}, kBF16);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int6_plain_mm(x_k.get(), ql.get(), qh.get(), s.get(), steps.get(), 16, &out);
    }, "K must be a multiple of 32, got 240");
  }
  {
    const char* fn = "aoti_torch_cuda_int8_plain_mm";
    OwnedTensor q = empty({4, 256}, {}, kI8);
    OwnedTensor scale = empty({4, 8}, {}, kBF16);
    OwnedTensor zero = empty({4, 8}, {}, kI8);
    expect_failure(fn, [&] { return aoti_torch_cuda_int8_plain_mm(x.get(), q.get(), scale.get(), zero.get(), 32, &out); },
                   "self must be a CUDA tensor");
    OwnedTensor q_u8 = empty({4, 256}, {}, kU8);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int8_plain_mm(x.get(), q_u8.get(), scale.get(), zero.get(), 32, &out);
    }, "qdata must be int8, got uint8");
    OwnedTensor zero_t = empty({4, 8}, {1, 4}, kI8);
    expect_failure(fn, [&] {
      return aoti_torch_cuda_int8_plain_mm(x.get(), q.get(), scale.get(), zero_t.get(), 32, &out);
    }, "zero must be contiguous");
  }
}

TEST_CASE("sort_stable: CPU tensor, dim range, dtypes, null outputs") {
  const char* fn = "aoti_torch_cuda_sort_stable";
  OwnedTensor x = empty({3, 5}, {}, kF32);
  AtenTensorHandle v = reinterpret_cast<AtenTensorHandle>(0x1), i = reinterpret_cast<AtenTensorHandle>(0x1);
  int32_t stable = 1;
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(x.get(), &stable, -1, 0, &v, &i); },
                 "self must be a CUDA tensor");
  CHECK(v == nullptr);
  CHECK(i == nullptr);
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(x.get(), nullptr, 2, 0, &v, &i); },
                 "dim 2 is out of range for a 2-d tensor");
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(x.get(), nullptr, -3, 1, &v, &i); },
                 "dim -3 is out of range");
  OwnedTensor c = empty({4}, {}, kC64);
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(c.get(), nullptr, 0, 0, &v, &i); },
                 "got complex64");
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(x.get(), nullptr, 0, 0, nullptr, &i); }, "ret0 is null");
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(x.get(), nullptr, 0, 0, &v, nullptr); }, "ret1 is null");
  expect_failure(fn, [&] { return aoti_torch_cuda_sort_stable(nullptr, nullptr, 0, 0, &v, &i); }, "self");
}

TEST_CASE("rand: dtype, layout, device and output checks") {
  const char* fn = "aoti_torch_cuda_rand";
  const int64_t size[2] = {4, 8};
  AtenTensorHandle out = reinterpret_cast<AtenTensorHandle>(0x1);
  int32_t i64 = kI64, strided = 0, sparse = 1, cpu = 0;
  expect_failure(fn, [&] { return aoti_torch_cuda_rand(size, 2, &i64, nullptr, nullptr, 0, nullptr, &out); },
                 "dtype must be float16, bfloat16, float32 or float64, got int64");
  CHECK(out == nullptr);
  expect_failure(fn, [&] { return aoti_torch_cuda_rand(size, 2, nullptr, &sparse, nullptr, 0, nullptr, &out); },
                 "layout must be strided (0), got 1");
  expect_failure(fn, [&] { return aoti_torch_cuda_rand(size, 2, nullptr, &strided, &cpu, 0, nullptr, &out); },
                 "device must be CUDA (1), got 0");
  expect_failure(fn, [&] { return aoti_torch_cuda_rand(size, 2, nullptr, nullptr, nullptr, 0, nullptr, nullptr); },
                 "ret0 is null");
  const int64_t negative[1] = {-2};
  expect_failure(fn, [&] { return aoti_torch_cuda_rand(negative, 1, nullptr, nullptr, nullptr, 0, nullptr, &out); },
                 "-2");
}

TEST_CASE("randint_low_out: range, size, dtype and device checks") {
  const char* fn = "aoti_torch_cuda_randint_low_out";
  OwnedTensor out = empty({2, 3}, {}, kI64);
  const int64_t size[2] = {2, 3};
  const int64_t other[2] = {3, 2};
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(out.get(), 0, 10, size, 2); },
                 "out must be a CUDA tensor");
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(out.get(), 5, 5, size, 2); },
                 "high must be greater than low, got low = 5, high = 5");
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(out.get(), 0, 10, other, 2); },
                 "size [3, 2] must equal out's sizes [2, 3]");
  OwnedTensor u8 = empty({2, 3}, {}, kU8);
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(u8.get(), 0, 300, size, 2); },
                 "[0, 300) does not fit in out's dtype uint8");
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(u8.get(), -1, 3, size, 2); },
                 "does not fit in out's dtype uint8");
  OwnedTensor b = empty({2, 3}, {}, kBool);
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(b.get(), 0, 2, size, 2); },
                 "out must have an integer or floating dtype, got bool");
  expect_failure(fn, [&] { return aoti_torch_cuda_randint_low_out(nullptr, 0, 2, size, 2); }, "out");
}
