// Helpers of the extern GEMM GPU tests (test_extern_mm.cpp, test_gemv.cpp):
// strided device tensors filled from host values, exact test values, a
// double-precision host reference and the tolerance check.
#pragma once

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/ops/gemm.hpp"
#include "support/shim_testing.hpp"

namespace aoti_cuda_test {
namespace extern_mm {

using namespace aoti_cuda_test::codes;

inline uint16_t to_bits(float f, int32_t dtype) {
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

inline float from_bits(uint16_t b, int32_t dtype) {
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

inline std::size_t item(int32_t dtype) { return dtype == kF32 ? 4 : 2; }

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

inline DeviceTensor make(const std::vector<int64_t> &sizes,
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

inline std::vector<float> random_values(std::size_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> q(-8, 8);
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(q(rng)) / 4.0f;
  return v;
}

// Block i of `size` consecutive values of v (one matrix of a batch).
inline std::vector<float> part(const std::vector<float> &v, int64_t i, int64_t size) {
  return std::vector<float>(v.begin() + i * size, v.begin() + (i + 1) * size);
}

// Strides of an r x c matrix laid out as `kind`.
enum class Layout { kRow, kColumn, kPadded, kGather };
inline std::vector<int64_t> strides_of(Layout kind, int64_t r, int64_t c) {
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
inline const char *name_of(Layout kind) {
  static const char *names[] = {"row", "column", "padded", "gather"};
  return names[static_cast<int>(kind)];
}

// want[i][j] = beta * bias(i, j) + alpha * sum_k a[i][k] b[k][j], in double.
inline std::vector<float> reference(const std::vector<float> &a,
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
inline std::vector<float> magnitudes(const std::vector<float> &a,
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

inline void check_close(const std::vector<float> &got, const std::vector<float> &want,
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

} // namespace extern_mm
} // namespace aoti_cuda_test
