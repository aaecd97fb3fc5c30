// aoti_torch_cuda_aoti_cuda_decode_attention (and its _update form) argument validation, on CPU tensors (no GPU needed):
// every malformed call fails with AOTI_TORCH_FAILURE and a message naming the problem, leaves no
// handle behind and resets *ret0; well-formed CPU operands are refused for not being on CUDA.
// The kernel's results are checked on the GPU (tests/gpu/test_decode_attention.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::expect_refused;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

void expect_failure(AtenTensorHandle q, AtenTensorHandle k, AtenTensorHandle v, AtenTensorHandle pos,
                    const std::string& needle, double scale = 0.125) {
  expect_refused(
      "aoti_torch_cuda_aoti_cuda_decode_attention",
      [&](AtenTensorHandle* out) { return aoti_torch_cuda_aoti_cuda_decode_attention(q, k, v, pos, scale, out); },
      needle);
}

// One query row for each of 8 heads over a [1, 2, 128, 64] cache (grouped-query attention, g = 4).
struct Operands {
  OwnedTensor q = empty({1, 8, 1, 64}, {}, kBF16);
  OwnedTensor k = empty({1, 2, 128, 64}, {}, kBF16);
  OwnedTensor v = empty({1, 2, 128, 64}, {}, kBF16);
  OwnedTensor pos = empty({1}, {}, kI64);
};

}  // namespace

TEST_CASE("decode attention: well-formed CPU operands are refused for not being on a CUDA device") {
  Operands o;
  expect_failure(o.q.get(), o.k.get(), o.v.get(), o.pos.get(), "q must be a CUDA tensor");
  // A query taken from a [B, 1, H, D] projection (strided heads), a 0-d position, one position per
  // batch: all well-formed.
  OwnedTensor q_t = empty({1, 8, 1, 64}, {512, 64, 512, 1}, kBF16);
  expect_failure(q_t.get(), o.k.get(), o.v.get(), o.pos.get(), "q must be a CUDA tensor");
  OwnedTensor pos0 = empty({}, {}, kI64);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos0.get(), "q must be a CUDA tensor");
  OwnedTensor q2 = empty({2, 8, 1, 64}, {}, kBF16);
  OwnedTensor k2 = empty({2, 2, 128, 64}, {}, kBF16);
  OwnedTensor v2 = empty({2, 2, 128, 64}, {}, kBF16);
  OwnedTensor pos2 = empty({2}, {}, kI64);
  expect_failure(q2.get(), k2.get(), v2.get(), pos2.get(), "q must be a CUDA tensor");
  expect_failure(q2.get(), k2.get(), v2.get(), o.pos.get(), "q must be a CUDA tensor");  // [1]: shared
}

TEST_CASE("decode attention: null and undefined handles, null ret0") {
  Operands o;
  expect_failure(nullptr, o.k.get(), o.v.get(), o.pos.get(), "q");
  expect_failure(o.q.get(), nullptr, o.v.get(), o.pos.get(), "k_cache");
  expect_failure(o.q.get(), o.k.get(), nullptr, o.pos.get(), "v_cache");
  expect_failure(o.q.get(), o.k.get(), o.v.get(), nullptr, "input_pos");
  OwnedTensor undefined;
  REQUIRE(aoti_torch_new_uninitialized_tensor(undefined.out()) == AOTI_TORCH_SUCCESS);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), undefined.get(), "input_pos");
  aoti_cuda_shim_clear_error();
  CHECK(aoti_torch_cuda_aoti_cuda_decode_attention(o.q.get(), o.k.get(), o.v.get(), o.pos.get(), 0.125, nullptr) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret0 (the attention output) is null"));
}

TEST_CASE("decode attention: dtypes, ranks, strides and shapes of q and the caches") {
  Operands o;
  OwnedTensor q_f32 = empty({1, 8, 1, 64}, {}, kF32);
  expect_failure(q_f32.get(), o.k.get(), o.v.get(), o.pos.get(), "q must be bfloat16 or float16");
  OwnedTensor k_f16 = empty({1, 2, 128, 64}, {}, kF16);
  expect_failure(o.q.get(), k_f16.get(), o.v.get(), o.pos.get(), "q, k_cache and v_cache must have one dtype");
  OwnedTensor q_3d = empty({8, 1, 64}, {}, kBF16);
  expect_failure(q_3d.get(), o.k.get(), o.v.get(), o.pos.get(), "q must be 4-d [batch, heads, 1, head_dim]");
  OwnedTensor q_rows = empty({1, 8, 2, 64}, {}, kBF16);
  expect_failure(q_rows.get(), o.k.get(), o.v.get(), o.pos.get(), "q must hold one query row per head");
  OwnedTensor v_strided = empty({1, 2, 128, 64}, {16384, 1, 128, 2}, kBF16);
  expect_failure(o.q.get(), o.k.get(), v_strided.get(), o.pos.get(),
                 "v_cache must have a unit-stride last dimension");
  OwnedTensor v_short = empty({1, 2, 127, 64}, {}, kBF16);
  expect_failure(o.q.get(), o.k.get(), v_short.get(), o.pos.get(),
                 "k_cache and v_cache must both be [batch, kv_heads, cache_len, head_dim]");
  OwnedTensor k_batch2 = empty({2, 2, 128, 64}, {}, kBF16);
  OwnedTensor v_batch2 = empty({2, 2, 128, 64}, {}, kBF16);
  expect_failure(o.q.get(), k_batch2.get(), v_batch2.get(), o.pos.get(), "with q's batch and head_dim");
  OwnedTensor k3 = empty({1, 3, 128, 64}, {}, kBF16);
  OwnedTensor v3 = empty({1, 3, 128, 64}, {}, kBF16);
  expect_failure(o.q.get(), k3.get(), v3.get(), o.pos.get(), "query heads (8) must be a multiple of key/value heads (3)");
  OwnedTensor q96 = empty({1, 8, 1, 96}, {}, kBF16);
  OwnedTensor k96 = empty({1, 2, 128, 96}, {}, kBF16);
  OwnedTensor v96 = empty({1, 2, 128, 96}, {}, kBF16);
  expect_failure(q96.get(), k96.get(), v96.get(), o.pos.get(), "head_dim 96 is not supported");
}

TEST_CASE("decode attention: caches that cannot be read as 16-byte rows are refused") {
  Operands o;
  // Rows 68 elements apart (a padded cache): not a multiple of 8 elements.
  OwnedTensor k_pad = empty({1, 2, 128, 64}, {2 * 128 * 68, 128 * 68, 68, 1}, kBF16);
  expect_failure(o.q.get(), k_pad.get(), o.v.get(), o.pos.get(), "must be 16-byte aligned with strides");
  // A view one element into its storage: a misaligned base.
  OwnedTensor big = empty({1, 2, 129, 64}, {}, kBF16);
  OwnedTensor shifted;
  const int64_t sizes[4] = {1, 2, 128, 64}, strides[4] = {2 * 129 * 64, 129 * 64, 64, 1};
  REQUIRE(aoti_torch__reinterpret_tensor(big.get(), 4, sizes, strides, 1, shifted.out()) == AOTI_TORCH_SUCCESS);
  expect_failure(o.q.get(), o.k.get(), shifted.get(), o.pos.get(), "must be 16-byte aligned with strides");
}

TEST_CASE("decode attention: the position tensor and the scale") {
  Operands o;
  OwnedTensor pos_i32 = empty({1}, {}, kI32);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos_i32.get(), "input_pos must be int64");
  OwnedTensor pos_f32 = empty({1}, {}, kF32);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos_f32.get(), "input_pos must be int64");
  OwnedTensor pos3 = empty({3}, {}, kI64);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos3.get(), "input_pos must hold one position ([1], or [batch]");
  OwnedTensor pos_2d = empty({1, 1}, {}, kI64);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos_2d.get(), "input_pos must hold one position");
  OwnedTensor pos_empty = empty({0}, {}, kI64);
  expect_failure(o.q.get(), o.k.get(), o.v.get(), pos_empty.get(), "input_pos must hold one position");
  expect_failure(o.q.get(), o.k.get(), o.v.get(), o.pos.get(), "scale must be finite",
                 std::numeric_limits<double>::quiet_NaN());
  expect_failure(o.q.get(), o.k.get(), o.v.get(), o.pos.get(), "scale must be finite", INFINITY);
}

namespace {

void expect_update_failure(AtenTensorHandle q, AtenTensorHandle k_new, AtenTensorHandle v_new, AtenTensorHandle k,
                           AtenTensorHandle v, AtenTensorHandle pos, const std::string& needle) {
  expect_refused("aoti_torch_cuda_aoti_cuda_decode_attention_update", [&](AtenTensorHandle* out) {
    return aoti_torch_cuda_aoti_cuda_decode_attention_update(q, k_new, v_new, k, v, pos, 0.125, out);
  }, needle);
}

}  // namespace

TEST_CASE("decode attention, update form: the step's rows are checked like the caches, then the device") {
  Operands o;
  OwnedTensor k_new = empty({1, 2, 1, 64}, {}, kBF16);
  OwnedTensor v_new = empty({1, 2, 1, 64}, {}, kBF16);
  // Well-formed, including a step row taken from a [B, 1, Hkv, D] projection (strided heads): refused on the CPU.
  expect_update_failure(o.q.get(), k_new.get(), v_new.get(), o.k.get(), o.v.get(), o.pos.get(),
                        "q must be a CUDA tensor");
  OwnedTensor k_t = empty({1, 2, 1, 64}, {128, 64, 128, 1}, kBF16);
  expect_update_failure(o.q.get(), k_t.get(), v_new.get(), o.k.get(), o.v.get(), o.pos.get(), "q must be a CUDA tensor");
  expect_update_failure(o.q.get(), nullptr, v_new.get(), o.k.get(), o.v.get(), o.pos.get(), "k_new and v_new");
  expect_update_failure(o.q.get(), k_new.get(), nullptr, o.k.get(), o.v.get(), o.pos.get(), "k_new and v_new");
  OwnedTensor wide = empty({1, 2, 2, 64}, {}, kBF16);  // two rows: not one step
  expect_update_failure(o.q.get(), wide.get(), v_new.get(), o.k.get(), o.v.get(), o.pos.get(),
                        "k_new must be [batch, kv_heads, 1, head_dim] = [1, 2, 1, 64]");
  OwnedTensor heads = empty({1, 4, 1, 64}, {}, kBF16);  // the query's heads, not the caches'
  expect_update_failure(o.q.get(), k_new.get(), heads.get(), o.k.get(), o.v.get(), o.pos.get(),
                        "v_new must be [batch, kv_heads, 1, head_dim]");
  OwnedTensor half = empty({1, 2, 1, 64}, {}, kF16);
  expect_update_failure(o.q.get(), half.get(), v_new.get(), o.k.get(), o.v.get(), o.pos.get(),
                        "k_new must have the caches' dtype");
  OwnedTensor three_d = empty({1, 2, 64}, {}, kBF16);
  expect_update_failure(o.q.get(), three_d.get(), v_new.get(), o.k.get(), o.v.get(), o.pos.get(), "k_new must be 4-d");
  OwnedTensor odd = empty({1, 2, 1, 64}, {68, 4, 68, 1}, kBF16);  // head stride 4 elements: not 16-byte rows
  expect_update_failure(o.q.get(), k_new.get(), odd.get(), o.k.get(), o.v.get(), o.pos.get(),
                        "k_new and v_new must be 16-byte aligned");
  // The plain operator's checks still apply to the caches.
  OwnedTensor k32 = empty({1, 2, 128, 64}, {}, kF32);
  expect_update_failure(o.q.get(), k_new.get(), v_new.get(), k32.get(), o.v.get(), o.pos.get(), "k_cache must be");
}

namespace {

// The qkv form over the Operands' caches ([1, 2, 128, 64]) with 8 query heads: qkv [1, 1, (8 + 2 * 2) * 64].
void expect_qkv_failure(AtenTensorHandle qkv, AtenTensorHandle cos, AtenTensorHandle sin, AtenTensorHandle k,
                        AtenTensorHandle v, AtenTensorHandle pos, int64_t n_heads, const std::string& needle) {
  expect_refused("aoti_torch_cuda_aoti_cuda_decode_attention_qkv", [&](AtenTensorHandle* out) {
    return aoti_torch_cuda_aoti_cuda_decode_attention_qkv(qkv, cos, sin, k, v, pos, n_heads, 0.125, out);
  }, needle);
}

}  // namespace

TEST_CASE("decode attention, qkv form: the projection's output and the rotary tables are checked, then the device") {
  Operands o;
  OwnedTensor qkv = empty({1, 1, 768}, {}, kBF16);
  OwnedTensor cos = empty({128, 32}, {}, kF32);
  OwnedTensor sin = empty({128, 32}, {}, kF32);
  // Well-formed (also a table shorter than the cache: positions past it use its last row): refused on the CPU.
  expect_qkv_failure(qkv.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8, "qkv must be a CUDA tensor");
  OwnedTensor short_cos = empty({16, 32}, {}, kF32), short_sin = empty({16, 32}, {}, kF32);
  expect_qkv_failure(qkv.get(), short_cos.get(), short_sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv must be a CUDA tensor");
  expect_qkv_failure(nullptr, cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8, "qkv");
  expect_qkv_failure(qkv.get(), nullptr, sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8, "rope_cos");
  // The width must hold n_heads query heads and the caches' key and value heads.
  expect_qkv_failure(qkv.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 9,
                     "qkv's last dimension must be (n_heads + 2 * kv_heads) * head_dim = (9 + 2 * 2) * 64");
  expect_qkv_failure(qkv.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 0,
                     "qkv's last dimension must be");
  // 8 query heads over 2 KV heads is fine; 6 over 2 too, but not 7 (the width is checked first: 7 + 4 heads).
  OwnedTensor qkv7 = empty({1, 1, 704}, {}, kBF16);
  expect_qkv_failure(qkv7.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 7,
                     "must be a multiple of key/value heads");
  OwnedTensor two_tokens = empty({1, 2, 768}, {}, kBF16);
  expect_qkv_failure(two_tokens.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv must be the q/k/v projection's output for one token");
  OwnedTensor flat = empty({1, 768}, {}, kBF16);
  expect_qkv_failure(flat.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv must be the q/k/v projection's output for one token");
  OwnedTensor ints = empty({1, 1, 768}, {}, kI32);
  expect_qkv_failure(ints.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv must be bfloat16 or float16");
  OwnedTensor half = empty({1, 1, 768}, {}, kF16);
  expect_qkv_failure(half.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv, k_cache and v_cache must have one dtype");
  OwnedTensor strided = empty({1, 1, 768}, {1536, 1536, 2}, kBF16);
  expect_qkv_failure(strided.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "qkv must have a unit-stride last dimension");
  // Two sequences whose rows are 772 elements apart: the key and value rows cannot be read as 16-byte vectors.
  OwnedTensor k2 = empty({2, 2, 128, 64}, {}, kBF16), v2 = empty({2, 2, 128, 64}, {}, kBF16);
  OwnedTensor odd = empty({2, 1, 768}, {772, 772, 1}, kBF16);
  expect_qkv_failure(odd.get(), cos.get(), sin.get(), k2.get(), v2.get(), o.pos.get(), 8,
                     "qkv must be 16-byte aligned with a batch stride that is a multiple of 8 elements");
  // The tables: float32 [rows, head_dim / 2] with unit-stride rows, one shape for both.
  OwnedTensor bf_cos = empty({128, 32}, {}, kBF16);
  expect_qkv_failure(qkv.get(), bf_cos.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "rope_cos must be a float32 [rows, head_dim / 2] = [rows, 32] table with unit-stride rows");
  OwnedTensor full_sin = empty({128, 64}, {}, kF32);
  expect_qkv_failure(qkv.get(), cos.get(), full_sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "rope_sin must be a float32 [rows, head_dim / 2]");
  OwnedTensor column = empty({128, 32}, {1, 128}, kF32);
  expect_qkv_failure(qkv.get(), column.get(), sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "rope_cos must be a float32 [rows, head_dim / 2]");
  OwnedTensor empty_table = empty({0, 32}, {}, kF32);
  expect_qkv_failure(qkv.get(), empty_table.get(), empty_table.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "rope_cos must be a float32 [rows, head_dim / 2]");
  expect_qkv_failure(qkv.get(), cos.get(), short_sin.get(), o.k.get(), o.v.get(), o.pos.get(), 8,
                     "rope_cos and rope_sin must have one shape and layout");
  // The caches and the position are checked as in the other forms.
  OwnedTensor pos32 = empty({1}, {}, kI32);
  expect_qkv_failure(qkv.get(), cos.get(), sin.get(), o.k.get(), o.v.get(), pos32.get(), 8, "input_pos must be int64");
}
