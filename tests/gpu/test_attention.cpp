// aoti_torch_cuda__scaled_dot_product_flash_attention on the GPU, against a float64 host
// reference of softmax(scale * q.k^T [+ causal mask]) . v: both dtypes and head dimensions,
// grouped-query attention, causal and not, lengths that are not multiples of the tiles,
// query laid out [B, L, H, D] (as a prefill's transposed projections are), the output's
// layout, logsumexp, the sequence-length outputs, and outputs not asked for.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/ops/flash_attention.hpp"
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::from16;
using aoti_cuda_test::to16;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

struct Case {
  const char* name;
  bool fp16;
  int64_t batch, heads, kv_heads, q_len, kv_len, dim;
  bool causal;
  bool query_transposed;  // query stored [B, L, H, D], viewed as [B, H, L, D]
  double scale;           // <= 0: the default 1/sqrt(D)
};

// A [B, H, L, D] tensor of random 16-bit values; `transposed` stores it [B, L, H, D].
struct Operand {
  std::vector<uint16_t> host;
  std::vector<int64_t> sizes, strides;
  OwnedTensor device;
  float at(int64_t b, int64_t h, int64_t i, int64_t d, bool fp16) const {
    return from16(host[b * strides[0] + h * strides[1] + i * strides[2] + d * strides[3]], fp16);
  }
};

Operand make_operand(std::mt19937& rng, int64_t b, int64_t h, int64_t l, int64_t d, bool fp16, bool transposed) {
  Operand o;
  o.sizes = {b, h, l, d};
  o.strides = transposed ? std::vector<int64_t>{l * h * d, d, h * d, 1} : std::vector<int64_t>{h * l * d, l * d, d, 1};
  std::normal_distribution<float> dist(0.f, 1.f);
  o.host.resize(static_cast<std::size_t>(b * h * l * d));
  for (uint16_t& x : o.host) x = to16(dist(rng), fp16);
  o.device = empty(o.sizes, o.strides, fp16 ? kF16 : kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpy(o.device.data(), o.host.data(), o.host.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  return o;
}

std::vector<int64_t> tensor_strides(AtenTensorHandle t) {
  int64_t* s = nullptr;
  int64_t n = 0;
  REQUIRE(aoti_torch_get_strides(t, &s) == AOTI_TORCH_SUCCESS);
  REQUIRE(aoti_torch_get_dim(t, &n) == AOTI_TORCH_SUCCESS);
  return std::vector<int64_t>(s, s + n);
}

void check_case(const Case& c) {
  CAPTURE(c.name);
  std::mt19937 rng(1234);
  Operand q = make_operand(rng, c.batch, c.heads, c.q_len, c.dim, c.fp16, c.query_transposed);
  Operand k = make_operand(rng, c.batch, c.kv_heads, c.kv_len, c.dim, c.fp16, false);
  Operand v = make_operand(rng, c.batch, c.kv_heads, c.kv_len, c.dim, c.fp16, false);
  double scale = c.scale;
  OwnedTensor out, lse, cum_q, seed;
  int64_t max_q = -1, max_k = -1;
  REQUIRE(aoti_torch_cuda__scaled_dot_product_flash_attention(
              q.device.get(), k.device.get(), v.device.get(), 0.0, c.causal ? 1 : 0, 0, c.scale > 0 ? &scale : nullptr,
              out.out(), lse.out(), cum_q.out(), nullptr, &max_q, &max_k, seed.out(), nullptr, nullptr) ==
          AOTI_TORCH_SUCCESS);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(max_q == c.q_len);
  CHECK(max_k == c.kv_len);
  CHECK(tensor_strides(out.get()) == q.strides);  // laid out like query (PyTorch's empty_like)
  CHECK(tensor_strides(lse.get()) == std::vector<int64_t>{c.heads * c.q_len, c.q_len, 1});
  int64_t numel = -1;
  REQUIRE(aoti_torch_get_numel(cum_q.get(), &numel) == AOTI_TORCH_SUCCESS);
  CHECK(numel == 0);
  REQUIRE(aoti_torch_get_numel(seed.get(), &numel) == AOTI_TORCH_SUCCESS);
  CHECK(numel == 0);

  std::vector<uint16_t> got(q.host.size());
  std::vector<float> got_lse(static_cast<std::size_t>(c.batch * c.heads * c.q_len));
  REQUIRE(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(got_lse.data(), lse.data(), got_lse.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  const double s = c.scale > 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.dim));
  double worst = 0, worst_lse = 0;
  std::vector<double> p(static_cast<std::size_t>(c.kv_len));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kh = h / (c.heads / c.kv_heads);
      for (int64_t i = 0; i < c.q_len; ++i) {
        const int64_t visible = c.causal ? i + 1 : c.kv_len;
        double mx = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.dim; ++d) dot += double(q.at(b, h, i, d, c.fp16)) * k.at(b, kh, j, d, c.fp16);
          p[j] = dot * s;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) sum += (p[j] = std::exp(p[j] - mx));
        worst_lse = std::max(worst_lse, std::fabs(mx + std::log(sum) - got_lse[(b * c.heads + h) * c.q_len + i]));
        for (int64_t d = 0; d < c.dim; ++d) {
          double ref = 0;
          for (int64_t j = 0; j < visible; ++j) ref += p[j] * v.at(b, kh, j, d, c.fp16);
          ref /= sum;
          const uint16_t bits = got[b * q.strides[0] + h * q.strides[1] + i * q.strides[2] + d];
          worst = std::max(worst, std::fabs(ref - from16(bits, c.fp16)));
        }
      }
    }
  }
  // Outputs are averages of N(0, 1) values: |out| <= ~4. bf16 keeps 8 bits: one rounding of
  // the probabilities and of the output is ~2^-8 relative; fp16 ~2^-11.
  const double tolerance = c.fp16 ? 4e-3 : 2.5e-2;
  MESSAGE(c.name << ": max |error| " << worst << " (tolerance " << tolerance << "), logsumexp " << worst_lse);
  CHECK(worst < tolerance);
  CHECK(worst_lse < 1e-3);
}

}  // namespace

TEST_CASE("gpu: flash attention matches a float64 reference" * AOTI_CUDA_GPU_CASE) {
  const Case cases[] = {
      {"bf16 D128 GQA causal, transposed query, L=200", false, 1, 4, 2, 200, 200, 128, true, true, 0},
      {"fp16 D64 non-causal, L=70 over S=130, scale 0.3", true, 2, 2, 2, 70, 130, 64, false, false, 0.3},
      {"bf16 D64 causal, L=1", false, 1, 3, 1, 1, 1, 64, true, false, 0},
      {"bf16 D128 prefill-like: 16 heads over 4, causal, L=512", false, 1, 16, 4, 512, 512, 128, true, true, 0},
      {"fp16 D128 causal, L=33, batch 3", true, 3, 2, 2, 33, 33, 128, true, false, 0},
  };
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("gpu: flash attention queued on the thread's current stream, outputs not asked for not made" *
          AOTI_CUDA_GPU_CASE) {
  // On the current stream: a host callback that sleeps, then zeroing q. Run there, the kernel
  // sees q = 0, so each causal row i is the plain mean of v[0..i]; run anywhere else, it would
  // read the random q before the zeroing.
  std::mt19937 rng(7);
  Operand q = make_operand(rng, 1, 2, 64, 64, false, false);
  Operand k = make_operand(rng, 1, 2, 64, 64, false, false);
  Operand v = make_operand(rng, 1, 2, 64, 64, false, false);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  void* previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous) == 0);
  {  // the output (made on `stream`) is freed, stream-ordered, before the stream is destroyed
    auto sleep_50ms = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };
    REQUIRE(cudaLaunchHostFunc(stream, sleep_50ms, nullptr) == cudaSuccess);
    REQUIRE(cudaMemsetAsync(q.device.data(), 0, q.host.size() * 2, stream) == cudaSuccess);
    const int64_t live = aoti_cuda_shim_live_handles();
    OwnedTensor out;
    REQUIRE(aoti_torch_cuda__scaled_dot_product_flash_attention(q.device.get(), k.device.get(), v.device.get(), 0.0, 1,
                                                                0, nullptr, out.out(), nullptr, nullptr, nullptr,
                                                                nullptr, nullptr, nullptr, nullptr, nullptr) ==
            AOTI_TORCH_SUCCESS);
    CHECK(aoti_cuda_shim_live_handles() == live + 1);  // the output only
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    std::vector<uint16_t> got(q.host.size());
    REQUIRE(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    double worst = 0;
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < 64; ++i) {
        for (int64_t d = 0; d < 64; ++d) {
          double mean = 0;
          for (int64_t j = 0; j <= i; ++j) mean += v.at(0, h, j, d, false);
          mean /= static_cast<double>(i + 1);
          worst = std::max(worst, std::fabs(mean - from16(got[(h * 64 + i) * 64 + d], false)));
        }
      }
  }
  MESSAGE("zeroed queries on the current stream: max |error| " << worst);
  CHECK(worst < 2e-2);
  }
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("gpu: flash attention gives bit-identical results with every block size and pipeline depth" * AOTI_CUDA_GPU_CASE) {
  // Each warp walks the same key tiles in the same order whatever block or pipeline it is in.
  std::mt19937 rng(11);
  const int64_t len = 300, heads = 4, kv_heads = 2, dim = 128;
  Operand q = make_operand(rng, 1, heads, len, dim, false, true);
  Operand k = make_operand(rng, 1, kv_heads, len, dim, false, false);
  Operand v = make_operand(rng, 1, kv_heads, len, dim, false, false);
  std::vector<std::vector<uint16_t>> results;
  for (int variant = 0; variant < 6; ++variant) {
    const int rows = 64 >> (variant % 3), stages = variant < 3 ? 4 : 2;
    OwnedTensor out = empty(q.sizes, q.strides, kBF16, kCUDA, 0);
    aoti_cuda::shim::attention::Problem p;
    p.q = q.device.data();
    p.k = k.device.data();
    p.v = v.device.data();
    p.out = out.data();
    p.batch = 1;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.q_len = p.kv_len = len;
    p.head_dim = static_cast<int>(dim);
    for (int d = 0; d < 3; ++d) {
      p.q_stride[d] = p.out_stride[d] = q.strides[d];
      p.k_stride[d] = k.strides[d];
      p.v_stride[d] = v.strides[d];
    }
    p.scale = 0.088f;
    p.causal = true;
    REQUIRE(aoti_cuda::shim::attention::launch_rows(p, nullptr, rows, stages) == 0);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    results.emplace_back(q.host.size());
    REQUIRE(cudaMemcpy(results.back().data(), out.data(), q.host.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  for (std::size_t i = 1; i < results.size(); ++i) CHECK(results[0] == results[i]);
  CHECK(aoti_cuda::shim::attention::launch_rows(aoti_cuda::shim::attention::Problem{}, nullptr, 48) == 0);  // empty
}
