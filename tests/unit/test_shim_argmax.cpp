// aoti_torch_cuda_aoti_cuda_argmax argument validation, on CPU tensors (no GPU needed): every malformed call fails
// with AOTI_TORCH_FAILURE and a message naming the problem, leaves no handle behind and resets *ret0; well-formed
// CPU operands are refused for not being on CUDA. The kernel's results are checked on the GPU
// (tests/gpu/test_argmax.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "aoti_cuda/shim.h"
#include "shim/ops/argmax.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

void expect_failure(AtenTensorHandle x, const std::string& needle) {
  aoti_cuda_test::expect_refused(
      "aoti_torch_cuda_aoti_cuda_argmax",
      [&](AtenTensorHandle* out) { return aoti_torch_cuda_aoti_cuda_argmax(x, out); }, needle);
}

}  // namespace

TEST_CASE("argmax: well-formed CPU operands are refused for not being on a CUDA device") {
  for (int32_t dtype : {kBF16, kF16, kF32}) {
    CAPTURE(dtype);
    OwnedTensor logits = empty({1, 32000}, {}, dtype);
    expect_failure(logits.get(), "x must be a CUDA tensor");
    OwnedTensor rows = empty({2, 3, 7}, {}, dtype);  // any leading dimensions, a short odd row
    expect_failure(rows.get(), "x must be a CUDA tensor");
    OwnedTensor strided_rows = empty({4, 5}, {8, 1}, dtype);  // rows 8 apart
    expect_failure(strided_rows.get(), "x must be a CUDA tensor");
  }
}

TEST_CASE("argmax: null handles, dtypes, empty rows and strides") {
  expect_failure(nullptr, "x");
  OwnedTensor ints = empty({1, 10}, {}, kI64);
  expect_failure(ints.get(), "x must be bfloat16, float16 or float32");
  OwnedTensor doubles = empty({1, 10}, {}, kF64);
  expect_failure(doubles.get(), "x must be bfloat16, float16 or float32");
  OwnedTensor scalar = empty({}, {}, kBF16);
  expect_failure(scalar.get(), "x must have at least one dimension");
  OwnedTensor no_columns = empty({3, 0}, {}, kBF16);
  expect_failure(no_columns.get(), "x's last dimension (the one reduced) must hold 1 to");
  OwnedTensor column_strided = empty({4, 6}, {1, 4}, kBF16);  // transposed: the reduced dimension is not unit-stride
  expect_failure(column_strided.get(), "x must have a unit-stride last dimension");
  OwnedTensor uncollapsible = empty({2, 3, 4}, {20, 4, 1}, kBF16);  // leading dimensions of two row strides
  expect_failure(uncollapsible.get(), "leading dimensions of one row stride");
}

TEST_CASE("argmax: a null output pointer is refused") {
  OwnedTensor logits = empty({1, 8}, {}, kBF16);
  CHECK(aoti_torch_cuda_aoti_cuda_argmax(logits.get(), nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_cuda_test::last_error_contains("ret0"));
}

TEST_CASE("argmax: the block size gives each thread about 32 elements, from 32 to 1024 threads") {
  namespace am = aoti_cuda::shim::argmax;
  CHECK(am::block_threads(1) == 32);
  CHECK(am::block_threads(1024) == 32);
  CHECK(am::block_threads(1025) == 64);
  CHECK(am::block_threads(32000) == 1024);
  CHECK(am::block_threads(int64_t{1} << 20) == 1024);
}
