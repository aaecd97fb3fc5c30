// aoti_torch_cuda_aoti_cuda_argmax on the GPU, against the host's torch.argmax order (the largest value, the first
// of equal ones, the first NaN above every number): bf16, fp16 and float32; rows of 1 to 2^20 elements (with and
// without a partial last 16-byte vector, and the 1.1 B model's 32,000 logits); several rows, rows further apart
// than their length, and rows that are not 16-byte aligned (the element-by-element path); ties planted across the
// row, NaNs, and rows of -inf only. Without a GPU every case skips.
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
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

enum class Kind { kBF16, kF16, kF32 };

const char* name(Kind k) { return k == Kind::kBF16 ? "bf16" : (k == Kind::kF16 ? "fp16" : "fp32"); }
int32_t code(Kind k) { return k == Kind::kBF16 ? kBF16 : (k == Kind::kF16 ? kF16 : kF32); }
std::size_t size_of(Kind k) { return k == Kind::kF32 ? 4 : 2; }

// Values as the device holds them: rounded to the dtype, stored little-endian.
struct HostRows {
  Kind kind;
  std::vector<float> values;       // rounded, what the reference compares
  std::vector<unsigned char> raw;  // the bytes uploaded
  void set(std::size_t i, float v) {
    if (kind == Kind::kF32) {
      values[i] = v;
      std::memcpy(&raw[4 * i], &v, 4);
    } else {
      const uint16_t bits = aoti_cuda_test::to16(v, kind == Kind::kF16);
      values[i] = aoti_cuda_test::from16(bits, kind == Kind::kF16);
      std::memcpy(&raw[2 * i], &bits, 2);
    }
  }
};

// torch.argmax's order over values[first, first + n).
int64_t reference(const std::vector<float>& values, std::size_t first, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    const float v = values[first + i], b = values[first + best];
    if (std::isnan(b)) break;
    if (std::isnan(v) || v > b) best = i;
  }
  return best;
}

// Runs the shim over `rows` rows of n elements, `stride` elements apart, starting `offset` elements into a buffer,
// each row filled by fill(row, column) -> value; checks every row's index against the reference.
template <typename Fill>
void check(Kind kind, int64_t rows, int64_t n, int64_t stride, int64_t offset, Fill fill, const std::string& what) {
  const int64_t extent = offset + (rows - 1) * stride + n;
  HostRows h{kind, std::vector<float>(static_cast<std::size_t>(extent), 0.f),
             std::vector<unsigned char>(static_cast<std::size_t>(extent) * size_of(kind), 0)};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) h.set(static_cast<std::size_t>(offset + r * stride + c), fill(r, c));
  }
  OwnedTensor buffer = empty({extent}, {}, code(kind), kCUDA, 0);
  REQUIRE(cudaMemcpy(buffer.data(), h.raw.data(), h.raw.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  OwnedTensor x;
  const int64_t sizes[2] = {rows, n}, strides[2] = {stride, 1};
  REQUIRE(aoti_torch__reinterpret_tensor(buffer.get(), 2, sizes, strides, offset, x.out()) == AOTI_TORCH_SUCCESS);
  OwnedTensor out;
  REQUIRE_MESSAGE(aoti_torch_cuda_aoti_cuda_argmax(x.get(), out.out()) == AOTI_TORCH_SUCCESS,
                  aoti_cuda_shim_last_error());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  int64_t* out_sizes = nullptr;
  int32_t out_dtype = -1;
  REQUIRE(aoti_torch_get_sizes(out.get(), &out_sizes) == AOTI_TORCH_SUCCESS);
  REQUIRE(aoti_torch_get_dtype(out.get(), &out_dtype) == AOTI_TORCH_SUCCESS);
  CHECK(out_sizes[0] == rows);
  CHECK(out_sizes[1] == 1);  // keepdim
  CHECK(out_dtype == aoti_torch_dtype_int64());
  std::vector<int64_t> got(static_cast<std::size_t>(rows));
  REQUIRE(cudaMemcpy(got.data(), out.data(), got.size() * 8, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int64_t r = 0; r < rows; ++r) {
    CAPTURE(what);
    CAPTURE(name(kind));
    CAPTURE(n);
    CAPTURE(r);
    CHECK(got[r] == reference(h.values, static_cast<std::size_t>(offset + r * stride), n));
  }
}

}  // namespace

TEST_CASE("gpu: argmax matches torch.argmax's order on random rows of every length class" * AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (Kind kind : {Kind::kBF16, Kind::kF16, Kind::kF32}) {
    for (int64_t n : {1, 2, 7, 8, 9, 31, 255, 4096, 4101, 32000, 32003, 100000, 1 << 20}) {
      check(kind, 1, n, n, 0, [&](int64_t, int64_t) { return dist(rng); }, "random");
    }
    // Several rows; rows further apart than their length; rows that are not 16-byte aligned.
    check(kind, 5, 32000, 32000, 0, [&](int64_t, int64_t) { return dist(rng); }, "rows");
    check(kind, 3, 1000, 1032, 0, [&](int64_t, int64_t) { return dist(rng); }, "strided rows");
    check(kind, 3, 32000, 32001, 1, [&](int64_t, int64_t) { return dist(rng); }, "unaligned rows");
  }
}

TEST_CASE("gpu: argmax keeps the first of equal maxima, puts NaN first, and handles rows of -inf" *
          AOTI_CUDA_GPU_CASE) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Kind kind : {Kind::kBF16, Kind::kF16, Kind::kF32}) {
    for (int64_t offset : {0, 3}) {  // the vector path and the element path
      // The maximum at indices that different threads, vectors and rounds hold: the first one wins.
      check(kind, 4, 32000, 32000 + offset, offset, [&](int64_t r, int64_t c) {
        const int64_t ties[4][3] = {{31999, 5000, 17}, {8, 9, 16}, {1024 * 8, 1024 * 8 + 1, 31990}, {0, 31999, 12345}};
        for (int64_t t : ties[r]) {
          if (c == t) return 7.f;
        }
        return static_cast<float>(c % 97) / 97.f;
      }, "ties");
      // NaN beats +inf and every number: the first NaN's index, wherever it is.
      check(kind, 3, 32000, 32000 + offset, offset, [&](int64_t r, int64_t c) {
        if (c == 100) return inf;
        if ((r == 0 && c == 20000) || (r == 1 && (c == 31999 || c == 30000)) || (r == 2 && (c == 0 || c == 5))) {
          return nan;
        }
        return 1.f;
      }, "nan");
      // Every element -inf: index 0, as torch.argmax.
      check(kind, 2, 4101, 4101 + offset, offset, [&](int64_t, int64_t) { return -inf; }, "all -inf");
      // -inf except one finite element near the end.
      check(kind, 1, 32000, 32000, offset, [&](int64_t, int64_t c) { return c == 31998 ? -1e3f : -inf; }, "one finite");
    }
  }
}

TEST_CASE("gpu: argmax of an empty batch writes nothing and returns an empty output" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor x = empty({0, 32000}, {}, kBF16, kCUDA, 0);
  OwnedTensor out;
  REQUIRE_MESSAGE(aoti_torch_cuda_aoti_cuda_argmax(x.get(), out.out()) == AOTI_TORCH_SUCCESS,
                  aoti_cuda_shim_last_error());
  int64_t numel = -1;
  REQUIRE(aoti_torch_get_numel(out.get(), &numel) == AOTI_TORCH_SUCCESS);
  CHECK(numel == 0);
}
