// aoti_torch_cuda_aoti_cuda_fused_linear and its int4 form on the GPU, against a host reference that rounds where
// the model rounds (the RMSNorm's scaled value and its product with the weight, the projection, the SwiGLU's silu
// and product, the residual add) with float64 sums: bf16 and fp16 (int4: weights packed as torchao's
// tile_packed_to_4d, dequantized on the host), the 1.1 B model's decode shapes (the q/k/v projection after the
// attention norm, the output projection plus the residual, gate + up after the FFN norm with the SwiGLU, the down
// projection plus the residual, the output head), N not a multiple of the block's columns, several rows. Without a
// GPU every case skips.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/ops/fused_linear.hpp"
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/int4_packing.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::from16;
using aoti_cuda_test::OwnedTensor;
using aoti_cuda_test::to16;
using namespace aoti_cuda_test::codes;

namespace {

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

// The model's arithmetic on the host, float64 sums: rows of x [rows, k], the weight as weight(col, kk) for
// n_weight rows, each step rounded where the model rounds. Returns the worst |got - want| over its tolerance.
// norm_after: the kernels' other form of the norm (fused_linear.hpp, Problem::norm_after): each element times its
// norm weight rounded once, the sum scaled by the row's 1/rms.
template <typename Weight>
double worst_error(const std::vector<uint16_t>& x, int64_t rows, int64_t k, const std::vector<uint16_t>* norm,
                   double eps, int64_t n_weight, bool swiglu, const std::vector<uint16_t>* residual,
                   const std::vector<uint16_t>& got, bool fp16, bool norm_after, Weight weight) {
  const int64_t n_out = swiglu ? n_weight / 2 : n_weight;
  double worst = 0;
  std::vector<float> a(static_cast<std::size_t>(k));
  std::vector<double> y(static_cast<std::size_t>(n_weight)), y_sum(static_cast<std::size_t>(n_weight));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < k; ++i) a[i] = from16(x[r * k + i], fp16);
    double scale = 1;  // norm_after: the row's 1/rms, applied to the sums
    if (norm != nullptr) {
      double squares = 0;
      for (float v : a) squares += static_cast<double>(v) * v;
      const double inv = 1.0 / std::sqrt(squares / static_cast<double>(k) + eps);
      for (int64_t i = 0; i < k; ++i) {
        const float g = from16((*norm)[i], fp16);
        a[i] = norm_after ? round16(static_cast<double>(a[i]) * g, fp16) : round16(round16(a[i] * inv, fp16) * g, fp16);
      }
      if (norm_after) scale = inv;
    }
    for (int64_t col = 0; col < n_weight; ++col) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(a[i]) * weight(col, i);
      sum *= scale;
      y_sum[col] = sum;
      y[col] = round16(sum, fp16);
    }
    for (int64_t col = 0; col < n_out; ++col) {
      double want = y[col];
      double magnitude = std::max(std::fabs(want), std::fabs(y_sum[col]));
      if (swiglu) {
        const double gate = y[col], up = y[col + n_out];
        const double silu = round16(gate / (1.0 + std::exp(-gate)), fp16);
        want = round16(silu * up, fp16);
        // A gate or up one ulp off moves the product by about an ulp of each factor times the other.
        magnitude = std::max({std::fabs(want), std::fabs(silu * up), std::fabs(up) * std::max(1.0, std::fabs(gate)),
                              std::fabs(gate) * std::max(1.0, std::fabs(up))});
      }
      if (residual != nullptr) {
        const double res = from16((*residual)[r * n_out + col], fp16);
        want = round16(res + want, fp16);
        magnitude = std::max({magnitude, std::fabs(res), std::fabs(want)});
      }
      const double g = from16(got[r * n_out + col], fp16);
      // Roundings that may land one ulp apart (float32 sums in another order, the activation's own roundings when
      // the norm's scale differs in its last bit), of the largest value the result passed through: 4 ulps of it
      // plus an absolute floor.
      const double ulp = std::ldexp(std::max(magnitude, 1e-3), fp16 ? -10 : -7);
      worst = std::max(worst, std::isfinite(g) ? std::fabs(g - want) / (4 * ulp + 1e-3) : INFINITY);
    }
  }
  return worst;
}

std::vector<uint16_t> download(const OwnedTensor& t, std::size_t count) {
  std::vector<uint16_t> bits(count);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(bits.data(), t.data(), count * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  return bits;
}

struct Case {
  bool fp16;
  int64_t rows, k, n;  // n: the weight's rows (the output has n / 2 columns with swiglu)
  bool norm, swiglu, residual;
};

void check_case(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n_out = c.swiglu ? c.n / 2 : c.n;
  Host x = make(rng, {c.rows, 1, c.k}, c.fp16);
  Host w = make(rng, {c.n, c.k}, c.fp16, 1.f / std::sqrt(static_cast<float>(c.k)));
  Host norm = make(rng, {c.k}, c.fp16);
  Host res = make(rng, {c.rows, 1, n_out}, c.fp16);
  const double eps = 1e-5;
  AtenTensorHandle nh = norm.device.get(), rh = res.device.get();
  OwnedTensor out;
  const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_fused_linear(
      x.device.get(), c.norm ? &nh : nullptr, eps, c.swiglu ? 1 : 0, w.device.get(), c.residual ? &rh : nullptr,
      out.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  CHECK(out.sizes() == std::vector<int64_t>{c.rows, 1, n_out});
  namespace fl = aoti_cuda::shim::fused_linear;
  const std::vector<uint16_t> got = download(out, static_cast<std::size_t>(c.rows * n_out));
  auto worst_of = [&](const std::vector<uint16_t>& result, bool norm_after) {
    return worst_error(x.bits, c.rows, c.k, c.norm ? &norm.bits : nullptr, eps, c.n, c.swiglu,
                       c.residual ? &res.bits : nullptr, result, c.fp16, norm_after,
                       [&](int64_t col, int64_t i) { return from16(w.bits[col * c.k + i], c.fp16); });
  };
  // The shim takes the norm's form AOTI_CUDA_NORM_AFTER chooses (bf16 only); the other form is launched directly.
  const bool shim_after = !c.fp16 && fl::norm_after_enabled();
  const double worst = worst_of(got, shim_after);
  double worst_other = 0;
  if (c.norm && !c.fp16) {
    fl::Problem p;
    p.x = x.device.data();
    p.x_row_stride = c.k;
    p.norm_weight = norm.device.data();
    p.eps = static_cast<float>(eps);
    p.swiglu = c.swiglu;
    p.weight = w.device.data();
    p.weight_row_stride = c.k;
    p.residual = c.residual ? res.device.data() : nullptr;
    p.residual_row_stride = n_out;
    OwnedTensor other = empty({c.rows, 1, n_out}, {}, kBF16, kCUDA, 0);
    p.out = other.data();
    p.rows = c.rows;
    p.n = c.n;
    p.k = c.k;
    p.norm_after = !shim_after;
    int sm_count = 0;
    REQUIRE(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    REQUIRE(fl::launch(p, nullptr, sm_count) == 0);
    worst_other = worst_of(download(other, static_cast<std::size_t>(c.rows * n_out)), !shim_after);
  }
  CAPTURE(shim_after);
  CAPTURE(c.fp16);
  CAPTURE(c.rows);
  CAPTURE(c.k);
  CAPTURE(c.n);
  CAPTURE(c.norm);
  CAPTURE(c.swiglu);
  CAPTURE(c.residual);
  CHECK(worst < 1.0);
  CHECK(worst_other < 1.0);
}

struct Int4Case {
  int64_t rows, k_x, n;   // n: the weight's logical rows
  int64_t k, n_packed;    // as packed: K padded to a multiple of 16 * innerKTiles (and 1024 in torchao), N to 8
  int group, ikt;
  bool norm, swiglu, residual;
};

void check_int4_case(const Int4Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n_out = c.swiglu ? c.n / 2 : c.n;
  Host x = make(rng, {c.rows, 1, c.k_x}, false);
  Host norm = make(rng, {c.k_x}, false);
  Host res = make(rng, {c.rows, 1, n_out}, false);
  const aoti_cuda_test::RandomWeights rw = aoti_cuda_test::random_weights(c.n_packed, c.k, c.group, rng);
  OwnedTensor qdata = empty({c.n_packed / 8, c.k / (16 * c.ikt), 32, c.ikt / 2}, {}, kI32, kCUDA, 0);
  const std::vector<int32_t> packed = aoti_cuda_test::pack(rw.q, c.n_packed, c.k, c.ikt);
  REQUIRE(cudaMemcpy(qdata.data(), packed.data(), packed.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  OwnedTensor sz = empty({c.k / c.group, c.n_packed, 2}, {}, kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpy(sz.data(), rw.sz.data(), rw.sz.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // pageable copies land before the kernel's stream reads them
  const double eps = 1e-5;
  AtenTensorHandle nh = norm.device.get(), rh = res.device.get();
  OwnedTensor out;
  const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_fused_linear_int4(
      x.device.get(), c.norm ? &nh : nullptr, eps, c.swiglu ? 1 : 0, qdata.get(), sz.get(), c.group, c.n,
      c.residual ? &rh : nullptr, out.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  CHECK(out.sizes() == std::vector<int64_t>{c.rows, 1, n_out});
  const std::vector<uint16_t> got = download(out, static_cast<std::size_t>(c.rows * n_out));
  // Past x's K the activation is zero, so the padded weights do not count. The kernels multiply by the weights
  // rounded to bf16 (dequantize-first form) or unrounded (scale-after form, weight_int4pack_gemv.cu): the whole
  // output is held to the one of the two references it is closer to.
  // The norm's form: AOTI_CUDA_NORM_AFTER's for the shim, the other one for the direct launch below.
  namespace fl = aoti_cuda::shim::fused_linear;
  const bool shim_after = fl::norm_after_enabled();
  auto worst_of = [&](const std::vector<uint16_t>& result, bool norm_after) {
    const std::vector<uint16_t>* norm_bits = c.norm ? &norm.bits : nullptr;
    const std::vector<uint16_t>* res_bits = c.residual ? &res.bits : nullptr;
    const double rounded = worst_error(x.bits, c.rows, c.k_x, norm_bits, eps, c.n, c.swiglu, res_bits, result, false,
                                       norm_after, [&](int64_t col, int64_t i) {
                                         return aoti_cuda_test::weight_at(rw, c.n_packed, c.k, c.group, col, i);
                                       });
    const double exact = worst_error(x.bits, c.rows, c.k_x, norm_bits, eps, c.n, c.swiglu, res_bits, result, false,
                                     norm_after, [&](int64_t col, int64_t i) {
                                       return aoti_cuda_test::weight_exact(rw, c.n_packed, c.k, c.group, col, i);
                                     });
    return std::min(rounded, exact);
  };
  const double worst = worst_of(got, shim_after);
  CAPTURE(shim_after);
  CAPTURE(c.rows);
  CAPTURE(c.k_x);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.group);
  CAPTURE(c.ikt);
  CAPTURE(c.norm);
  CAPTURE(c.swiglu);
  CAPTURE(c.residual);
  CHECK(worst < 1.0);

  // The same call through the launcher with Int4Problem::small_blocks (AOTI_CUDA_INT4_FUSED_WARPS=8): blocks of at
  // most 8 warps without SwiGLU, which sum K in another order, and the norm's other form, so it is held to the
  // reference, not to `got`.
  OwnedTensor small_out = empty({c.rows, 1, n_out}, {}, kBF16, kCUDA, 0);
  fl::Int4Problem p;
  p.x = x.device.data();
  p.x_row_stride = c.k_x;
  p.k_x = c.k_x;
  p.norm_weight = c.norm ? norm.device.data() : nullptr;
  p.eps = static_cast<float>(eps);
  p.swiglu = c.swiglu;
  p.qdata = qdata.data();
  p.scale_and_zero = sz.data();
  p.k = c.k;
  p.n_packed = c.n_packed;
  p.group = c.group;
  p.inner_k_tiles = c.ikt;
  p.residual = c.residual ? res.device.data() : nullptr;
  p.residual_row_stride = n_out;
  p.out = small_out.data();
  p.rows = c.rows;
  p.n = c.n;
  p.small_blocks = true;
  // Nothing writes the weights or the norm weight here, so this call also takes the early loads the shim gives a
  // program's constants (the weights and the first norm vector requested before the dependent-launch wait).
  p.weights_early = true;
  p.norm_early = true;
  p.norm_after = !shim_after;
  REQUIRE(fl::launch_int4(p, nullptr) == 0);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<uint16_t> got_small = download(small_out, static_cast<std::size_t>(c.rows * n_out));
  const double worst_small = worst_of(got_small, !shim_after);
  CHECK(worst_small < 1.0);
}

}  // namespace

TEST_CASE("gpu: fused linear against the model's rounding (norm, SwiGLU, residual; decode shapes)" *
          AOTI_CUDA_GPU_CASE) {
  uint32_t seed = 11;
  for (bool fp16 : {false, true}) {
    check_case({fp16, 1, 2048, 3072, true, false, false}, seed++);   // attention norm + q/k/v projection
    check_case({fp16, 1, 2048, 2048, false, false, true}, seed++);   // output projection + residual
    check_case({fp16, 1, 2048, 11264, true, true, false}, seed++);   // FFN norm + gate/up + SwiGLU
    check_case({fp16, 1, 5632, 2048, false, false, true}, seed++);   // down projection + residual
    check_case({fp16, 1, 2048, 74, true, true, true}, seed++);       // everything, N/2 not a multiple of 8
    check_case({fp16, 3, 256, 40, true, false, true}, seed++);       // several rows
    check_case({fp16, 2, 8, 8, false, false, false}, seed++);        // the smallest K
    check_case({fp16, 1, 12032, 16, true, false, false}, seed++);    // the largest K
    // With a norm the grid is capped at one wave and a block loops over groups of columns: the head has far more
    // groups than fit at once, and with more rows than that each block takes every group of its row.
    check_case({fp16, 1, 2048, 32000, true, false, false}, seed++);  // final norm + output head
    check_case({fp16, 1200, 64, 264, true, false, true}, seed++);    // many rows, N not a multiple of 8 columns
  }
}

TEST_CASE("gpu: int4 fused linear against the model's rounding (torchao's packing, padded K and N)" *
          AOTI_CUDA_GPU_CASE) {
  uint32_t seed = 101;
  // The 1.1 B model's decode projections as torchao packs them (group 128, innerKTiles 8, K padded to 1024s).
  check_int4_case({1, 2048, 3072, 2048, 3072, 128, 8, true, false, false}, seed++);    // norm + q/k/v
  check_int4_case({1, 2048, 2048, 2048, 2048, 128, 8, false, false, true}, seed++);    // o + residual
  check_int4_case({1, 2048, 11264, 2048, 11264, 128, 8, true, true, false}, seed++);   // norm + gate/up + SwiGLU
  check_int4_case({1, 5632, 2048, 6144, 2048, 128, 8, false, false, true}, seed++);    // down (K padded) + residual
  check_int4_case({1, 2048, 32000, 2048, 32000, 128, 8, true, false, false}, seed++);  // norm + output head
  // Logical N below the packed N, several rows (one and two block rows of 8), every innerKTiles and group.
  check_int4_case({3, 1000, 44, 1024, 48, 128, 8, true, false, true}, seed++);
  check_int4_case({9, 512, 64, 512, 64, 32, 2, true, true, true}, seed++);
  check_int4_case({2, 256, 96, 256, 96, 64, 4, false, true, false}, seed++);
  check_int4_case({1, 4096, 256, 4096, 256, 256, 8, true, true, true}, seed++);       // K of 32 super-tiles
  // Groups smaller than a super-tile (16 * innerKTiles rows) take the dequantize-first form, the others the
  // scale-after form (weight_int4pack_gemv.cu, kScaleAfter): both, with and without SwiGLU, one row and several.
  check_int4_case({1, 2048, 2048, 2048, 2048, 64, 8, true, false, true}, seed++);
  check_int4_case({5, 1024, 128, 1024, 128, 32, 8, true, true, false}, seed++);
  check_int4_case({2, 5632, 512, 6144, 512, 32, 4, false, false, true}, seed++);
}
