// aoti_torch_cuda_mm_out / addmm_out / bmm_out argument validation on CPU tensors (no GPU
// needed): every malformed call fails with AOTI_TORCH_FAILURE and a message naming the operand,
// nothing is allocated; well-formed CPU operands are refused for not being on CUDA. And the
// layout rule that decides which operands cuBLAS reads as they are.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/error_state.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/gemm.hpp"
#include "shim/ops/gemv.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

template <class Call>
void expect_failure(const char* function, Call call, const std::string& needle) {
  aoti_cuda_shim_clear_error();
  const int64_t live = aoti_cuda_shim_live_handles();
  CHECK(call() == AOTI_TORCH_FAILURE);
  CHECK(aoti_cuda_shim_live_handles() == live);
  INFO("message: " << aoti_cuda_shim_last_error());
  CHECK(last_error_contains(std::string(function) + ": "));
  CHECK(last_error_contains(needle));
}

}  // namespace

TEST_CASE("extern mm: well-formed CPU operands are refused for not being on CUDA") {
  OwnedTensor a = empty({2, 3}, {}, kF32), b = empty({3, 4}, {}, kF32), c = empty({2, 4}, {}, kF32);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c.get(), a.get(), b.get()); },
                 "out must be a CUDA tensor");
  OwnedTensor bias = empty({4}, {}, kF32);
  expect_failure(
      "aoti_torch_cuda_addmm_out",
      [&] { return aoti_torch_cuda_addmm_out(c.get(), bias.get(), a.get(), b.get(), 1.0, 1.0); },
      "out must be a CUDA tensor");
  OwnedTensor a3 = empty({2, 2, 3}, {}, kF32), b3 = empty({2, 3, 4}, {}, kF32), c3 = empty({2, 2, 4}, {}, kF32);
  expect_failure("aoti_torch_cuda_bmm_out", [&] { return aoti_torch_cuda_bmm_out(c3.get(), a3.get(), b3.get()); },
                 "out must be a CUDA tensor");
}

TEST_CASE("extern mm: shapes, dims, dtypes and nulls are diagnosed by name") {
  OwnedTensor a = empty({2, 3}, {}, kF32), b = empty({3, 4}, {}, kF32), c = empty({2, 4}, {}, kF32);
  OwnedTensor b_bad = empty({5, 4}, {}, kF32), c_bad = empty({2, 5}, {}, kF32);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c.get(), a.get(), b_bad.get()); },
                 "shapes [2, 3] x [5, 4] -> out [2, 4] do not agree");
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c_bad.get(), a.get(), b.get()); },
                 "do not agree");
  OwnedTensor a3 = empty({1, 2, 3}, {}, kF32);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c.get(), a3.get(), b.get()); },
                 "self must be 2-d");
  OwnedTensor b16 = empty({3, 4}, {}, kBF16);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c.get(), a.get(), b16.get()); },
                 "mat2 must have out's dtype float32");
  OwnedTensor ai = empty({2, 3}, {}, kI32), bi = empty({3, 4}, {}, kI32), ci = empty({2, 4}, {}, kI32);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(ci.get(), ai.get(), bi.get()); },
                 "float32, float16 and bfloat16 matrix multiplies are supported");
  CHECK(aoti_cuda::shim::last_error_code() == aoti_cuda::ErrorCode::kUnsupported);
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(nullptr, a.get(), b.get()); }, "out");
  expect_failure("aoti_torch_cuda_mm_out", [&] { return aoti_torch_cuda_mm_out(c.get(), a.get(), nullptr); }, "mat2");
  // addmm: self must broadcast to out.
  OwnedTensor bias_bad = empty({3}, {}, kF32), bias_3d = empty({1, 1, 4}, {}, kF32);
  expect_failure(
      "aoti_torch_cuda_addmm_out",
      [&] { return aoti_torch_cuda_addmm_out(c.get(), bias_bad.get(), a.get(), b.get(), 1.0, 1.0); },
      "self [3] does not broadcast to out [2, 4]");
  expect_failure(
      "aoti_torch_cuda_addmm_out",
      [&] { return aoti_torch_cuda_addmm_out(c.get(), bias_3d.get(), a.get(), b.get(), 1.0, 1.0); },
      "does not broadcast");
  expect_failure(
      "aoti_torch_cuda_addmm_out",
      [&] { return aoti_torch_cuda_addmm_out(c.get(), nullptr, a.get(), b.get(), 1.0, 1.0); }, "self is null");
  // bmm: batch sizes must agree.
  OwnedTensor a3b = empty({2, 2, 3}, {}, kF32), b3b = empty({3, 3, 4}, {}, kF32), c3b = empty({2, 2, 4}, {}, kF32);
  expect_failure("aoti_torch_cuda_bmm_out", [&] { return aoti_torch_cuda_bmm_out(c3b.get(), a3b.get(), b3b.get()); },
                 "shapes [2, 2, 3] x [3, 3, 4] -> out [2, 2, 4] do not agree");
}

TEST_CASE("extern mm: which layouts cuBLAS reads directly") {
  using aoti_cuda::shim::gemm::blas_compatible;
  using aoti_cuda::shim::gemm::Matrix;
  CHECK(blas_compatible(Matrix{nullptr, 4, 8, 8, 1}));    // row-major
  CHECK(blas_compatible(Matrix{nullptr, 4, 8, 1, 4}));    // column-major (a transposed view)
  CHECK(blas_compatible(Matrix{nullptr, 4, 8, 12, 1}));   // padded rows
  CHECK(blas_compatible(Matrix{nullptr, 1, 8, 0, 1}));    // one row: its row stride does not matter
  CHECK(blas_compatible(Matrix{nullptr, 4, 1, 1, 0}));    // one column
  CHECK(blas_compatible(Matrix{nullptr, 1, 1, 7, 9}));    // one element
  CHECK_FALSE(blas_compatible(Matrix{nullptr, 4, 8, 16, 2}));  // no unit stride
  CHECK_FALSE(blas_compatible(Matrix{nullptr, 4, 8, 4, 1}));   // overlapping rows (stride < columns)
  CHECK_FALSE(blas_compatible(Matrix{nullptr, 4, 8, 0, 1}));   // broadcast rows
  CHECK_FALSE(blas_compatible(Matrix{nullptr, int64_t{1} << 31, 2, 2, 1}));  // beyond cuBLAS's int sizes
  CHECK(std::string(aoti_cuda::shim::gemm::loaded_library()).empty());  // nothing has needed cuBLAS here
}

TEST_CASE("extern mm: which multiplies go to the few-row kernels (layout and alignment rules)") {
  namespace gemv = aoti_cuda::shim::gemm::gemv;
  using aoti_cuda::shim::gemm::Batch;
  using aoti_cuda::shim::gemm::Matrix;
  alignas(16) static unsigned char arena[64];
  void* p = arena;  // only addresses are looked at
  void* odd = arena + 2;
  const auto bf16 = gemv::Element::kBFloat16;
  // x [m, k] row-major; w as nn.Linear's weight [n, k] seen transposed ([k, n], strides (1, k)).
  auto x = [&](int64_t m, int64_t k, void* d = nullptr) { return Batch{Matrix{d ? d : p, m, k, k, 1}, 0}; };
  auto linear = [&](int64_t k, int64_t n, void* d = nullptr) { return Batch{Matrix{d ? d : p, k, n, 1, k}, 0}; };
  auto rows = [&](int64_t k, int64_t n) { return Batch{Matrix{p, k, n, n, 1}, 0}; };
  auto out = [&](int64_t m, int64_t n) { return Batch{Matrix{p, m, n, n, 1}, 0}; };

  CHECK(gemv::pick(bf16, x(1, 2048), linear(2048, 3072), out(1, 3072), 1) == gemv::Kernel::kDot);
  CHECK(gemv::pick(bf16, x(8, 2048), linear(2048, 5632), out(8, 5632), 1) == gemv::Kernel::kDot);
  CHECK(gemv::pick(bf16, x(9, 2048), linear(2048, 64), out(9, 64), 1) == gemv::Kernel::kNone);  // 9 rows
  CHECK(gemv::pick(bf16, x(1, 2044), linear(2044, 64), out(1, 64), 1) == gemv::Kernel::kNone);  // K % 8
  CHECK(gemv::pick(bf16, x(1, 2048, odd), linear(2048, 64), out(1, 64), 1) == gemv::Kernel::kNone);  // unaligned
  CHECK(gemv::pick(bf16, x(1, 2048), linear(2048, 64, odd), out(1, 64), 1) == gemv::Kernel::kNone);
  CHECK(gemv::pick(gemv::Element::kFloat32, x(2, 2044), linear(2044, 8), out(2, 8), 1) == gemv::Kernel::kDot);
  // b's rows contiguous (p · V, or a weight stored K x N): cuBLAS.
  CHECK(gemv::pick(bf16, x(4, 1024), rows(1024, 128), out(4, 128), 4) == gemv::Kernel::kNone);
  CHECK(gemv::pick(bf16, x(1, 1024), rows(1024, 128), out(1, 128), 1) == gemv::Kernel::kNone);
  // Batches: more than a grid dimension holds goes to cuBLAS.
  CHECK(gemv::pick(bf16, x(1, 64), linear(64, 64), out(1, 64), 65536) == gemv::Kernel::kNone);
  // a read with a column stride other than 1 (a transposed activation): cuBLAS.
  const Batch xt{Matrix{p, 2, 64, 1, 2}, 0};
  CHECK(gemv::pick(bf16, xt, linear(64, 64), out(2, 64), 1) == gemv::Kernel::kNone);
  // A batch of transposed caches (q · K^T): 16-byte aligned batches only.
  const Batch kt{Matrix{p, 128, 1024, 1, 128}, 1024 * 128};
  CHECK(gemv::pick(bf16, Batch{Matrix{p, 4, 128, 128, 1}, 512}, kt, Batch{Matrix{p, 4, 1024, 1024, 1}, 4096}, 4) ==
        gemv::Kernel::kDot);
  CHECK(gemv::pick(bf16, Batch{Matrix{p, 4, 128, 128, 1}, 516}, kt, Batch{Matrix{p, 4, 1024, 1024, 1}, 4096}, 4) ==
        gemv::Kernel::kNone);

  // The dispatcher's row limit: the calling thread's OpSettings (a Module call installs its
  // TuningOptions::gemv_max_rows), 1 outside any scope; clamped to 0..8 all the same.
  namespace gemm = aoti_cuda::shim::gemm;
  using aoti_cuda::shim::OpSettings;
  using aoti_cuda::shim::OpSettingsScope;
  CHECK(gemm::uses_gemv(kBF16, x(1, 2048), linear(2048, 64), out(1, 64), 1));
  CHECK_FALSE(gemm::uses_gemv(kBF16, x(2, 2048), linear(2048, 64), out(2, 64), 1));
  OpSettings off, eight, beyond;
  off.gemv_max_rows = 0;
  eight.gemv_max_rows = 8;
  beyond.gemv_max_rows = 100;
  {
    const OpSettingsScope scope(&off);
    CHECK_FALSE(gemm::uses_gemv(kBF16, x(1, 2048), linear(2048, 64), out(1, 64), 1));
    {
      const OpSettingsScope inner(&eight);
      CHECK(gemm::uses_gemv(kBF16, x(8, 2048), linear(2048, 64), out(8, 64), 1));
      CHECK_FALSE(gemm::uses_gemv(kBF16, x(9, 2048), linear(2048, 64), out(9, 64), 1));
      CHECK_FALSE(gemm::uses_gemv(kI32, x(1, 2048), linear(2048, 64), out(1, 64), 1));
    }
    CHECK_FALSE(gemm::uses_gemv(kBF16, x(1, 2048), linear(2048, 64), out(1, 64), 1));  // the outer scope again
  }
  {
    const OpSettingsScope scope(&beyond);
    CHECK(gemm::uses_gemv(kBF16, x(8, 2048), linear(2048, 64), out(8, 64), 1));
    CHECK_FALSE(gemm::uses_gemv(kBF16, x(9, 2048), linear(2048, 64), out(9, 64), 1));
  }
  CHECK_FALSE(gemm::uses_gemv(kBF16, x(2, 2048), linear(2048, 64), out(2, 64), 1));  // defaults outside
}
