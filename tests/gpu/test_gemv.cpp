// The extern GEMMs' few-row kernel (src/shim/ops/gemv.cu) on the GPU, with
// the row limit raised to 8 (TuningOptions::gemv_max_rows, here through an
// OpSettingsScope as a Module's call installs it): against the host
// reference in every dtype, which operands go to it and which to cuBLAS,
// addmm's bias, decode attention's bmm shapes, and the kernels switched off.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "extern_mm_support.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/gemm.hpp"
#include "support/gpu.hpp"

using namespace aoti_cuda_test::extern_mm;

namespace {

// The few-row limit `rows` on this thread for the scope, as a Module's call
// with TuningOptions::gemv_max_rows installs it; the previous settings after,
// also when a REQUIRE ends the test case.
struct GemvRows {
  aoti_cuda::shim::OpSettings settings;
  aoti_cuda::shim::OpSettingsScope scope;
  explicit GemvRows(int rows) : settings(with_rows(rows)), scope(&settings) {}
  static aoti_cuda::shim::OpSettings with_rows(int rows) {
    aoti_cuda::shim::OpSettings s;
    s.gemv_max_rows = rows;
    return s;
  }
};

} // namespace

TEST_CASE("extern mm, at most 8 rows: the few-row kernels against the host "
          "reference, and cuBLAS where they do not apply" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  const GemvRows rows8(8); // every row count the kernels take (default: 1)
  std::mt19937 rng(23);
  // (n, k): several warps per column (k 2048, 5632), one run of K (k 64),
  // a partial run (k 40); b as a transposed weight (the kernel) and as rows
  // (cuBLAS).
  const int64_t shapes[][2] = {{300, 2048}, {136, 5632}, {1024, 64}, {24, 40}};
  int gemv_cases = 0;
  for (int32_t dtype : {kF32, kF16, kBF16})
    for (const auto &s : shapes)
      for (int64_t m : {1, 3, 4, 8})
        for (Layout lb : {Layout::kColumn, Layout::kRow}) {
          const int64_t n = s[0], k = s[1];
          const std::vector<float> av = random_values(m * k, rng),
                                   bv = random_values(k * n, rng);
          DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
          DeviceTensor b = make({k, n}, strides_of(lb, k, n), dtype, bv);
          DeviceTensor c = make({m, n}, {n, 1}, dtype,
                                std::vector<float>(m * n, 99.0f));
          const uint64_t before = gemm::gemv_calls();
          REQUIRE_MESSAGE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(),
                                                 b.view.get()) ==
                              AOTI_TORCH_SUCCESS,
                          aoti_cuda_shim_last_error());
          const bool used = gemm::gemv_calls() == before + 1;
          const bool expect_gemv = lb == Layout::kColumn;
          INFO("dtype " << dtype << " " << m << "x" << n << "x" << k << " b "
                        << name_of(lb));
          CHECK(used == expect_gemv);
          gemv_cases += used ? 1 : 0;
          // cuBLAS (where the kernels do not apply) may round split-K
          // partial sums to bf16/fp16; the kernels sum in fp32.
          const std::vector<float> slack = magnitudes(av, bv, m, n, k);
          check_close(c.read(), reference(av, bv, m, n, k), dtype,
                      "few-row mm dtype " + std::to_string(dtype) + " " +
                          std::to_string(m) + "x" + std::to_string(n) + "x" +
                          std::to_string(k) + " b " + name_of(lb),
                      used ? nullptr : &slack);
        }
  CHECK(gemv_cases == 3 * 4 * 4);
}

TEST_CASE("extern addmm, at most 8 rows: bias broadcast, alpha and beta on "
          "the few-row kernels" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  const GemvRows rows8(8);
  std::mt19937 rng(29);
  for (int32_t dtype : {kF32, kBF16}) {
    const int64_t m = 2, n = 264, k = 512;
    const std::vector<float> av = random_values(m * k, rng),
                             bv = random_values(k * n, rng),
                             biasv = random_values(n, rng);
    DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
    DeviceTensor b = make({k, n}, {1, k}, dtype, bv);
    DeviceTensor bias = make({n}, {1}, dtype, biasv);
    DeviceTensor c = make({m, n}, {n, 1}, dtype, std::vector<float>(m * n, 0.0f));
    const uint64_t before = gemm::gemv_calls();
    REQUIRE(aoti_torch_cuda_addmm_out(c.view.get(), bias.view.get(),
                                      a.view.get(), b.view.get(), 0.5,
                                      2.0) == AOTI_TORCH_SUCCESS);
    CHECK(gemm::gemv_calls() == before + 1);
    check_close(c.read(),
                reference(av, bv, m, n, k, 2.0f, 0.5f, &biasv, 1, n), dtype,
                "few-row addmm");
  }
}

// bmm as decode attention runs it: q·K^T over a transposed cache (the kernel)
// and p·V (cuBLAS), 4 heads of 4 query rows; the scores written with a row
// stride.
TEST_CASE("extern bmm, at most 8 rows: decode attention's q.K^T and p.V" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  const GemvRows rows8(8);
  std::mt19937 rng(31);
  for (int32_t dtype : {kF16, kBF16}) {
    const int64_t heads = 4, rows = 4, ctx = 256, hd = 128;
    const std::vector<float> qv = random_values(heads * rows * hd, rng),
                             kv = random_values(heads * ctx * hd, rng);
    DeviceTensor q = make({heads, rows, hd}, {rows * hd, hd, 1}, dtype, qv);
    // The cache is [heads, ctx, hd]; K^T is its [heads, hd, ctx] view.
    std::vector<float> kt(static_cast<std::size_t>(heads * hd * ctx));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < hd; ++d)
        for (int64_t t = 0; t < ctx; ++t)
          kt[(h * hd + d) * ctx + t] = kv[(h * ctx + t) * hd + d];
    DeviceTensor kT = make({heads, hd, ctx}, {ctx * hd, 1, hd}, dtype, kt);
    DeviceTensor scores = make({heads, rows, ctx}, {rows * (ctx + 8), ctx + 8, 1},
                               dtype, std::vector<float>(heads * rows * ctx, 0.0f));
    uint64_t before = gemm::gemv_calls();
    REQUIRE(aoti_torch_cuda_bmm_out(scores.view.get(), q.view.get(),
                                    kT.view.get()) == AOTI_TORCH_SUCCESS);
    CHECK(gemm::gemv_calls() == before + 1);
    const std::vector<float> got = scores.read();
    for (int64_t h = 0; h < heads; ++h) {
      const std::vector<float> qh = part(qv, h, rows * hd);
      const std::vector<float> kh = part(kt, h, hd * ctx);
      const std::vector<float> gh = part(got, h, rows * ctx);
      check_close(gh, reference(qh, kh, rows, ctx, hd), dtype,
                  "q.K^T head " + std::to_string(h));
    }
    const std::vector<float> pv = random_values(heads * rows * ctx, rng),
                             vv = random_values(heads * ctx * hd, rng);
    DeviceTensor p = make({heads, rows, ctx}, {rows * ctx, ctx, 1}, dtype, pv);
    DeviceTensor v = make({heads, ctx, hd}, {ctx * hd, hd, 1}, dtype, vv);
    DeviceTensor y = make({heads, rows, hd}, {rows * hd, hd, 1}, dtype,
                          std::vector<float>(heads * rows * hd, 0.0f));
    before = gemm::gemv_calls();
    REQUIRE(aoti_torch_cuda_bmm_out(y.view.get(), p.view.get(),
                                    v.view.get()) == AOTI_TORCH_SUCCESS);
    CHECK(gemm::gemv_calls() == before);
    const std::vector<float> ygot = y.read();
    for (int64_t h = 0; h < heads; ++h) {
      const std::vector<float> ph = part(pv, h, rows * ctx);
      const std::vector<float> vh = part(vv, h, ctx * hd);
      const std::vector<float> gh = part(ygot, h, rows * hd);
      const std::vector<float> slack = magnitudes(ph, vh, rows, hd, ctx);
      check_close(gh, reference(ph, vh, rows, hd, ctx), dtype,
                  "p.V head " + std::to_string(h), &slack);
    }
  }

}

// With the kernels switched off (gemv_max_rows 0), cuBLAS gives the
// same result.
TEST_CASE("extern mm with the few-row kernels off: cuBLAS at one row" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  const GemvRows off(0);
  std::mt19937 rng(37);
  {
    const int64_t m = 1, n = 512, k = 1024;
    const std::vector<float> av = random_values(m * k, rng),
                             bv = random_values(k * n, rng);
    DeviceTensor a = make({m, k}, {k, 1}, kBF16, av);
    DeviceTensor b = make({k, n}, {1, k}, kBF16, bv);
    DeviceTensor c = make({m, n}, {n, 1}, kBF16, std::vector<float>(m * n, 0.0f));
    const uint64_t before = gemm::gemv_calls();
    REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) ==
            AOTI_TORCH_SUCCESS);
    CHECK(gemm::gemv_calls() == before);
    check_close(c.read(), reference(av, bv, m, n, k), kBF16, "cuBLAS at 1 row");
  }
}
