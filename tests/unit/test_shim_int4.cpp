// aoti_torch_cuda__weight_int4pack_mm argument validation, on CPU tensors (no GPU needed):
// every malformed operand fails with AOTI_TORCH_FAILURE and a message naming it, nothing is
// allocated, nothing crashes; well-formed CPU operands are refused for not being on CUDA.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

// A well-formed problem: M = 4, K = 256, N = 16, innerKTiles = 8, group 128.
struct Operands {
  OwnedTensor x = empty({4, 256}, {}, kBF16);
  OwnedTensor w = empty({2, 2, 32, 4}, {}, kI32);
  OwnedTensor sz = empty({2, 16, 2}, {}, kBF16);
  int64_t group = 128;
};

// Calls the op, expects failure with `needle` in the message and no output handle.
void expect_failure(AtenTensorHandle x, AtenTensorHandle w, int64_t group, AtenTensorHandle sz,
                    const std::string& needle) {
  aoti_cuda_shim_clear_error();
  const int64_t live = aoti_cuda_shim_live_handles();
  AtenTensorHandle out = reinterpret_cast<AtenTensorHandle>(0x1);
  AOTITorchError rc = aoti_torch_cuda__weight_int4pack_mm(x, w, group, sz, &out);
  CHECK(rc == AOTI_TORCH_FAILURE);
  CHECK(out == nullptr);
  CHECK(aoti_cuda_shim_live_handles() == live);
  INFO("message: " << aoti_cuda_shim_last_error());
  CHECK(last_error_contains("aoti_torch_cuda__weight_int4pack_mm: "));
  CHECK(last_error_contains(needle));
}

}  // namespace

TEST_CASE("int4pack_mm: well-formed CPU operands are refused for not being on a CUDA device") {
  Operands o;
  expect_failure(o.x.get(), o.w.get(), o.group, o.sz.get(), "self (activations) must be a CUDA tensor");
}

TEST_CASE("int4pack_mm: null and undefined handles, null ret0") {
  Operands o;
  expect_failure(nullptr, o.w.get(), o.group, o.sz.get(), "self");
  expect_failure(o.x.get(), nullptr, o.group, o.sz.get(), "mat2");
  expect_failure(o.x.get(), o.w.get(), o.group, nullptr, "qScaleAndZeros");
  OwnedTensor undefined;
  REQUIRE(aoti_torch_new_uninitialized_tensor(undefined.out()) == AOTI_TORCH_SUCCESS);
  expect_failure(o.x.get(), undefined.get(), o.group, o.sz.get(), "mat2");
  CHECK(aoti_torch_cuda__weight_int4pack_mm(o.x.get(), o.w.get(), o.group, o.sz.get(), nullptr) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret0 is null"));
}

TEST_CASE("int4pack_mm: dtypes, ranks and contiguity") {
  Operands o;
  OwnedTensor x_f32 = empty({4, 256}, {}, kF32);
  expect_failure(x_f32.get(), o.w.get(), o.group, o.sz.get(), "self (activations) must be bfloat16, got float32");
  OwnedTensor x_3d = empty({1, 4, 256}, {}, kBF16);
  expect_failure(x_3d.get(), o.w.get(), o.group, o.sz.get(), "self (activations) must be 2-d, got 3-d");
  OwnedTensor x_t = empty({4, 256}, {1, 4}, kBF16);
  expect_failure(x_t.get(), o.w.get(), o.group, o.sz.get(), "self (activations) must be contiguous");
  OwnedTensor w_bf16 = empty({2, 2, 32, 4}, {}, kBF16);
  expect_failure(o.x.get(), w_bf16.get(), o.group, o.sz.get(), "mat2 (packed int4 weight) must be int32");
  OwnedTensor w_2d = empty({16, 128}, {}, kI32);
  expect_failure(o.x.get(), w_2d.get(), o.group, o.sz.get(), "mat2 (packed int4 weight) must be 4-d, got 2-d");
  OwnedTensor sz_f32 = empty({2, 16, 2}, {}, kF32);
  expect_failure(o.x.get(), o.w.get(), o.group, sz_f32.get(), "qScaleAndZeros must be bfloat16");
}

TEST_CASE("int4pack_mm: packed weight shape, innerKTiles, K and group size") {
  Operands o;
  OwnedTensor w_lanes = empty({2, 2, 16, 4}, {}, kI32);
  expect_failure(o.x.get(), w_lanes.get(), o.group, o.sz.get(), "innerKTiles 2, 4 or 8, got [2, 2, 16, 4]");
  OwnedTensor w_ikt = empty({2, 2, 32, 3}, {}, kI32);
  expect_failure(o.x.get(), w_ikt.get(), o.group, o.sz.get(), "innerKTiles 2, 4 or 8");
  OwnedTensor w_k = empty({2, 3, 32, 4}, {}, kI32);  // packs K = 384, self has 256
  expect_failure(o.x.get(), w_k.get(), o.group, o.sz.get(), "self has K = 256 but mat2 [2, 3, 32, 4] packs K = 384");
  OwnedTensor x_k = empty({4, 200}, {}, kBF16);  // not a multiple of 128
  expect_failure(x_k.get(), o.w.get(), o.group, o.sz.get(), "self has K = 200");
  for (int64_t bad : {0, 16, 48, 100, 512, -128}) {
    expect_failure(o.x.get(), o.w.get(), bad, o.sz.get(),
                   "qGroupSize must be 32, 64, 128 or 256, got " + std::to_string(bad));
  }
  OwnedTensor x_small = empty({4, 128}, {}, kBF16);
  OwnedTensor w_small = empty({2, 1, 32, 4}, {}, kI32);
  OwnedTensor sz_small = empty({1, 16, 2}, {}, kBF16);
  expect_failure(x_small.get(), w_small.get(), 256, sz_small.get(), "K = 128 is not a multiple of qGroupSize 256");
}

TEST_CASE("int4pack_mm: scale/zero tensor shape") {
  Operands o;
  OwnedTensor sz_groups = empty({4, 16, 2}, {}, kBF16);  // K/group is 2
  expect_failure(o.x.get(), o.w.get(), o.group, sz_groups.get(), "must be [K/qGroupSize, N, 2] = [2, 16, 2], got [4, 16, 2]");
  OwnedTensor sz_n = empty({2, 8, 2}, {}, kBF16);
  expect_failure(o.x.get(), o.w.get(), o.group, sz_n.get(), "got [2, 8, 2]");
  OwnedTensor sz_last = empty({2, 16, 1}, {}, kBF16);
  expect_failure(o.x.get(), o.w.get(), o.group, sz_last.get(), "got [2, 16, 1]");
  OwnedTensor sz_2d = empty({2, 32}, {}, kBF16);
  expect_failure(o.x.get(), o.w.get(), o.group, sz_2d.get(), "qScaleAndZeros must be 3-d, got 2-d");
}
