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

namespace {

constexpr int32_t kBF16 = 15;
constexpr int32_t kF16 = 5;
constexpr int32_t kF32 = 6;

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
  OwnedTensor gate_up = empty({1, 1, 128}, {}, kBF16);
  expect_failure(gate_up.get(), nullptr, 1, o.weight.get(), &residual, "x must be a CUDA tensor");
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
  expect_failure(o.x.get(), nullptr, 0, w16.get(), nullptr, "every operand must have x's dtype");
  OwnedTensor wide = empty({32, 48}, {}, kBF16);
  expect_failure(o.x.get(), nullptr, 0, wide.get(), nullptr, "weight must be [N, 64]");
  expect_failure(o.x.get(), nullptr, 1, o.weight.get(), nullptr, "weight must be [N, 32] with unit-stride rows (swiglu");
  OwnedTensor odd = empty({1, 1, 63}, {}, kBF16);
  expect_failure(odd.get(), nullptr, 1, o.weight.get(), nullptr, "with swiglu, x's last dimension");
  OwnedTensor x_strided = empty({1, 1, 64}, {128, 128, 2}, kBF16);
  expect_failure(x_strided.get(), nullptr, 0, o.weight.get(), nullptr, "x must have a unit-stride last dimension");
  OwnedTensor w_t = empty({32, 64}, {1, 32}, kBF16);
  expect_failure(o.x.get(), nullptr, 0, w_t.get(), nullptr, "unit-stride rows");
  OwnedTensor x12 = empty({1, 12}, {}, kBF16);
  OwnedTensor w12 = empty({32, 12}, {}, kBF16);
  expect_failure(x12.get(), nullptr, 0, w12.get(), nullptr, "K a multiple of 8");
  OwnedTensor norm_short = empty({32}, {}, kBF16);
  AtenTensorHandle ns = norm_short.get();
  expect_failure(o.x.get(), &ns, 0, o.weight.get(), nullptr, "norm_weight must be a contiguous [64]");
  expect_failure(o.x.get(), &norm, 0, o.weight.get(), nullptr, "eps must be finite", std::nan(""));
  OwnedTensor res_wide = empty({1, 1, 48}, {}, kBF16);
  AtenTensorHandle rw = res_wide.get();
  expect_failure(o.x.get(), nullptr, 0, o.weight.get(), &rw, "residual must have x's leading sizes and 32 columns");
  OwnedTensor res_rows = empty({2, 1, 32}, {}, kBF16);
  AtenTensorHandle rr = res_rows.get();
  expect_failure(o.x.get(), nullptr, 0, o.weight.get(), &rr, "residual must have x's leading sizes");
  (void)residual;
}
