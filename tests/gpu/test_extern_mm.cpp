// aoti_torch_cuda_mm_out / addmm_out / bmm_out on the GPU (cuBLAS), against a
// host reference: every dtype, row-major, transposed, padded and gather-strided
// operands and outputs, bias broadcasting, bmm with a broadcast batch, K = 0,
// and a CUDA-graph capture and replay. Inputs are multiples of 1/4 in [-2, 2],
// exact in every dtype, so the only rounding is the output's.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/ops/gemm.hpp"
#include "support/gpu.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;

namespace {

constexpr int32_t kF32 = 6;
constexpr int32_t kF16 = 5;
constexpr int32_t kBF16 = 15;
constexpr int32_t kCUDA = 1;

uint16_t to_bits(float f, int32_t dtype) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (dtype == kBF16)
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  // float16 of a value exact in it (normal or zero; the test values and sums
  // are), or NaN.
  if (std::isnan(f))
    return 0x7E00;
  if (f == 0.0f)
    return static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) |
                               ((u >> 13) & 0x3FFu));
}

float from_bits(uint16_t b, int32_t dtype) {
  uint32_t u;
  if (dtype == kBF16) {
    u = static_cast<uint32_t>(b) << 16;
  } else {
    const uint32_t sign = static_cast<uint32_t>(b & 0x8000u) << 16;
    const uint32_t exp = (b >> 10) & 0x1F, man = b & 0x3FFu;
    if (exp == 0 && man == 0)
      u = sign;
    else if (exp == 0x1F)
      u = sign | 0x7F800000u | (man << 13);
    else if (exp == 0)
      return (b & 0x8000u ? -1.f : 1.f) *
             std::ldexp(static_cast<float>(man), -24);
    else
      u = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::size_t item(int32_t dtype) { return dtype == kF32 ? 4 : 2; }

// A device tensor with the given sizes and strides over its own storage,
// holding `values` (logical row-major order); storage elements no view element
// reaches hold `filler`.
struct DeviceTensor {
  OwnedTensor storage;
  OwnedTensor view;
  std::vector<int64_t> sizes, strides;
  int32_t dtype = kF32;
  int64_t span = 1;

  // Storage index of logical element i.
  int64_t at(int64_t i) const {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      off += (i % sizes[d]) * strides[d];
      i /= sizes[d];
    }
    return off;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
  std::vector<float> read() const {
    std::vector<unsigned char> raw(static_cast<std::size_t>(span) *
                                   item(dtype));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(raw.data(), storage.data(), raw.size(),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<float> out(static_cast<std::size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) {
      const int64_t o = at(i);
      if (dtype == kF32)
        std::memcpy(&out[i], raw.data() + o * 4, 4);
      else {
        uint16_t b;
        std::memcpy(&b, raw.data() + o * 2, 2);
        out[i] = from_bits(b, dtype);
      }
    }
    return out;
  }
  void write(const std::vector<float> &values, float filler = 0.0f) {
    std::vector<unsigned char> raw(static_cast<std::size_t>(span) *
                                   item(dtype));
    auto put = [&](int64_t o, float v) {
      if (dtype == kF32)
        std::memcpy(raw.data() + o * 4, &v, 4);
      else {
        const uint16_t b = to_bits(v, dtype);
        std::memcpy(raw.data() + o * 2, &b, 2);
      }
    };
    for (int64_t o = 0; o < span; ++o)
      put(o, filler);
    for (int64_t i = 0; i < numel(); ++i)
      put(at(i), values[static_cast<std::size_t>(i)]);
    REQUIRE(cudaMemcpy(storage.data(), raw.data(), raw.size(),
                       cudaMemcpyHostToDevice) == cudaSuccess);
  }
};

DeviceTensor make(const std::vector<int64_t> &sizes,
                  const std::vector<int64_t> &strides, int32_t dtype,
                  const std::vector<float> &values, float filler = 0.0f) {
  DeviceTensor t;
  t.sizes = sizes;
  t.strides = strides;
  t.dtype = dtype;
  for (std::size_t d = 0; d < sizes.size(); ++d)
    t.span += (sizes[d] - 1) * strides[d];
  t.storage = empty({t.span}, {}, dtype, kCUDA, 0);
  REQUIRE(aoti_torch__reinterpret_tensor(
              t.storage.get(), static_cast<int64_t>(sizes.size()), sizes.data(),
              strides.data(), 0, t.view.out()) == AOTI_TORCH_SUCCESS);
  t.write(values, filler);
  return t;
}

std::vector<float> random_values(std::size_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> q(-8, 8);
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(q(rng)) / 4.0f;
  return v;
}

// Strides of an r x c matrix laid out as `kind`.
enum class Layout { kRow, kColumn, kPadded, kGather };
std::vector<int64_t> strides_of(Layout kind, int64_t r, int64_t c) {
  switch (kind) {
  case Layout::kRow:
    return {c, 1};
  case Layout::kColumn:
    return {1, r};
  case Layout::kPadded:
    return {c + 3, 1};
  case Layout::kGather:
    return {2 * c, 2}; // no unit stride: goes through a contiguous copy
  }
  return {};
}
const char *name_of(Layout kind) {
  static const char *names[] = {"row", "column", "padded", "gather"};
  return names[static_cast<int>(kind)];
}

// want[i][j] = beta * bias(i, j) + alpha * sum_k a[i][k] b[k][j], in double.
std::vector<float> reference(const std::vector<float> &a,
                             const std::vector<float> &b, int64_t m, int64_t n,
                             int64_t k, float alpha = 1.0f, float beta = 0.0f,
                             const std::vector<float> *bias = nullptr,
                             int64_t bias_rows = 1, int64_t bias_cols = 1) {
  std::vector<float> out(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += static_cast<double>(a[i * k + p]) * b[p * n + j];
      double v = alpha * s;
      if (bias != nullptr && beta != 0.0f) {
        v += beta *
             static_cast<double>((*bias)[(bias_rows == 1 ? 0 : i) * bias_cols +
                                         (bias_cols == 1 ? 0 : j)]);
      }
      out[static_cast<std::size_t>(i * n + j)] = static_cast<float>(v);
    }
  return out;
}

// sum_k |a[i][k]| |b[k][j]|: bounds what rounding partial sums to the output
// dtype can cost (cuBLAS may reduce split-K partials in bf16/fp16, as PyTorch
// allows by default).
std::vector<float> magnitudes(const std::vector<float> &a,
                              const std::vector<float> &b, int64_t m, int64_t n,
                              int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += std::fabs(static_cast<double>(a[i * k + p]) * b[p * n + j]);
      out[static_cast<std::size_t>(i * n + j)] = static_cast<float>(s);
    }
  return out;
}

void check_close(const std::vector<float> &got, const std::vector<float> &want,
                 int32_t dtype, const std::string &what,
                 const std::vector<float> *slack = nullptr) {
  REQUIRE(got.size() == want.size());
  const double rel = dtype == kF32   ? 1e-6
                     : dtype == kF16 ? 1.0 / 1024
                                     : 1.0 / 128;
  std::size_t bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = rel * std::fabs(want[i]) + 1e-6 +
                       (slack != nullptr ? rel * (*slack)[i] : 0.0);
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol)) {
      if (bad++ == 0)
        first = i;
    }
  }
  INFO(what << ": first mismatch at " << first << ": got " << got[first]
            << " want " << want[first]);
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("extern mm: every dtype and operand layout against a host reference" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(7);
  const int64_t shapes[][3] = {
      {1, 64, 256}, {7, 33, 40}, {64, 96, 128}, {3, 5, 1}};
  const Layout a_layouts[] = {Layout::kRow, Layout::kColumn, Layout::kPadded,
                              Layout::kGather};
  const Layout bc_layouts[] = {Layout::kRow, Layout::kColumn};
  int checked = 0;
  for (int32_t dtype : {kF32, kF16, kBF16})
    for (const auto &s : shapes) {
      const int64_t m = s[0], n = s[1], k = s[2];
      const std::vector<float> av = random_values(m * k, rng),
                               bv = random_values(k * n, rng);
      const std::vector<float> want = reference(av, bv, m, n, k);
      for (Layout la : a_layouts)
        for (Layout lb : bc_layouts)
          for (Layout lc : {Layout::kRow, Layout::kColumn, Layout::kGather}) {
            DeviceTensor a = make({m, k}, strides_of(la, m, k), dtype, av);
            DeviceTensor b = make({k, n}, strides_of(lb, k, n), dtype, bv);
            DeviceTensor c = make({m, n}, strides_of(lc, m, n), dtype,
                                  std::vector<float>(m * n, 99.0f), 55.0f);
            const AOTITorchError rc = aoti_torch_cuda_mm_out(
                c.view.get(), a.view.get(), b.view.get());
            REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS,
                            aoti_cuda_shim_last_error());
            const std::string what =
                "mm dtype " + std::to_string(dtype) + " " + std::to_string(m) +
                "x" + std::to_string(n) + "x" + std::to_string(k) + " a " +
                name_of(la) + " b " + name_of(lb) + " out " + name_of(lc);
            check_close(c.read(), want, dtype, what);
            // Storage the output view does not cover is untouched.
            if (lc == Layout::kGather) {
              std::vector<unsigned char> raw(static_cast<std::size_t>(c.span) *
                                             item(dtype));
              REQUIRE(cudaMemcpy(raw.data(), c.storage.data(), raw.size(),
                                 cudaMemcpyDeviceToHost) == cudaSuccess);
              const float gap = dtype == kF32 ? [&] { float f; std::memcpy(&f, raw.data() + 4, 4); return f; }()
                                              : from_bits(static_cast<uint16_t>(raw[2] | (raw[3] << 8)), dtype);
              if (n > 1)
                CHECK(gap == 55.0f);
            }
            ++checked;
          }
    }
  CHECK(checked == 3 * 4 * 4 * 2 * 3);
  MESSAGE("cuBLAS loaded from "
          << std::string(aoti_cuda::shim::gemm::loaded_library()));
  CHECK(
      std::string(aoti_cuda::shim::gemm::loaded_library()).find("libcublas") !=
      std::string::npos);
}

TEST_CASE("extern addmm: bias broadcasting, beta and alpha, beta = 0 ignores "
          "NaN, in place" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(11);
  const int64_t m = 9, n = 24, k = 48;
  for (int32_t dtype : {kF32, kBF16}) {
    const std::vector<float> av = random_values(m * k, rng),
                             bv = random_values(k * n, rng);
    struct BiasShape {
      std::vector<int64_t> sizes;
      int64_t rows, cols;
    };
    const BiasShape shapes[] = {{{}, 1, 1},
                                {{n}, 1, n},
                                {{1, n}, 1, n},
                                {{m, 1}, m, 1},
                                {{m, n}, m, n}};
    for (const BiasShape &bs : shapes) {
      for (auto [beta, alpha] :
           {std::pair<float, float>{1.0f, 1.0f}, {0.5f, 2.0f}}) {
        const std::vector<float> biasv = random_values(bs.rows * bs.cols, rng);
        std::vector<int64_t> bstrides;
        int64_t stride = 1;
        for (auto it = bs.sizes.rbegin(); it != bs.sizes.rend(); ++it) {
          bstrides.insert(bstrides.begin(), stride);
          stride *= *it;
        }
        DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
        DeviceTensor b = make({k, n}, {1, k}, dtype,
                              bv); // a transposed weight, as Inductor passes it
        DeviceTensor bias = make(bs.sizes, bstrides, dtype, biasv);
        DeviceTensor c =
            make({m, n}, {n, 1}, dtype, std::vector<float>(m * n, 0.0f));
        REQUIRE_MESSAGE(aoti_torch_cuda_addmm_out(
                            c.view.get(), bias.view.get(), a.view.get(),
                            b.view.get(), beta, alpha) == AOTI_TORCH_SUCCESS,
                        aoti_cuda_shim_last_error());
        check_close(
            c.read(),
            reference(av, bv, m, n, k, alpha, beta, &biasv, bs.rows, bs.cols),
            dtype,
            "addmm bias dims " + std::to_string(bs.sizes.size()) + " rows " +
                std::to_string(bs.rows) + " beta " + std::to_string(beta));
      }
    }
    // beta = 0: self is not read, NaN included.
    DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
    DeviceTensor b = make({k, n}, {n, 1}, dtype, bv);
    DeviceTensor nan_bias =
        make({n}, {1}, dtype,
             std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    DeviceTensor c =
        make({m, n}, {n, 1}, dtype, std::vector<float>(m * n, 3.0f));
    REQUIRE(aoti_torch_cuda_addmm_out(c.view.get(), nan_bias.view.get(),
                                      a.view.get(), b.view.get(), 0.0,
                                      1.0) == AOTI_TORCH_SUCCESS);
    check_close(c.read(), reference(av, bv, m, n, k), dtype,
                "addmm beta 0 with NaN self");
    // In place: self is out.
    const std::vector<float> start = random_values(m * n, rng);
    DeviceTensor d = make({m, n}, {n, 1}, dtype, start);
    REQUIRE(aoti_torch_cuda_addmm_out(d.view.get(), d.view.get(), a.view.get(),
                                      b.view.get(), 1.0,
                                      1.0) == AOTI_TORCH_SUCCESS);
    check_close(d.read(), reference(av, bv, m, n, k, 1.0f, 1.0f, &start, m, n),
                dtype, "addmm in place");
  }
}

TEST_CASE("extern bmm: batches, transposed and broadcast (stride 0) operands" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(13);
  const int64_t batch = 3, m = 5, n = 16, k = 32;
  for (int32_t dtype : {kF32, kF16, kBF16}) {
    const std::vector<float> av = random_values(batch * m * k, rng),
                             bv = random_values(k * n, rng);
    DeviceTensor a = make({batch, m, k}, {m * k, k, 1}, dtype, av);
    std::vector<float> b_expanded;
    for (int64_t i = 0; i < batch; ++i)
      b_expanded.insert(b_expanded.end(), bv.begin(), bv.end());
    DeviceTensor b = make({batch, k, n}, {0, 1, k}, dtype,
                          b_expanded); // one transposed matrix for all batches
    DeviceTensor c = make({batch, m, n}, {m * n, n, 1}, dtype,
                          std::vector<float>(batch * m * n, 0.0f));
    REQUIRE_MESSAGE(aoti_torch_cuda_bmm_out(c.view.get(), a.view.get(),
                                            b.view.get()) == AOTI_TORCH_SUCCESS,
                    aoti_cuda_shim_last_error());
    const std::vector<float> got = c.read();
    for (int64_t i = 0; i < batch; ++i) {
      const std::vector<float> ai(av.begin() + i * m * k,
                                  av.begin() + (i + 1) * m * k);
      const std::vector<float> gi(got.begin() + i * m * n,
                                  got.begin() + (i + 1) * m * n);
      check_close(gi, reference(ai, bv, m, n, k), dtype,
                  "bmm batch " + std::to_string(i));
    }
  }
}

TEST_CASE("extern mm: K = 0 gives zeros; empty outputs are fine" *
          AOTI_CUDA_GPU_CASE) {
  DeviceTensor a = make({4, 0}, {1, 1}, kF32, {});
  DeviceTensor b = make({0, 6}, {6, 1}, kF32, {});
  DeviceTensor c = make({4, 6}, {6, 1}, kF32, std::vector<float>(24, 7.0f));
  REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) ==
          AOTI_TORCH_SUCCESS);
  CHECK(c.read() == std::vector<float>(24, 0.0f));
  DeviceTensor a0 = make({0, 3}, {3, 1}, kF32, {});
  DeviceTensor b0 = make({3, 6}, {6, 1}, kF32, std::vector<float>(18, 1.0f));
  DeviceTensor c0 = make({0, 6}, {6, 1}, kF32, {});
  CHECK(aoti_torch_cuda_mm_out(c0.view.get(), a0.view.get(), b0.view.get()) ==
        AOTI_TORCH_SUCCESS);
}

TEST_CASE("extern mm: captured in a CUDA graph, replays with new inputs" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(17);
  const int64_t m = 1, n = 256, k = 512;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
          cudaSuccess);
  void *previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous) == 0);
  { // the tensors (freed on `stream`) go before the stream does
    std::vector<float> av = random_values(m * k, rng);
    const std::vector<float> bv = random_values(k * n, rng);
    DeviceTensor a = make({m, k}, {k, 1}, kBF16, av);
    DeviceTensor b = make({k, n}, {1, k}, kBF16, bv);
    DeviceTensor c =
        make({m, n}, {n, 1}, kBF16, std::vector<float>(m * n, 0.0f));
    // Warm-up outside capture (handle and this stream's workspace), as graph
    // capture does.
    REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) ==
            AOTI_TORCH_SUCCESS);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) ==
            cudaSuccess);
    const AOTITorchError rc =
        aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get());
    REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int round = 0; round < 2; ++round) {
      av = random_values(m * k, rng);
      a.write(av);
      REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      check_close(c.read(), reference(av, bv, m, n, k), kBF16,
                  "graph replay " + std::to_string(round));
    }
    REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  }
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("extern mm: operands on another device or dtype fail naming them" *
          AOTI_CUDA_GPU_CASE) {
  DeviceTensor a = make({2, 3}, {3, 1}, kF32, std::vector<float>(6, 1.0f));
  DeviceTensor c = make({2, 4}, {4, 1}, kF32, std::vector<float>(8, 0.0f));
  OwnedTensor host_b = empty({3, 4}, {}, kF32);
  aoti_cuda_shim_clear_error();
  CHECK(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), host_b.get()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("every operand must be on out's device cuda:0"));
  DeviceTensor b16 = make({3, 4}, {4, 1}, kBF16, std::vector<float>(12, 1.0f));
  CHECK(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b16.view.get()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("mat2 must have out's dtype float32"));
}

TEST_CASE("extern mm, at most 8 rows: the few-row kernels against the host "
          "reference, and cuBLAS where they do not apply" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  const int saved = gemm::gemv_max_rows();
  gemm::set_gemv_max_rows(8); // every row count the kernels take (default: 1)
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

  // addmm on the few-row kernels: bias broadcast, alpha and beta.
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

  // bmm as decode attention runs it: q·K^T over a transposed cache (the
  // kernel) and p·V (cuBLAS), 4 heads of 4 query rows; the scores written with
  // a row stride.
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
      const std::vector<float> qh(qv.begin() + h * rows * hd,
                                  qv.begin() + (h + 1) * rows * hd);
      const std::vector<float> kh(kt.begin() + h * hd * ctx,
                                  kt.begin() + (h + 1) * hd * ctx);
      const std::vector<float> gh(got.begin() + h * rows * ctx,
                                  got.begin() + (h + 1) * rows * ctx);
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
      const std::vector<float> ph(pv.begin() + h * rows * ctx,
                                  pv.begin() + (h + 1) * rows * ctx);
      const std::vector<float> vh(vv.begin() + h * ctx * hd,
                                  vv.begin() + (h + 1) * ctx * hd);
      const std::vector<float> gh(ygot.begin() + h * rows * hd,
                                  ygot.begin() + (h + 1) * rows * hd);
      const std::vector<float> slack = magnitudes(ph, vh, rows, hd, ctx);
      check_close(gh, reference(ph, vh, rows, hd, ctx), dtype,
                  "p.V head " + std::to_string(h), &slack);
    }
  }

  // With the kernels switched off (AOTI_CUDA_GEMV_MAX_ROWS=0), cuBLAS gives the
  // same result.
  gemm::set_gemv_max_rows(0);
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
  gemm::set_gemv_max_rows(saved);
}
