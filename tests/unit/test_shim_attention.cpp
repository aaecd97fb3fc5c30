// aoti_torch_cuda__scaled_dot_product_flash_attention argument validation, on CPU tensors (no
// GPU needed): every malformed call fails with AOTI_TORCH_FAILURE and a message naming the
// problem, leaves no handle behind and writes no output; well-formed CPU operands are refused
// for not being on CUDA. The kernel's results are checked on the GPU (tests/gpu/test_attention.cpp).
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

struct Call {
  double dropout_p = 0.0;
  int32_t is_causal = 1;
  int32_t debug_mask = 0;
};

// Calls the op with every output asked for; expects failure with `needle` in the message.
void expect_failure(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v, const std::string& needle,
                    Call c = {}) {
  aoti_cuda_shim_clear_error();
  const int64_t live = aoti_cuda_shim_live_handles();
  AtenTensorHandle out[7];
  for (AtenTensorHandle& h : out) h = reinterpret_cast<AtenTensorHandle>(0x1);
  int64_t max_q = -7, max_k = -7;
  AOTITorchError rc = aoti_torch_cuda__scaled_dot_product_flash_attention(
      q, k, v, c.dropout_p, c.is_causal, c.debug_mask, nullptr, &out[0], &out[1], &out[2], &out[3], &max_q, &max_k,
      &out[4], &out[5], &out[6]);
  CHECK(rc == AOTI_TORCH_FAILURE);
  CHECK(out[0] == nullptr);  // ret0 is reset first; the rest are left alone on failure
  for (int i = 1; i < 7; ++i) CHECK(out[i] == reinterpret_cast<AtenTensorHandle>(0x1));
  CHECK(max_q == -7);
  CHECK(max_k == -7);
  CHECK(aoti_cuda_shim_live_handles() == live);
  INFO("message: " << aoti_cuda_shim_last_error());
  CHECK(last_error_contains("aoti_torch_cuda__scaled_dot_product_flash_attention: "));
  CHECK(last_error_contains(needle));
}

// [1, 4, 32, 64] queries over [1, 2, 32, 64] keys and values (grouped-query attention).
struct Operands {
  OwnedTensor q = empty({1, 4, 32, 64}, {}, kBF16);
  OwnedTensor k = empty({1, 2, 32, 64}, {}, kBF16);
  OwnedTensor v = empty({1, 2, 32, 64}, {}, kBF16);
};

}  // namespace

TEST_CASE("flash attention: well-formed CPU operands are refused for not being on a CUDA device") {
  Operands o;
  expect_failure(o.q.get(), o.k.get(), o.v.get(), "query must be a CUDA tensor");
  // A transposed ([B, L, H, D] storage) query is well-formed too.
  OwnedTensor q_t = empty({1, 4, 32, 64}, {8192, 64, 256, 1}, kBF16);
  expect_failure(q_t.get(), o.k.get(), o.v.get(), "query must be a CUDA tensor");
}

TEST_CASE("flash attention: null and undefined handles, null ret0") {
  Operands o;
  expect_failure(nullptr, o.k.get(), o.v.get(), "query");
  expect_failure(o.q.get(), nullptr, o.v.get(), "key");
  OwnedTensor undefined;
  REQUIRE(aoti_torch_new_uninitialized_tensor(undefined.out()) == AOTI_TORCH_SUCCESS);
  expect_failure(o.q.get(), o.k.get(), undefined.get(), "value");
  CHECK(aoti_torch_cuda__scaled_dot_product_flash_attention(o.q.get(), o.k.get(), o.v.get(), 0.0, 0, 0, nullptr,
                                                            nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                            nullptr, nullptr, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret0 (the attention output) is null"));
}

TEST_CASE("flash attention: dtypes, ranks, strides and shapes") {
  Operands o;
  OwnedTensor q_f32 = empty({1, 4, 32, 64}, {}, kF32);
  expect_failure(q_f32.get(), o.k.get(), o.v.get(), "query must be bfloat16 or float16");
  OwnedTensor k_f16 = empty({1, 2, 32, 64}, {}, kF16);
  expect_failure(o.q.get(), k_f16.get(), o.v.get(), "query, key and value must have one dtype");
  OwnedTensor q_3d = empty({4, 32, 64}, {}, kBF16);
  expect_failure(q_3d.get(), o.k.get(), o.v.get(), "query must be 4-d [batch, heads, sequence, head_dim]");
  OwnedTensor v_strided = empty({1, 2, 32, 64}, {4096, 1, 128, 32}, kBF16);
  expect_failure(o.q.get(), o.k.get(), v_strided.get(), "value must have a unit-stride last dimension");
  OwnedTensor v_short = empty({1, 2, 31, 64}, {}, kBF16);
  expect_failure(o.q.get(), o.k.get(), v_short.get(), "key and value must be [batch, kv_heads, kv_len, head_dim]");
  OwnedTensor k_3heads = empty({1, 3, 32, 64}, {}, kBF16);
  OwnedTensor v_3heads = empty({1, 3, 32, 64}, {}, kBF16);
  expect_failure(o.q.get(), k_3heads.get(), v_3heads.get(),
                 "query heads (4) must be a multiple of key/value heads (3)");
  OwnedTensor q96 = empty({1, 4, 32, 96}, {}, kBF16);
  OwnedTensor k96 = empty({1, 2, 32, 96}, {}, kBF16);
  OwnedTensor v96 = empty({1, 2, 32, 96}, {}, kBF16);
  expect_failure(q96.get(), k96.get(), v96.get(), "head_dim 96 is not supported");
}

TEST_CASE("flash attention: training-only options and non-square causal masks are refused") {
  Operands o;
  Call dropout;
  dropout.dropout_p = 0.1;
  expect_failure(o.q.get(), o.k.get(), o.v.get(), "dropout_p must be 0 (inference)", dropout);
  Call debug;
  debug.debug_mask = 1;
  expect_failure(o.q.get(), o.k.get(), o.v.get(), "return_debug_mask is not supported", debug);
  OwnedTensor k_long = empty({1, 2, 48, 64}, {}, kBF16);
  OwnedTensor v_long = empty({1, 2, 48, 64}, {}, kBF16);
  expect_failure(o.q.get(), k_long.get(), v_long.get(), "is_causal with query length 32 != key length 48");
  Call not_causal;
  not_causal.is_causal = 0;  // the same shapes without the mask are fine (then refused for the CPU)
  expect_failure(o.q.get(), k_long.get(), v_long.get(), "query must be a CUDA tensor", not_causal);
}
