// aoti_torch_cuda_aoti_cuda_fused_linear on the GPU (work in progress: written before its first GPU run), against
// a host reference that rounds where the model rounds (the SwiGLU's silu and product, the RMSNorm's scaled value and
// its product with the weight, the projection, the residual add) with float64 sums: bf16 and fp16, the 1.1 B model's
// decode shapes (the q/k/v projection after the attention norm, the output projection plus the residual, gate + up
// after the FFN norm, the down projection after SwiGLU plus the residual), N not a multiple of the block's columns,
// several rows. Without a GPU every case skips.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::from16;
using aoti_cuda_test::OwnedTensor;
using aoti_cuda_test::to16;

namespace {

constexpr int32_t kBF16 = 15;
constexpr int32_t kF16 = 5;
constexpr int32_t kCUDA = 1;

struct Host {
  std::vector<uint16_t> bits;
  OwnedTensor device;
};

Host make(std::mt19937& rng, const std::vector<int64_t>& sizes, bool fp16, float scale = 1.f) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::normal_distribution<float> dist(0.f, scale);
  Host h;
  h.bits.resize(static_cast<std::size_t>(n));
  for (uint16_t& b : h.bits) b = to16(dist(rng), fp16);
  h.device = empty(sizes, {}, fp16 ? kF16 : kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpy(h.device.data(), h.bits.data(), h.bits.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  return h;
}

float round16(double v, bool fp16) { return from16(to16(static_cast<float>(v), fp16), fp16); }

struct Case {
  bool fp16;
  int64_t rows, k, n;
  bool norm, swiglu, residual;
};

void check_case(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t width = c.swiglu ? 2 * c.k : c.k;
  Host x = make(rng, {c.rows, 1, width}, c.fp16);
  Host w = make(rng, {c.n, c.k}, c.fp16, 1.f / std::sqrt(static_cast<float>(c.k)));
  Host norm = make(rng, {c.k}, c.fp16);
  Host res = make(rng, {c.rows, 1, c.n}, c.fp16);
  const double eps = 1e-5;
  AtenTensorHandle nh = norm.device.get(), rh = res.device.get();
  OwnedTensor out;
  const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_fused_linear(
      x.device.get(), c.norm ? &nh : nullptr, eps, c.swiglu ? 1 : 0, w.device.get(), c.residual ? &rh : nullptr,
      out.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<uint16_t> got(static_cast<std::size_t>(c.rows * c.n));
  REQUIRE(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);

  double worst = 0;
  std::vector<float> a(static_cast<std::size_t>(c.k));
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t i = 0; i < c.k; ++i) {
      float v = from16(x.bits[r * width + i], c.fp16);
      if (c.swiglu) {
        const float silu = round16(v / (1.0 + std::exp(-static_cast<double>(v))), c.fp16);
        v = round16(static_cast<double>(silu) * from16(x.bits[r * width + c.k + i], c.fp16), c.fp16);
      }
      a[i] = v;
    }
    if (c.norm) {
      double squares = 0;
      for (float v : a) squares += static_cast<double>(v) * v;
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(c.k) + eps);
      for (int64_t i = 0; i < c.k; ++i) a[i] = round16(round16(a[i] * inv, c.fp16) * from16(norm.bits[i], c.fp16), c.fp16);
    }
    for (int64_t col = 0; col < c.n; ++col) {
      double sum = 0;
      for (int64_t i = 0; i < c.k; ++i) sum += static_cast<double>(a[i]) * from16(w.bits[col * c.k + i], c.fp16);
      double want = round16(sum, c.fp16);
      double magnitude = std::max(std::fabs(want), std::fabs(sum));
      if (c.residual) {
        const double residual = from16(res.bits[r * c.n + col], c.fp16);
        want = round16(residual + want, c.fp16);
        magnitude = std::max({magnitude, std::fabs(residual), std::fabs(want)});
      }
      const double g = from16(got[r * c.n + col], c.fp16);
      // Roundings that may land one ulp apart (float32 sums in another order, the activation's own roundings when
      // the norm's scale differs in its last bit), of the largest value the result passed through: 4 ulps of it
      // plus an absolute floor.
      const double ulp = std::ldexp(std::max(magnitude, 1e-3), c.fp16 ? -10 : -7);
      worst = std::max(worst, std::isfinite(g) ? std::fabs(g - want) / (4 * ulp + 1e-3) : INFINITY);
    }
  }
  CAPTURE(c.fp16);
  CAPTURE(c.rows);
  CAPTURE(c.k);
  CAPTURE(c.n);
  CAPTURE(c.norm);
  CAPTURE(c.swiglu);
  CAPTURE(c.residual);
  CHECK(worst < 1.0);
}

}  // namespace

TEST_CASE("gpu: fused linear against the model's rounding (norm, SwiGLU, residual; decode shapes)" *
          AOTI_CUDA_GPU_CASE) {
  uint32_t seed = 11;
  for (bool fp16 : {false, true}) {
    check_case({fp16, 1, 2048, 3072, true, false, false}, seed++);   // attention norm + q/k/v projection
    check_case({fp16, 1, 2048, 2048, false, false, true}, seed++);   // output projection + residual
    check_case({fp16, 1, 2048, 11264, true, false, false}, seed++);  // FFN norm + gate/up
    check_case({fp16, 1, 5632, 2048, false, true, true}, seed++);    // SwiGLU + down projection + residual
    check_case({fp16, 1, 2048, 37, true, true, true}, seed++);       // everything, N not a multiple of 8
    check_case({fp16, 3, 256, 40, true, false, true}, seed++);       // several rows
    check_case({fp16, 2, 8, 8, false, false, false}, seed++);        // the smallest K
  }
}
