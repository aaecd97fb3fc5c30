// aoti_torch_cuda_aoti_cuda_decode_attention on the GPU, against a float64 host reference of
// softmax(scale * q.k[0..pos]^T) . v[0..pos] over the same 16-bit inputs: both dtypes, head_dim 64
// and 128, grouped-query groups 1, 4 and 8 (one read of K/V for the group) and 3 and 16 (groups
// served in parts), positions 0, 1, 127, 128 (chunk edges), 1000 and L - 1 of a 1,024 cache, a
// cache length that is not a multiple of the chunk, positions past the cache (clamped) and
// negative (zeros), one position per sequence, a query with strided heads, and a CUDA-graph
// capture replayed with the position changed in device memory. The update form
// (aoti_torch_cuda_aoti_cuda_decode_attention_update) likewise, with the caches read back and compared bit for bit
// with the host's copy holding the stored rows. Without a GPU every case skips.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/decode_attention.hpp"
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::from16;
using aoti_cuda_test::to16;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

// A [B, H, L, D] tensor of random 16-bit values with the given strides, on the GPU and its host copy.
struct Operand {
  std::vector<uint16_t> host;
  std::vector<int64_t> sizes, strides;
  OwnedTensor device;
  double at(int64_t b, int64_t h, int64_t i, int64_t d, bool fp16) const {
    return from16(host[b * strides[0] + h * strides[1] + i * strides[2] + d * strides[3]], fp16);
  }
};

Operand make(std::mt19937& rng, std::vector<int64_t> sizes, std::vector<int64_t> strides, bool fp16) {
  Operand o;
  o.sizes = sizes;
  o.strides = strides;
  int64_t extent = 1;
  for (int d = 0; d < 4; ++d) extent += (sizes[d] - 1) * strides[d];
  std::normal_distribution<float> dist(0.f, 1.f);
  o.host.resize(static_cast<std::size_t>(extent));
  for (uint16_t& x : o.host) x = to16(dist(rng), fp16);
  o.device = empty(sizes, strides, fp16 ? kF16 : kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpy(o.device.data(), o.host.data(), o.host.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  return o;
}

std::vector<int64_t> dense(const std::vector<int64_t>& s) {
  return {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
}

struct Setup {
  bool fp16;
  int64_t batch, heads, kv_heads, cache_len, dim;
  bool q_strided_heads = false;  // q viewed from a [B, 1, H, D] projection padded to 2 H heads
};

struct Operands {
  Operand q, k, v;
};

Operands operands(const Setup& s, uint32_t seed) {
  std::mt19937 rng(seed);
  Operands o;
  const std::vector<int64_t> qs = {s.batch, s.heads, 1, s.dim};
  o.q = make(rng, qs, s.q_strided_heads ? std::vector<int64_t>{2 * s.heads * s.dim, s.dim, s.dim, 1} : dense(qs), s.fp16);
  const std::vector<int64_t> ks = {s.batch, s.kv_heads, s.cache_len, s.dim};
  o.k = make(rng, ks, dense(ks), s.fp16);
  o.v = make(rng, ks, dense(ks), s.fp16);
  return o;
}

// The output's rounding to 16 bits (bf16: 2^-9 of the value, fp16: 2^-11) with room for the float32 sums,
// plus an absolute term for values near zero.
double allowed(double ref, bool fp16) { return fp16 ? 2e-3 + std::ldexp(std::fabs(ref), -10) : 1e-2 + std::ldexp(std::fabs(ref), -8); }

// Max over the output of |got - reference| / allowed(reference): passing means < 1. positions[b] is the last
// visible position of batch b (one entry: all batches).
double max_error(const Setup& s, const Operands& o, const std::vector<int64_t>& positions, double scale,
                 const std::vector<uint16_t>& got) {
  const int64_t group = s.heads / s.kv_heads;
  double worst = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t pos = positions[positions.size() == 1 ? 0 : b];
    const int64_t n = pos < 0 ? 0 : std::min(pos + 1, s.cache_len);
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      std::vector<double> p(static_cast<std::size_t>(n));
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.dim; ++d) dot += o.q.at(b, h, 0, d, s.fp16) * o.k.at(b, kvh, j, d, s.fp16);
        p[j] = dot * scale;
        m = std::max(m, p[j]);
      }
      for (int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int64_t d = 0; d < s.dim; ++d) {
        double ref = 0;
        for (int64_t j = 0; j < n; ++j) ref += p[j] * o.v.at(b, kvh, j, d, s.fp16);
        if (n > 0) ref /= sum;
        const double g = from16(got[(b * s.heads + h) * s.dim + d], s.fp16);
        worst = std::max(worst, std::isfinite(g) ? std::fabs(g - ref) / allowed(ref, s.fp16) : INFINITY);
      }
    }
  }
  return worst;
}

OwnedTensor positions_tensor(const std::vector<int64_t>& positions) {
  OwnedTensor t = empty({static_cast<int64_t>(positions.size())}, {}, kI64, kCUDA, 0);
  REQUIRE(cudaMemcpy(t.data(), positions.data(), positions.size() * 8, cudaMemcpyHostToDevice) == cudaSuccess);
  return t;
}

std::vector<uint16_t> read_raw(const void* device, std::size_t n) {
  std::vector<uint16_t> got(n);
  REQUIRE(cudaMemcpy(got.data(), device, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  return got;
}

std::vector<uint16_t> read(const OwnedTensor& out, std::size_t n) { return read_raw(out.data(), n); }

void check_positions(const Setup& s, const std::vector<std::vector<int64_t>>& position_sets, const char* what) {
  const Operands o = operands(s, 1234);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  for (const std::vector<int64_t>& positions : position_sets) {
    OwnedTensor pos = positions_tensor(positions);
    OwnedTensor out;
    const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_decode_attention(o.q.device.get(), o.k.device.get(),
                                                                         o.v.device.get(), pos.get(), scale, out.out());
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    int64_t* strides = nullptr;
    REQUIRE(aoti_torch_get_strides(out.get(), &strides) == AOTI_TORCH_SUCCESS);
    CHECK(std::vector<int64_t>(strides, strides + 4) == dense({s.batch, s.heads, 1, s.dim}));
    const double err =
        max_error(s, o, positions, scale, read(out, static_cast<std::size_t>(s.batch * s.heads * s.dim)));
    std::string label = std::string(what) + (s.fp16 ? " fp16" : " bf16") + " D=" + std::to_string(s.dim) +
                        " g=" + std::to_string(s.heads / s.kv_heads) + " L=" + std::to_string(s.cache_len) + " pos";
    for (int64_t p : positions) label += " " + std::to_string(p);
    CAPTURE(label);
    CHECK(err < 1.0);
  }
}

}  // namespace

TEST_CASE("gpu: decode attention matches a float64 reference (dtypes, head_dim, GQA groups, positions)" *
          AOTI_CUDA_GPU_CASE) {
  const int64_t cache = 1024;
  std::vector<std::vector<int64_t>> positions;
  for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{127}, int64_t{128}, int64_t{1000}, cache - 1}) positions.push_back({p});
  for (bool fp16 : {false, true}) {
    for (int64_t dim : {64, 128}) {
      for (int64_t group : {1, 4, 8}) check_positions({fp16, 1, 2 * group, 2, cache, dim}, positions, "grid");
    }
  }
}

TEST_CASE("gpu: decode attention: groups served in parts, odd cache lengths, clamped and per-sequence positions" *
          AOTI_CUDA_GPU_CASE) {
  // g = 3 (one head per block: K/V read three times), g = 16 (two blocks of 8 heads).
  check_positions({false, 1, 6, 2, 300, 128}, {{0}, {63}, {64}, {299}}, "g3");
  check_positions({false, 1, 32, 2, 300, 64}, {{5}, {200}}, "g16");
  // A cache of 1,000 positions: the last chunk holds 40. Past the end sees all of it; negative, none.
  check_positions({true, 1, 8, 2, 1000, 128}, {{959}, {960}, {999}, {1000}, {5000}, {-1}}, "edges");
  // Two sequences, each at its own position, and both at one shared position.
  check_positions({false, 2, 8, 2, 512, 128}, {{3, 400}, {511, 0}, {77}}, "batch");
  // The query's heads taken from a wider projection (head stride 2 D, batch stride 2 H D).
  Setup strided{false, 2, 8, 4, 256, 64};
  strided.q_strided_heads = true;
  check_positions(strided, {{100, 7}}, "strided q");
}

TEST_CASE("gpu: decode attention with operands on the host or another dtype fails naming them" * AOTI_CUDA_GPU_CASE) {
  const Setup s{false, 1, 8, 2, 128, 64};
  const Operands o = operands(s, 5);
  OwnedTensor host_pos = empty({1}, {}, kI64);
  OwnedTensor out;
  aoti_cuda_shim_clear_error();
  CHECK(aoti_torch_cuda_aoti_cuda_decode_attention(o.q.device.get(), o.k.device.get(), o.v.device.get(),
                                                   host_pos.get(), 0.125, out.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("input_pos must be a CUDA tensor"));
  CHECK(out.get() == nullptr);
  OwnedTensor pos = positions_tensor({3});
  OwnedTensor host_v = empty({1, 2, 128, 64}, {}, kBF16);
  CHECK(aoti_torch_cuda_aoti_cuda_decode_attention(o.q.device.get(), o.k.device.get(), host_v.get(), pos.get(), 0.125,
                                                   out.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("v_cache must be a CUDA tensor"));
}

namespace {

// Runs `call` once under a CUDA-graph capture on a fresh stream (made current for the shim, with the capture
// arena a Module installs), then `replays(exec, stream)`; everything is torn down afterwards, the output's arena
// block (`out`, reset by the caller's lambda before the arena goes) included.
template <typename Call, typename Replays>
void in_captured_graph(Call call, Replays replays) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  void* previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous) == 0);
  {
    aoti_cuda::shim::CaptureArena arena(0);  // what a Module installs while it captures a graph
    cudaGraph_t graph = nullptr;
    AOTITorchError rc;
    {
      aoti_cuda::shim::CaptureArenaScope scope(&arena);
      REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
      rc = call();
      REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    }
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    replays(exec, stream);
    REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  }
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

}  // namespace

namespace {

// One capture of the plain form on the 4,096-context 1b model's layer shape, replayed at positions across the cache
// (each set in device memory before its replay).
void check_graph_replays() {
  const Setup s{false, 1, 16, 4, 4096, 128};
  const Operands o = operands(s, 77);
  const double scale = 1.0 / std::sqrt(128.0);
  OwnedTensor pos = positions_tensor({100});
  OwnedTensor out;
  in_captured_graph(
      [&] {
        return aoti_torch_cuda_aoti_cuda_decode_attention(o.q.device.get(), o.k.device.get(), o.v.device.get(),
                                                          pos.get(), scale, out.out());
      },
      [&](cudaGraphExec_t exec, cudaStream_t stream) {
        for (int64_t p : {int64_t{5}, int64_t{4000}, int64_t{128}, int64_t{4095}}) {
          REQUIRE(cudaMemcpyAsync(pos.data(), &p, 8, cudaMemcpyHostToDevice, stream) == cudaSuccess);
          REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
          REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
          CAPTURE(p);
          CHECK(max_error(s, o, {p}, scale, read(out, static_cast<std::size_t>(s.heads * s.dim))) < 1.0);
        }
        out.reset();  // the output's block came from the arena: released before the arena is
      });
}

}  // namespace

TEST_CASE("gpu: decode attention in a CUDA graph replays for the position in device memory" * AOTI_CUDA_GPU_CASE) {
  check_graph_replays();
}

namespace {

// The update form: the step's rows k_new / v_new [B, Hkv, 1, D] stored at each sequence's position (when in
// [0, L)), then the attention. Checks the caches bit for bit against the host's copy with the same rows stored,
// and the output against the float64 reference over those caches.
struct StepRows {
  Operand k_new, v_new;
};

StepRows step_rows(const Setup& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<int64_t> sizes = {s.batch, s.kv_heads, 1, s.dim};
  return {make(rng, sizes, dense(sizes), s.fp16), make(rng, sizes, dense(sizes), s.fp16)};
}

// Stores the step's rows in the host copies of the caches, as the shim must on the device.
void store_on_host(const Setup& s, Operands& o, const StepRows& r, const std::vector<int64_t>& positions) {
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t p = positions[positions.size() == 1 ? 0 : b];
    if (p < 0 || p >= s.cache_len) continue;
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      for (int64_t d = 0; d < s.dim; ++d) {
        const int64_t from = (b * s.kv_heads + h) * s.dim + d;
        o.k.host[b * o.k.strides[0] + h * o.k.strides[1] + p * o.k.strides[2] + d] = r.k_new.host[from];
        o.v.host[b * o.v.strides[0] + h * o.v.strides[1] + p * o.v.strides[2] + d] = r.v_new.host[from];
      }
    }
  }
}

bool caches_equal(const Operands& expected) {
  return read(expected.k.device, expected.k.host.size()) == expected.k.host &&
         read(expected.v.device, expected.v.host.size()) == expected.v.host;
}

void check_update(const Setup& s, const std::vector<std::vector<int64_t>>& position_sets, const char* what) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  const StepRows r = step_rows(s, 99);
  for (const std::vector<int64_t>& positions : position_sets) {
    Operands o = operands(s, 4321);  // fresh caches for every set
    OwnedTensor pos = positions_tensor(positions);
    OwnedTensor out;
    const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_decode_attention_update(
        o.q.device.get(), r.k_new.device.get(), r.v_new.device.get(), o.k.device.get(), o.v.device.get(), pos.get(),
        scale, out.out());
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    store_on_host(s, o, r, positions);
    std::string label = std::string(what) + (s.fp16 ? " fp16" : " bf16") + " D=" + std::to_string(s.dim) +
                        " g=" + std::to_string(s.heads / s.kv_heads) + " L=" + std::to_string(s.cache_len) + " pos";
    for (int64_t p : positions) label += " " + std::to_string(p);
    CAPTURE(label);
    CHECK(caches_equal(o));
    CHECK(max_error(s, o, positions, scale, read(out, static_cast<std::size_t>(s.batch * s.heads * s.dim))) < 1.0);
  }
}

}  // namespace

TEST_CASE("gpu: decode attention, update form: the step's rows stored at the position, then attended" *
          AOTI_CUDA_GPU_CASE) {
  for (bool fp16 : {false, true}) {
    for (int64_t dim : {64, 128}) {
      // Chunk edges (63, 64), the first and the last position; a cache length that is not a multiple of the chunk.
      check_update({fp16, 1, 8, 2, 1000, dim}, {{0}, {63}, {64}, {999}}, "grid");
    }
  }
  check_update({false, 1, 6, 2, 300, 128}, {{0}, {200}}, "g3");     // groups served in parts
  check_update({false, 1, 32, 2, 300, 64}, {{131}}, "g16");
  check_update({false, 1, 8, 2, 512, 128}, {{512}, {5000}, {-1}}, "outside");  // nothing stored
  check_update({false, 2, 8, 2, 512, 128}, {{3, 400}, {511, 0}, {77}}, "batch");
  Setup strided{false, 2, 8, 4, 256, 64};
  strided.q_strided_heads = true;
  check_update(strided, {{100, 7}}, "strided q");
}

TEST_CASE("gpu: decode attention, update form, in a CUDA graph: each replay stores at the position in memory" *
          AOTI_CUDA_GPU_CASE) {
  const Setup s{false, 1, 16, 4, 4096, 128};
  Operands o = operands(s, 78);
  const StepRows r = step_rows(s, 79);
  const double scale = 1.0 / std::sqrt(128.0);
  OwnedTensor pos = positions_tensor({100});
  OwnedTensor out;
  in_captured_graph(
      [&] {
        return aoti_torch_cuda_aoti_cuda_decode_attention_update(o.q.device.get(), r.k_new.device.get(),
                                                                 r.v_new.device.get(), o.k.device.get(),
                                                                 o.v.device.get(), pos.get(), scale, out.out());
      },
      [&](cudaGraphExec_t exec, cudaStream_t stream) {
        CHECK(caches_equal(o));  // capturing ran nothing
        for (int64_t p : {int64_t{5}, int64_t{4000}, int64_t{128}, int64_t{4095}}) {
          REQUIRE(cudaMemcpyAsync(pos.data(), &p, 8, cudaMemcpyHostToDevice, stream) == cudaSuccess);
          REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
          REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
          store_on_host(s, o, r, {p});  // the rows of earlier replays stay
          CAPTURE(p);
          CHECK(caches_equal(o));
          CHECK(max_error(s, o, {p}, scale, read(out, static_cast<std::size_t>(s.heads * s.dim))) < 1.0);
        }
        out.reset();
      });
}

namespace {

// The qkv form against the update form: the same call with q and the step's K row rotated on the host, with the
// rounding the kernel must reproduce (each float32 product rounded, then the sum, then 16 bits), so the outputs
// and the caches must be identical, bit for bit. The tables hold the model's angles: row p, column j is
// p / 10000^(j / (D/2)).
OwnedTensor upload16(const std::vector<uint16_t>& host, const std::vector<int64_t>& sizes, bool fp16) {
  OwnedTensor t = empty(sizes, {}, fp16 ? kF16 : kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpy(t.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
  return t;
}

uint16_t rotate_on_host(uint16_t first, uint16_t second, float c, float s, bool first_half, bool fp16) {
  const float x1 = from16(first, fp16), x2 = from16(second, fp16);
  volatile float a = first_half ? x1 * c : x2 * c;  // volatile: each product rounded on its own, as the model does
  volatile float b = first_half ? x2 * s : x1 * s;
  return to16(first_half ? a - b : a + b, fp16);
}

void check_qkv(const Setup& s, const std::vector<std::vector<int64_t>>& position_sets, int64_t table_rows,
               const char* what) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  const int64_t half = s.dim / 2, width = (s.heads + 2 * s.kv_heads) * s.dim;
  std::mt19937 rng(555);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> qkv(static_cast<std::size_t>(s.batch * width));
  for (uint16_t& x : qkv) x = to16(dist(rng), s.fp16);
  std::vector<float> cos_t(static_cast<std::size_t>(table_rows * half)), sin_t(cos_t.size());
  for (int64_t p = 0; p < table_rows; ++p) {
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(j) / static_cast<double>(half));
      cos_t[p * half + j] = static_cast<float>(std::cos(angle));
      sin_t[p * half + j] = static_cast<float>(std::sin(angle));
    }
  }
  OwnedTensor qkv_d = upload16(qkv, {s.batch, 1, width}, s.fp16);
  OwnedTensor cos_d = empty({table_rows, half}, {}, 6, kCUDA, 0), sin_d = empty({table_rows, half}, {}, 6, kCUDA, 0);
  REQUIRE(cudaMemcpy(cos_d.data(), cos_t.data(), cos_t.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(sin_d.data(), sin_t.data(), sin_t.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  for (const std::vector<int64_t>& positions : position_sets) {
    // The rows the update form gets: q [B, H, 1, D] and k_new rotated with each sequence's row, v_new as it is.
    std::vector<uint16_t> q(static_cast<std::size_t>(s.batch * s.heads * s.dim));
    std::vector<uint16_t> k_new(static_cast<std::size_t>(s.batch * s.kv_heads * s.dim)), v_new(k_new.size());
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t raw = positions[positions.size() == 1 ? 0 : b];
      const int64_t row = std::clamp<int64_t>(raw, 0, table_rows - 1);
      const uint16_t* token = qkv.data() + b * width;
      auto rotate_head = [&](const uint16_t* head, uint16_t* out) {
        for (int64_t d = 0; d < s.dim; ++d) {
          const int64_t j = d % half;
          out[d] = rotate_on_host(head[j], head[j + half], cos_t[row * half + j], sin_t[row * half + j], d < half,
                                  s.fp16);
        }
      };
      for (int64_t h = 0; h < s.heads; ++h) rotate_head(token + h * s.dim, q.data() + (b * s.heads + h) * s.dim);
      for (int64_t h = 0; h < s.kv_heads; ++h) {
        rotate_head(token + (s.heads + h) * s.dim, k_new.data() + (b * s.kv_heads + h) * s.dim);
        std::copy_n(token + (s.heads + s.kv_heads + h) * s.dim, s.dim, v_new.data() + (b * s.kv_heads + h) * s.dim);
      }
    }
    OwnedTensor q_d = upload16(q, {s.batch, s.heads, 1, s.dim}, s.fp16);
    OwnedTensor k_new_d = upload16(k_new, {s.batch, s.kv_heads, 1, s.dim}, s.fp16);
    OwnedTensor v_new_d = upload16(v_new, {s.batch, s.kv_heads, 1, s.dim}, s.fp16);
    Operands fused = operands(s, 4321), reference = operands(s, 4321);  // the same caches twice
    OwnedTensor pos = positions_tensor(positions);
    OwnedTensor out_fused, out_reference;
    AOTITorchError rc = aoti_torch_cuda_aoti_cuda_decode_attention_qkv(
        qkv_d.get(), cos_d.get(), sin_d.get(), fused.k.device.get(), fused.v.device.get(), pos.get(), s.heads, scale,
        out_fused.out());
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    rc = aoti_torch_cuda_aoti_cuda_decode_attention_update(q_d.get(), k_new_d.get(), v_new_d.get(),
                                                           reference.k.device.get(), reference.v.device.get(),
                                                           pos.get(), scale, out_reference.out());
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::string label = std::string(what) + (s.fp16 ? " fp16" : " bf16") + " D=" + std::to_string(s.dim) +
                        " g=" + std::to_string(s.heads / s.kv_heads) + " L=" + std::to_string(s.cache_len) +
                        " table rows " + std::to_string(table_rows) + " pos";
    for (int64_t p : positions) label += " " + std::to_string(p);
    CAPTURE(label);
    const std::size_t n_out = static_cast<std::size_t>(s.batch * s.heads * s.dim);
    CHECK(read(out_fused, n_out) == read(out_reference, n_out));
    CHECK(read(fused.k.device, fused.k.host.size()) == read(reference.k.device, reference.k.host.size()));
    CHECK(read(fused.v.device, fused.v.host.size()) == read(reference.v.device, reference.v.host.size()));
  }
}

}  // namespace

TEST_CASE("gpu: decode attention: one query head a block at short positions, a group's heads a block at long ones" *
          AOTI_CUDA_GPU_CASE) {
  // Pass 1 serves one query head a block until the visible chunks reach grouped_from_chunks (which depends on the
  // GPU's SM count; the shim calls run on device 0), then heads_per_block heads of a KV group from one read of K and
  // V. Positions on both sides of that switch, for each group size the grouped path has (8, 4, 2; g = 3 is never
  // grouped), against float64, the update form included; and the qkv form bit for bit against the update form on
  // both sides.
  namespace da = aoti_cuda::shim::decode_attention;
  struct Shape {
    bool fp16;
    int64_t heads, kv_heads, dim;
  };
  for (const Shape& shape : {Shape{false, 32, 4, 128}, Shape{true, 16, 4, 64}, Shape{false, 12, 6, 128},
                             Shape{false, 6, 2, 128}}) {
    const int64_t batch = 8;
    const int64_t from = da::grouped_from_chunks(shape.heads, batch, aoti_cuda::shim::multiprocessor_count(0));
    REQUIRE(from >= 2);  // a GPU of at least 64 SMs: both sides exist
    const int64_t cache = (from + 2) * da::kChunk;
    const int64_t below = (from - 1) * da::kChunk - 1;  // (from - 1) chunks visible: one head a block
    const int64_t above = from * da::kChunk;            // from + 1 chunks: grouped
    CAPTURE(from);
    const Setup s{shape.fp16, batch, shape.heads, shape.kv_heads, cache, shape.dim};
    check_positions(s, {{below}, {above}, {cache - 1}, {below, above, 0, cache - 1, 5, above + 7, below - 3, 64}},
                    "switch");
    check_update(s, {{below}, {above}}, "switch");
    check_qkv(s, {{below}, {above}}, cache, "switch");
  }
}

TEST_CASE("gpu: decode attention, qkv form: q and the step's key rotated on the fly equal the update form on "
          "rows rotated on the host, bit for bit" * AOTI_CUDA_GPU_CASE) {
  for (bool fp16 : {false, true}) {
    for (int64_t dim : {64, 128}) check_qkv({fp16, 1, 8, 2, 1000, dim}, {{0}, {63}, {64}, {999}}, 1000, "grid");
  }
  check_qkv({false, 1, 16, 4, 4096, 128}, {{128}, {4000}}, 4096, "1b");  // the 1.1B model's attention
  check_qkv({false, 1, 6, 2, 300, 128}, {{200}}, 300, "g3");
  check_qkv({false, 2, 8, 2, 512, 128}, {{3, 400}, {511, 0}}, 512, "batch");
  // Positions past the table use its last row; past the cache nothing is stored.
  check_qkv({false, 1, 8, 2, 512, 64}, {{300}, {5000}, {-1}}, 256, "clamped");
}

TEST_CASE("gpu: decode attention as one kernel over thread-block clusters (OpSettings::attention_cluster 8 and 16)" *
          AOTI_CUDA_GPU_CASE) {
  // The one-kernel form: each query head's chunks split over a cluster's blocks (block r reads chunks r, r + C, ...)
  // and merged in distributed shared memory. The same cases as the two-kernel form above: against float64 (positions
  // where some blocks read nothing, one chunk, several chunks a block; odd cache lengths; clamped, negative and
  // per-sequence positions; strided q), the update form's stored rows bit for bit, the qkv form bit for bit against
  // the update form, and graph replays across a 4,096 cache (4000: 63 chunks, 8 a block with C = 8).
  namespace da = aoti_cuda::shim::decode_attention;
  int major = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  for (int wanted : {16, 8}) {
    CAPTURE(wanted);
    aoti_cuda::shim::OpSettings settings;
    settings.attention_cluster = wanted;
    const aoti_cuda::shim::OpSettingsScope scope(&settings);
    for (bool fp16 : {false, true}) {
      for (int dim : {64, 128}) {
        da::Problem p;
        p.fp16 = fp16;
        p.head_dim = dim;
        REQUIRE(cudaSetDevice(0) == cudaSuccess);
        // sm_90 and newer GPUs run clusters of 16 blocks (beyond the portable 8) of this small kernel; older
        // ones have no clusters: two kernels.
        CHECK(da::cluster_blocks(p, wanted, 0) == (major >= 9 ? wanted : 0));
        CHECK(da::cluster_blocks(p, 0, 0) == 0);
      }
    }
    if (major < 9) {
      MESSAGE("below sm_90: the one-kernel form falls back to two kernels; its cases ran against the two-kernel form");
    }
    const int64_t cache = 1024;
    for (bool fp16 : {false, true}) {
      for (int64_t dim : {64, 128}) {
        check_positions({fp16, 1, 8, 2, cache, dim}, {{0}, {1}, {63}, {64}, {127}, {128}, {511}, {512}, {1000},
                                                      {cache - 1}},
                        "cluster");
      }
    }
    check_positions({false, 1, 6, 2, 300, 128}, {{0}, {63}, {64}, {299}}, "cluster g3");
    check_positions({true, 1, 8, 2, 1000, 128}, {{959}, {960}, {999}, {1000}, {5000}, {-1}}, "cluster edges");
    check_positions({false, 2, 8, 2, 512, 128}, {{3, 400}, {511, 0}, {-1, 77}}, "cluster batch");
    Setup strided{false, 2, 8, 4, 256, 64};
    strided.q_strided_heads = true;
    check_positions(strided, {{100, 7}}, "cluster strided q");
    check_positions({false, 1, 16, 4, 4096, 128}, {{128}, {2047}, {4000}, {4095}}, "cluster 1b");
    check_update({false, 1, 8, 2, 1000, 128}, {{0}, {63}, {64}, {999}}, "cluster");
    check_update({false, 2, 8, 2, 512, 128}, {{3, 400}, {512, -1}}, "cluster batch");
    check_qkv({false, 1, 16, 4, 4096, 128}, {{128}, {1500}, {4000}}, 4096, "cluster 1b");
    check_qkv({true, 2, 8, 2, 512, 64}, {{3, 400}, {511, 0}}, 512, "cluster batch");
    check_graph_replays();
  }
}

TEST_CASE("gpu: decode attention's form by default (OpSettings::kClusterAuto): clusters of 8 for caches of at most 8 "
          "chunks, two kernels otherwise; both forms pinned at small caches match float64" * AOTI_CUDA_GPU_CASE) {
  namespace da = aoti_cuda::shim::decode_attention;
  const int sms = aoti_cuda::shim::multiprocessor_count(0);
  REQUIRE(sms >= 64);  // below: the block limits of the cases below would move
  auto problem = [](int64_t batch, int64_t heads, int64_t cache_len) {
    da::Problem p;
    p.batch = batch;
    p.heads = heads;
    p.kv_heads = 4;
    p.cache_len = cache_len;
    p.head_dim = 128;
    return p;
  };
  CHECK(da::auto_cluster(problem(1, 16, 512), sms) == 8);  // 8 chunks: one a block
  CHECK(da::auto_cluster(problem(1, 16, 64), sms) == 8);
  CHECK(da::auto_cluster(problem(1, 16, 1), sms) == 8);
  CHECK(da::auto_cluster(problem(1, 16, 513), sms) == 0);   // 9 chunks: a block would read two
  CHECK(da::auto_cluster(problem(1, 16, 4096), sms) == 0);
  CHECK(da::auto_cluster(problem(4, 16, 512), sms) == (4 * 16 * 8 <= 4 * sms ? 8 : 0));
  CHECK(da::auto_cluster(problem(64, 32, 512), sms) == 0);  // 16,384 blocks: more than 4 an SM
  CHECK(da::auto_cluster(problem(1, 16, 512), 0) == 0);     // an unknown SM count reads as 1
  CHECK(aoti_cuda::shim::OpSettings{}.attention_cluster == aoti_cuda::shim::OpSettings::kClusterAuto);

  // The default at small caches (the one-kernel form on sm_90, two kernels below), then both forms pinned, each
  // against float64: what the other cases at caches of at most 512 positions run by default.
  for (const int form : {aoti_cuda::shim::OpSettings::kClusterAuto, 0, 8}) {
    CAPTURE(form);
    aoti_cuda::shim::OpSettings settings;
    settings.attention_cluster = form;
    const aoti_cuda::shim::OpSettingsScope scope(&settings);
    check_positions({false, 1, 16, 4, 512, 128}, {{0}, {63}, {64}, {128}, {383}, {448}, {511}, {600}}, "auto 1b");
    check_positions({true, 1, 6, 2, 300, 64}, {{0}, {63}, {64}, {299}}, "auto g3");
    check_positions({false, 1, 32, 2, 300, 64}, {{5}, {200}}, "auto g16");
    check_positions({false, 2, 8, 2, 512, 128}, {{3, 400}, {511, 0}, {-1, 77}}, "auto batch");
    check_update({false, 1, 8, 2, 512, 128}, {{0}, {63}, {64}, {511}}, "auto");
    check_qkv({false, 1, 16, 4, 512, 128}, {{128}, {300}, {511}}, 512, "auto 1b");
  }
}

TEST_CASE("gpu: decode attention's pass 1 alone (launch_chunks) leaves the chunks that both passes merge" *
          AOTI_CUDA_GPU_CASE) {
  // launch_chunks() runs pass 1 without the merge kernel: the output stays untouched, and the chunk outputs and
  // log2-sum-exps it leaves in the scratch, merged on the host in float64, give launch()'s output. Positions with
  // one chunk, a chunk edge and many chunks (grouped heads at the last), a negative one (no chunk).
  namespace da = aoti_cuda::shim::decode_attention;
  const Setup s{false, 2, 16, 4, 4096, 128};
  const Operands o = operands(s, 77);
  const std::size_t out_elems = static_cast<std::size_t>(s.batch * s.heads * s.dim);
  for (const int64_t position : {int64_t{5}, int64_t{63}, int64_t{128}, int64_t{4000}, int64_t{-1}}) {
    CAPTURE(position);
    OwnedTensor pos = positions_tensor({position});
    da::Problem p;
    p.q = o.q.device.data();
    p.k = o.k.device.data();
    p.v = o.v.device.data();
    p.pos = static_cast<const int64_t*>(pos.data());
    p.batch = s.batch;
    p.heads = s.heads;
    p.kv_heads = s.kv_heads;
    p.cache_len = s.cache_len;
    p.head_dim = static_cast<int>(s.dim);
    p.q_stride[0] = o.q.strides[0];
    p.q_stride[1] = o.q.strides[1];
    for (int d = 0; d < 3; ++d) p.k_stride[d] = p.v_stride[d] = o.k.strides[d];
    p.scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
    const std::size_t scratch_bytes = da::scratch_bytes(p);
    void *out = nullptr, *scratch = nullptr;
    REQUIRE(cudaMalloc(&out, out_elems * 2) == cudaSuccess);
    REQUIRE(cudaMalloc(&scratch, scratch_bytes) == cudaSuccess);
    const int sms = aoti_cuda::shim::multiprocessor_count(0);
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    // Pass 1 alone, with the output filled with a sentinel it must keep.
    REQUIRE(cudaMemset(out, 0x7f, out_elems * 2) == cudaSuccess);
    p.out = out;
    REQUIRE(da::launch_chunks(p, scratch, stream, sms) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    const std::vector<uint16_t> kept = read_raw(out, out_elems);
    CHECK(std::all_of(kept.begin(), kept.end(), [](uint16_t x) { return x == 0x7f7f; }));
    std::vector<float> part(scratch_bytes / sizeof(float));
    REQUIRE(cudaMemcpy(part.data(), scratch, scratch_bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    // Both passes.
    REQUIRE(da::launch(p, scratch, stream, sms) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    const std::vector<uint16_t> merged = read_raw(out, out_elems);
    cudaStreamDestroy(stream);
    cudaFree(out);
    cudaFree(scratch);
    // The host merge of pass 1's chunks, against both passes' output.
    const int64_t chunks = da::chunks(s.cache_len);
    const int64_t used = position < 0 ? 0 : std::min(position + 1, s.cache_len);
    const float* lse = part.data() + static_cast<std::size_t>(s.batch * s.heads * chunks * s.dim);
    double worst = 0;
    for (int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
      double m = -INFINITY;
      for (int64_t c = 0; c * da::kChunk < used; ++c) m = std::max(m, static_cast<double>(lse[bh * chunks + c]));
      for (int64_t d = 0; d < s.dim; ++d) {
        double sum = 0, acc = 0;
        for (int64_t c = 0; c * da::kChunk < used; ++c) {
          const double w = std::exp2(lse[bh * chunks + c] - m);
          sum += w;
          acc += w * part[static_cast<std::size_t>((bh * chunks + c) * s.dim + d)];
        }
        const double ref = used == 0 ? 0 : acc / sum;
        const double got = from16(merged[static_cast<std::size_t>(bh * s.dim + d)], false);
        worst = std::max(worst, std::fabs(got - ref) / allowed(ref, false));
      }
    }
    CHECK(worst < 1.0);
  }
}

TEST_CASE("gpu: decode attention's merge in slices past 8 chunks (OpSettings::merge_slices) and its one-column "
          "form both match float64" * AOTI_CUDA_GPU_CASE) {
  // Up to 8 chunks the merge kernel runs its one-column loop either way; past that, by default, each of 4 slices of
  // the block merges every 4th chunk and the slices meet in shared memory. Both forms explicitly (the other cases
  // run the default): both sides of 512 positions, chunk counts that 4 does not divide, the whole cache, head_dim 64
  // and 128, both dtypes, mixed batches, the forms that write the cache, and graph replays across the cache.
  for (const bool sliced : {true, false}) {
    CAPTURE(sliced);
    aoti_cuda::shim::OpSettings settings;
    settings.merge_slices = sliced;
    const aoti_cuda::shim::OpSettingsScope scope(&settings);
    check_positions({false, 1, 16, 4, 4096, 128}, {{511}, {512}, {575}, {576}, {1000}, {4000}, {4095}}, "slices 1b");
    check_positions({true, 2, 8, 2, 1000, 64}, {{600, 999}, {100, 700}, {-1, 513}}, "slices batch");
    check_positions({false, 1, 6, 2, 1100, 128}, {{1099}, {5000}}, "slices g3");
    check_update({false, 1, 8, 2, 1000, 128}, {{512}, {999}}, "slices");
    check_qkv({false, 1, 16, 4, 4096, 128}, {{1500}, {4000}}, 4096, "slices");
    check_graph_replays();
  }
}
