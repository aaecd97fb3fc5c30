// Test helpers: int4 weights in the layout torch's _convert_weight_to_int4pack writes for CUDA (torchao's
// tile_packed_to_4d), with random values and their dequantized reference (src/shim/ops/weight_int4pack_mm.hpp has
// the layout formula). Used by the int4 matmul and fused linear GPU tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "support/half_bits.hpp"

namespace aoti_cuda_test {

// Packs q[n][k] (0..15) the way torch's _convert_weight_to_int4pack does for CUDA.
inline std::vector<int32_t> pack(const std::vector<uint8_t>& q, int64_t n, int64_t k, int ikt) {
  const int64_t k_super = k / (16 * ikt);
  const int words = ikt / 2;
  std::vector<int32_t> out(static_cast<std::size_t>(n * k / 8));
  for (int64_t nt = 0; nt < n / 8; ++nt)
    for (int64_t s = 0; s < k_super; ++s)
      for (int lane = 0; lane < 32; ++lane)
        for (int p = 0; p < words; ++p) {
          uint32_t word = 0;
          for (int i = 0; i < 8; ++i) {
            const int64_t row = 8 * nt + lane / 4;
            const int64_t col = 16 * (ikt * s + 2 * p + (i % 4) / 2) + 8 * (i % 2) + 2 * (lane % 4) + i / 4;
            word |= static_cast<uint32_t>(q[static_cast<std::size_t>(row * k + col)]) << (4 * i);
          }
          out[static_cast<std::size_t>(((nt * k_super + s) * 32 + lane) * words + p)] = static_cast<int32_t>(word);
        }
  return out;
}

// Random 4-bit values q[n][k] and (scale, zero) pairs [k/group][n] of small magnitude.
struct RandomWeights {
  std::vector<uint8_t> q;
  std::vector<uint16_t> sz;
};
inline RandomWeights random_weights(int64_t n, int64_t k, int64_t group, std::mt19937& rng) {
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  RandomWeights r;
  r.q.resize(static_cast<std::size_t>(n * k));
  for (auto& v : r.q) v = static_cast<uint8_t>(nibble(rng));
  r.sz.resize(static_cast<std::size_t>(k / group * n * 2));
  for (std::size_t i = 0; i < r.sz.size(); i += 2) {
    r.sz[i] = to16(0.01f + 0.005f * unit(rng), false);
    r.sz[i + 1] = to16(0.02f * unit(rng), false);
  }
  return r;
}

// Weight [col][kk] as torch's kernel and the dequantize-first kernels use it: dequantized from rw (N = n columns),
// rounded to bf16.
inline float weight_at(const RandomWeights& rw, int64_t n, int64_t k, int64_t group, int64_t col, int64_t kk) {
  const std::size_t g = static_cast<std::size_t>((kk / group) * n + col) * 2;
  const float deq = (static_cast<float>(rw.q[static_cast<std::size_t>(col * k + kk)]) - 8.f) * from16(rw.sz[g], false) +
                    from16(rw.sz[g + 1], false);
  return from16(to16(deq, false), false);
}

// The same weight unrounded, (q - 8) * scale + zero in float64: what the weight-streaming kernel's scale-after form
// multiplies by (weight_int4pack_gemv.cu, kScaleAfter: each group's scale and zero applied to its sums).
inline double weight_exact(const RandomWeights& rw, int64_t n, int64_t k, int64_t group, int64_t col, int64_t kk) {
  const std::size_t g = static_cast<std::size_t>((kk / group) * n + col) * 2;
  return (static_cast<double>(rw.q[static_cast<std::size_t>(col * k + kk)]) - 8.0) * from16(rw.sz[g], false) +
         from16(rw.sz[g + 1], false);
}

}  // namespace aoti_cuda_test
