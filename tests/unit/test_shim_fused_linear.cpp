// aoti_torch_cuda_aoti_cuda_fused_linear argument validation, on CPU tensors (no GPU needed): every malformed call
// fails with AOTI_TORCH_FAILURE and a message naming the problem, leaves no handle behind and resets *ret0;
// well-formed CPU operands are refused for not being on CUDA. The kernel's results are checked on the GPU
// (tests/gpu/test_fused_linear.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "aoti_cuda/shim.h"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

// A [1, 1, 64] row, a [32, 64] weight, a [64] norm weight, a [1, 1, 32] residual.
struct Operands {
  OwnedTensor x = empty({1, 1, 64}, {}, kBF16);
  OwnedTensor weight = empty({32, 64}, {}, kBF16);
  OwnedTensor norm = empty({64}, {}, kBF16);
  OwnedTensor residual = empty({1, 1, 32}, {}, kBF16);
};

void expect_failure(AtenTensorHandle x, AtenTensorHandle* norm, int32_t swiglu, AtenTensorHandle weight,
                    AtenTensorHandle* residual, const std::string& needle, double eps = 1e-5) {
  aoti_cuda_test::expect_refused(
      "aoti_torch_cuda_aoti_cuda_fused_linear",
      [&](AtenTensorHandle* out) {
        return aoti_torch_cuda_aoti_cuda_fused_linear(x, norm, eps, swiglu, weight, residual, out);
      },
      needle);
}

}  // namespace

TEST_CASE("fused linear: well-formed CPU operands are refused for not being on a CUDA device") {
  Operands o;
  AtenTensorHandle norm = o.norm.get(), residual = o.residual.get();
  expect_failure(o.x.get(), nullptr, 0, o.weight.get(), nullptr, "x must be a CUDA tensor");
  expect_failure(o.x.get(), &norm, 0, o.weight.get(), &residual, "x must be a CUDA tensor");
  OwnedTensor half_residual = empty({1, 1, 16}, {}, kBF16);  // swiglu: 32 weight rows give 16 columns
  AtenTensorHandle half = half_residual.get();
  expect_failure(o.x.get(), &norm, 1, o.weight.get(), &half, "x must be a CUDA tensor");
  OwnedTensor rows = empty({3, 64}, {}, kF16);
  OwnedTensor weight16 = empty({32, 64}, {}, kF16);
  expect_failure(rows.get(), nullptr, 0, weight16.get(), nullptr, "x must be a CUDA tensor");
}

TEST_CASE("fused linear: null handles, dtypes, shapes and strides") {
  Operands o;
  AtenTensorHandle norm = o.norm.get(), residual = o.residual.get();
  expect_failure(nullptr, nullptr, 0, o.weight.get(), nullptr, "x");
  expect_failure(o.x.get(), nullptr, 0, nullptr, nullptr, "weight");
  AtenTensorHandle null_handle = nullptr;
  expect_failure(o.x.get(), &null_handle, 0, o.weight.get(), nullptr, "norm_weight");
  aoti_cuda_shim_clear_error();
  CHECK(aoti_torch_cuda_aoti_cuda_fused_linear(o.x.get(), nullptr, 0.0, 0, o.weight.get(), nullptr, nullptr) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret0 (the output) is null"));

  OwnedTensor x32 = empty({1, 1, 64}, {}, kF32);
  expect_failure(x32.get(), nullptr, 0, o.weight.get(), nullptr, "x must be bfloat16 or float16");
  OwnedTensor w16 = empty({32, 64}, {}, kF16);
  expect_failure(o.x.get(), nullptr, 0, w16.get(), nullptr, "weight must have x's dtype");
  OwnedTensor norm16 = empty({64}, {}, kF16);
  AtenTensorHandle n16 = norm16.get();
  expect_failure(o.x.get(), &n16, 0, o.weight.get(), nullptr, "norm_weight and residual must have x's dtype");
  OwnedTensor wide = empty({32, 48}, {}, kBF16);
  expect_failure(o.x.get(), nullptr, 0, wide.get(), nullptr, "weight must be [N, 64]");
  OwnedTensor odd_rows = empty({31, 64}, {}, kBF16);
  expect_failure(o.x.get(), nullptr, 1, odd_rows.get(), nullptr, "with swiglu, weight's rows");
  expect_failure(o.x.get(), nullptr, 1, o.weight.get(), &residual,
                 "residual must have x's leading sizes and 16 columns");
  OwnedTensor x_strided = empty({1, 1, 64}, {128, 128, 2}, kBF16);
  expect_failure(x_strided.get(), nullptr, 0, o.weight.get(), nullptr, "x must have a unit-stride last dimension");
  OwnedTensor w_t = empty({32, 64}, {1, 32}, kBF16);
  expect_failure(o.x.get(), nullptr, 0, w_t.get(), nullptr, "unit-stride rows");
  OwnedTensor x12 = empty({1, 12}, {}, kBF16);
  OwnedTensor w12 = empty({32, 12}, {}, kBF16);
  expect_failure(x12.get(), nullptr, 0, w12.get(), nullptr, "x's last dimension must be a multiple of 8");
  OwnedTensor x_long = empty({1, 12040}, {}, kBF16);
  OwnedTensor w_long = empty({8, 12040}, {}, kBF16);
  expect_failure(x_long.get(), nullptr, 0, w_long.get(), nullptr, "the kernel takes K up to 12032");
  OwnedTensor norm_short = empty({32}, {}, kBF16);
  AtenTensorHandle ns = norm_short.get();
  expect_failure(o.x.get(), &ns, 0, o.weight.get(), nullptr, "norm_weight must be a contiguous, 16-byte aligned [64]");
  expect_failure(o.x.get(), &norm, 0, o.weight.get(), nullptr, "eps must be finite", std::nan(""));
  OwnedTensor res_wide = empty({1, 1, 48}, {}, kBF16);
  AtenTensorHandle rw = res_wide.get();
  expect_failure(o.x.get(), nullptr, 0, o.weight.get(), &rw, "residual must have x's leading sizes and 32 columns");
  OwnedTensor res_rows = empty({2, 1, 32}, {}, kBF16);
  AtenTensorHandle rr = res_rows.get();
  expect_failure(o.x.get(), nullptr, 0, o.weight.get(), &rr, "residual must have x's leading sizes");
  (void)residual;
}

namespace {

// The int4 form's operands: x [1, 1, 1000] (torchao pads K to 1024), qdata packing N 48 and K 1024 with innerKTiles
// 8, scale_and_zero of group 128, n 44, a [1000] norm weight, a [1, 1, 44] residual.
struct Int4Operands {
  OwnedTensor x = empty({1, 1, 1000}, {}, kBF16);
  OwnedTensor qdata = empty({6, 8, 32, 4}, {}, kI32);
  OwnedTensor sz = empty({8, 48, 2}, {}, kBF16);
  OwnedTensor norm = empty({1000}, {}, kBF16);
  OwnedTensor residual = empty({1, 1, 44}, {}, kBF16);
};

void refused(AtenTensorHandle x, AtenTensorHandle qdata, AtenTensorHandle sz, int64_t group, int64_t n,
             int32_t swiglu, AtenTensorHandle* norm, AtenTensorHandle* residual, const std::string& needle) {
  aoti_cuda_test::expect_refused(
      "aoti_torch_cuda_aoti_cuda_fused_linear_int4",
      [&](AtenTensorHandle* out) {
        return aoti_torch_cuda_aoti_cuda_fused_linear_int4(x, norm, 1e-5, swiglu, qdata, sz, group, n, residual, out);
      },
      needle);
}

}  // namespace

TEST_CASE("int4 fused linear: validation of the packed weight, n, group and the optional operands") {
  Int4Operands o;
  AtenTensorHandle norm = o.norm.get(), residual = o.residual.get();
  // Well formed: refused only for living on the CPU.
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 44, 0, &norm, &residual, "x must be a CUDA tensor");
  OwnedTensor x32 = empty({1, 1, 1000}, {}, kF32);
  refused(x32.get(), o.qdata.get(), o.sz.get(), 128, 44, 0, nullptr, nullptr, "x must be bfloat16");
  OwnedTensor q3 = empty({6, 8, 32}, {}, kI32);
  refused(o.x.get(), q3.get(), o.sz.get(), 128, 44, 0, nullptr, nullptr, "qdata must be a contiguous int32");
  OwnedTensor q_words = empty({6, 8, 32, 3}, {}, kI32);
  refused(o.x.get(), q_words.get(), o.sz.get(), 128, 44, 0, nullptr, nullptr, "innerKTiles 2, 4 or 8");
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 100, 44, 0, nullptr, nullptr, "group_size must be 32, 64, 128 or 256");
  OwnedTensor x_long = empty({1, 1, 1032}, {}, kBF16);
  refused(x_long.get(), o.qdata.get(), o.sz.get(), 128, 44, 0, nullptr, nullptr, "at least x's 1032");
  OwnedTensor sz_bad = empty({8, 44, 2}, {}, kBF16);
  refused(o.x.get(), o.qdata.get(), sz_bad.get(), 128, 44, 0, nullptr, nullptr,
          "scale_and_zero must be a contiguous bfloat16 [8, 48, 2]");
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 49, 0, nullptr, nullptr,
          "n (the weight's output features) must be in [1, 48]");
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 0, 0, nullptr, nullptr, "must be in [1, 48]");
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 44, 1, nullptr, nullptr, "a multiple of 32");
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 32, 1, nullptr, &residual,
          "residual must have x's leading sizes and 16 columns");
  OwnedTensor norm_short = empty({999}, {}, kBF16);
  AtenTensorHandle ns = norm_short.get();
  refused(o.x.get(), o.qdata.get(), o.sz.get(), 128, 44, 0, &ns, nullptr,
          "norm_weight must be a contiguous, 16-byte aligned [1000]");
  refused(o.x.get(), nullptr, o.sz.get(), 128, 44, 0, nullptr, nullptr, "qdata");
  OwnedTensor x_odd = empty({1, 1, 1001}, {}, kBF16);
  refused(x_odd.get(), o.qdata.get(), o.sz.get(), 128, 44, 0, nullptr, nullptr,
          "x's last dimension must be a multiple of 8");
}
