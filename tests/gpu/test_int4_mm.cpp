// aoti_torch_cuda__weight_int4pack_mm on the GPU:
//   * self-contained cases: weights packed here with the layout formula of
//     src/shim/ops/weight_int4pack_mm.hpp, checked against a host reference;
//   * PyTorch's vectors (tools/int4/gen_vectors.py, run on a GPU machine with torch) from
//     $AOTI_CUDA_INT4_VECTORS: every group size, innerKTiles, M in {1..2048}, LLM shapes,
//     checked against torch.ops.aten._weight_int4pack_mm and a float32 reference.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/op_settings.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"
#include "shim/tensor_object.hpp"
#include "support/gpu.hpp"
#include "support/int4_packing.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::OwnedTensor;
using aoti_cuda_test::pack;
using aoti_cuda_test::random_weights;
using aoti_cuda_test::RandomWeights;
using aoti_cuda_test::weight_at;
using aoti_cuda_test::weight_exact;
using namespace aoti_cuda_test::codes;

namespace {

float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

template <class T>
OwnedTensor upload(const std::vector<T>& host, const std::vector<int64_t>& sizes, int32_t dtype) {
  OwnedTensor t = empty(sizes, {}, dtype, kCUDA, 0);
  REQUIRE(cudaMemcpy(t.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  // From pageable memory cudaMemcpy may return before its DMA has landed, and the kernels run on a
  // non-blocking stream that does not wait for the legacy stream's copy: wait for it here.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return t;
}

// Runs the op on `stream` (made current for the call) and returns the output as floats.
std::vector<float> run_mm(const OwnedTensor& x, const OwnedTensor& w, int64_t group, const OwnedTensor& sz,
                          int64_t m, int64_t n, cudaStream_t stream) {
  void* previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous) == 0);
  OwnedTensor out;
  AOTITorchError rc = aoti_torch_cuda__weight_int4pack_mm(x.get(), w.get(), group, sz.get(), out.out());
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  CHECK(out.sizes() == std::vector<int64_t>{m, n});
  std::vector<uint16_t> bits(static_cast<std::size_t>(m * n));
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  if (!bits.empty()) {
    REQUIRE(cudaMemcpy(bits.data(), out.data(), bits.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  std::vector<float> result(bits.size());
  std::transform(bits.begin(), bits.end(), result.begin(), bf16_to_float);
  return result;
}

struct Mismatch {
  double worst = 0;  // largest |got - want| / bound
  std::size_t count = 0;
};

// |got - want| <= rel * |want| + abs_frac * max|want|, elementwise.
Mismatch compare(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs_frac) {
  double max_abs = 0;
  for (float v : want) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
  Mismatch r;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = rel * std::fabs(want[i]) + abs_frac * max_abs + 1e-30;
    const double ratio = std::fabs(static_cast<double>(got[i]) - want[i]) / bound;
    r.worst = std::max(r.worst, ratio);
    r.count += ratio > 1.0;
  }
  return r;
}

// The multiply is right when it matches either arithmetic the int4 kernels use (weight_int4pack_gemv.cu): weights
// rounded to bf16 before the multiply (torch's kernel, the tile kernels, the dequantize-first streaming form) or
// unrounded (the streaming kernel's scale-after form, where a group covers whole super-tiles). Whole outputs are
// held to one reference or the other, never element by element.
Mismatch either(const Mismatch& rounded, const Mismatch& exact) {
  return exact.count < rounded.count || (exact.count == rounded.count && exact.worst < rounded.worst) ? exact
                                                                                                     : rounded;
}

// Random bf16 activations [m, k] in [-1, 1).
std::vector<uint16_t> random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<uint16_t> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = float_to_bf16(unit(rng));
  return x;
}

// One self-contained case: random q/scales/zeros/x, host reference with bf16-rounded weights.
void self_contained_case(int64_t m, int64_t n, int64_t k, int group, int ikt, cudaStream_t stream) {
  std::mt19937 rng(static_cast<uint32_t>(m * 7919 + n * 31 + k + group + ikt));
  const RandomWeights rw = random_weights(n, k, group, rng);
  const std::vector<uint8_t>& q = rw.q;
  const std::vector<uint16_t>& sz = rw.sz;
  const std::vector<uint16_t> x = random_activations(m, k, rng);
  std::vector<float> want(static_cast<std::size_t>(m * n), 0.f), want_exact(want.size(), 0.f);
  for (int64_t col = 0; col < n; ++col) {
    std::vector<float> wcol(static_cast<std::size_t>(k));
    std::vector<double> wexact(static_cast<std::size_t>(k));
    for (int64_t kk = 0; kk < k; ++kk) {
      wcol[static_cast<std::size_t>(kk)] = weight_at(rw, n, k, group, col, kk);
      wexact[static_cast<std::size_t>(kk)] = weight_exact(rw, n, k, group, col, kk);
    }
    for (int64_t row = 0; row < m; ++row) {
      double acc = 0, acc_exact = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double xv = bf16_to_float(x[static_cast<std::size_t>(row * k + kk)]);
        acc += xv * wcol[kk];
        acc_exact += xv * wexact[kk];
      }
      want[static_cast<std::size_t>(row * n + col)] = static_cast<float>(acc);
      want_exact[static_cast<std::size_t>(row * n + col)] = static_cast<float>(acc_exact);
    }
  }
  OwnedTensor dx = upload(x, {m, k}, kBF16);
  OwnedTensor dw = upload(pack(q, n, k, ikt), {n / 8, k / (16 * ikt), 32, ikt / 2}, kI32);
  OwnedTensor dsz = upload(sz, {k / group, n, 2}, kBF16);
  std::vector<float> got = run_mm(dx, dw, group, dsz, m, n, stream);
  Mismatch r = either(compare(got, want, 1.0 / 128, 1e-3), compare(got, want_exact, 1.0 / 128, 1e-3));
  INFO("m=" << m << " n=" << n << " k=" << k << " group=" << group << " innerKTiles=" << ikt);
  CHECK_MESSAGE(r.count == 0, "worst error / tolerance " << r.worst);
}

template <class T>
std::vector<T> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

TEST_CASE("int4pack_mm: self-contained packing and reference, every group size and innerKTiles" *
          AOTI_CUDA_GPU_CASE) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  for (int ikt : {2, 4, 8})
    for (int group : {32, 64, 128, 256})
      for (int64_t m : {1, 5, 16, 40, 100}) self_contained_case(m, 48, 512, group, ikt, stream);
  self_contained_case(256, 512, 1024, 128, 8, stream);  // large M: dequantize + cuBLAS (M >= 65)
  self_contained_case(3, 8, 128, 128, 8, stream);  // one n-tile, one k-super-tile
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("int4pack_mm: M = 0 gives an empty [0, N] output" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor x = empty({0, 256}, {}, kBF16, kCUDA, 0);
  OwnedTensor w = empty({2, 2, 32, 4}, {}, kI32, kCUDA, 0);
  OwnedTensor sz = empty({2, 16, 2}, {}, kBF16, kCUDA, 0);
  std::vector<float> got = run_mm(x, w, 128, sz, 0, 16, nullptr);
  CHECK(got.empty());
}

namespace {

struct VectorCase {
  int64_t id = 0, wid = 0, m = 0, n = 0, k = 0, group = 0, ikt = 0;
};

// The cases of $AOTI_CUDA_INT4_VECTORS/index.txt; empty (with a visible message) when unset.
std::vector<VectorCase> vector_cases(std::string& dir) {
  const char* env = std::getenv("AOTI_CUDA_INT4_VECTORS");
  std::vector<VectorCase> cases;
  if (env == nullptr || *env == '\0') {
    MESSAGE("SKIPPED: AOTI_CUDA_INT4_VECTORS is not set (generate with tools/int4/gen_vectors.py on a GPU machine)");
    return cases;
  }
  dir = std::string(env) + "/";
  std::ifstream index(dir + "index.txt");
  REQUIRE_MESSAGE(index.good(), "no index.txt in " << dir);
  std::string line;
  while (std::getline(index, line)) {
    std::istringstream fields(line);
    VectorCase c;
    if (fields >> c.id >> c.wid >> c.m >> c.n >> c.k >> c.group >> c.ikt) cases.push_back(c);
  }
  REQUIRE(!cases.empty());
  return cases;
}

struct LoadedCase {
  OwnedTensor x, w, sz;
  std::vector<float> torch_out, ref;
  std::vector<float> ref_exact, torch_exact;  // empty for vectors written before ref_exact files existed
};

LoadedCase load_case(const std::string& dir, const VectorCase& c) {
  LoadedCase l;
  l.x = upload(read_file<uint16_t>(dir + "x_" + std::to_string(c.id) + ".bin"), {c.m, c.k}, kBF16);
  l.w = upload(read_file<int32_t>(dir + "w_" + std::to_string(c.wid) + ".bin"), {c.n / 8, c.k / (16 * c.ikt), 32, c.ikt / 2},
               kI32);
  l.sz = upload(read_file<uint16_t>(dir + "sz_" + std::to_string(c.wid) + ".bin"), {c.k / c.group, c.n, 2}, kBF16);
  std::vector<uint16_t> bits = read_file<uint16_t>(dir + "torch_" + std::to_string(c.id) + ".bin");
  l.torch_out.resize(bits.size());
  std::transform(bits.begin(), bits.end(), l.torch_out.begin(), bf16_to_float);
  l.ref = read_file<float>(dir + "ref_" + std::to_string(c.id) + ".bin");
  REQUIRE(l.torch_out.size() == static_cast<std::size_t>(c.m * c.n));
  REQUIRE(l.ref.size() == l.torch_out.size());
  // With unrounded weights (gen_vectors.py since 2026-12-06): the reference of the scale-after form, and torch's
  // output moved by the weights' rounding, which is what torch would give with those weights.
  const std::string exact = dir + "ref_exact_" + std::to_string(c.id) + ".bin";
  if (std::ifstream(exact).good()) {
    l.ref_exact = read_file<float>(exact);
    REQUIRE(l.ref_exact.size() == l.ref.size());
    l.torch_exact.resize(l.ref.size());
    for (std::size_t i = 0; i < l.ref.size(); ++i) l.torch_exact[i] = l.torch_out[i] + (l.ref_exact[i] - l.ref[i]);
  }
  return l;
}

}  // namespace

TEST_CASE("int4pack_mm: PyTorch vectors ($AOTI_CUDA_INT4_VECTORS)" * AOTI_CUDA_GPU_CASE) {
  std::string dir;
  double worst_torch = 0, worst_ref = 0;
  int cases = 0;
  for (const VectorCase& c : vector_cases(dir)) {
    LoadedCase l = load_case(dir, c);
    std::vector<float> got = run_mm(l.x, l.w, c.group, l.sz, c.m, c.n, nullptr);
    // Both kernels accumulate in fp32 and round once to bf16 (half an ulp = 2^-9 relative),
    // in different orders: within one bf16 ulp of each other, half an ulp (+ fp32 noise) of ref.
    Mismatch vs_torch = compare(got, l.torch_out, 1.0 / 128, 1e-3);
    Mismatch vs_ref = compare(got, l.ref, 1.0 / 256, 1e-4);
    if (!l.ref_exact.empty()) {
      vs_torch = either(vs_torch, compare(got, l.torch_exact, 1.0 / 128, 1e-3));
      vs_ref = either(vs_ref, compare(got, l.ref_exact, 1.0 / 256, 1e-4));
    }
    INFO("case " << c.id << ": m=" << c.m << " n=" << c.n << " k=" << c.k << " group=" << c.group
                 << " innerKTiles=" << c.ikt);
    CHECK_MESSAGE(vs_torch.count == 0, vs_torch.count << " elements off torch, worst error/tolerance " << vs_torch.worst);
    CHECK_MESSAGE(vs_ref.count == 0, vs_ref.count << " elements off the reference, worst " << vs_ref.worst);
    worst_torch = std::max(worst_torch, vs_torch.worst);
    worst_ref = std::max(worst_ref, vs_ref.worst);
    ++cases;
  }
  if (cases > 0) {
    MESSAGE(cases << " PyTorch cases; worst error/tolerance vs torch " << worst_torch << ", vs reference " << worst_ref);
  }
}

// Every tuning candidate of the kernels (bench/int4_bench.cu --variants) on the innerKTiles-8
// vectors, so switching the dispatch to any of them is covered.
TEST_CASE("int4pack_mm: every kernel variant on the PyTorch vectors" * AOTI_CUDA_GPU_CASE) {
  namespace mm = aoti_cuda::shim::int4mm;
  std::string dir;
  std::vector<int> runs(static_cast<std::size_t>(mm::variant_count()), 0);
  for (const VectorCase& c : vector_cases(dir)) {
    if (c.ikt != 8 || c.m > 2048) continue;
    LoadedCase l = load_case(dir, c);
    OwnedTensor out = empty({c.m, c.n}, {}, kBF16, kCUDA, 0);
    mm::Problem p;
    p.x = l.x.data();
    p.w = l.w.data();
    p.sz = l.sz.data();
    p.out = out.data();
    p.m = c.m; p.n = c.n; p.k = c.k; p.group = static_cast<int>(c.group); p.inner_k_tiles = 8;
    for (int v = 1; v < mm::variant_count(); ++v) {
      REQUIRE(cudaMemset(p.out, 0xFF, static_cast<std::size_t>(c.m * c.n * 2)) == cudaSuccess);  // NaN pattern
      if (mm::launch_variant(p, nullptr, v) != 0) {
        (void)cudaGetLastError();
        continue;  // not applicable to this M
      }
      std::vector<uint16_t> bits(static_cast<std::size_t>(c.m * c.n));
      REQUIRE(cudaMemcpy(bits.data(), p.out, bits.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
      std::vector<float> got(bits.size());
      std::transform(bits.begin(), bits.end(), got.begin(), bf16_to_float);
      Mismatch vs_torch = compare(got, l.torch_out, 1.0 / 128, 1e-3);
      if (!l.torch_exact.empty()) vs_torch = either(vs_torch, compare(got, l.torch_exact, 1.0 / 128, 1e-3));
      INFO("variant " << v << " (" << mm::variant_name(v) << "), case " << c.id << ": m=" << c.m << " n=" << c.n
                      << " k=" << c.k << " group=" << c.group);
      CHECK_MESSAGE(vs_torch.count == 0, vs_torch.count << " elements off torch, worst " << vs_torch.worst);
      ++runs[static_cast<std::size_t>(v)];
    }
  }
  std::ostringstream summary;
  for (int v = 1; v < mm::variant_count(); ++v) summary << " v" << v << ":" << runs[static_cast<std::size_t>(v)];
  MESSAGE("variant cases run:" << summary.str());
}

TEST_CASE("int4pack_mm: dequantize writes any slice of rows as the kernels dequantize them" * AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(23);
  for (int ikt : {2, 4, 8})
    for (int group : {32, 128}) {
      const int64_t n = 64, k = 256;
      const RandomWeights rw = random_weights(n, k, group, rng);
      const std::vector<uint8_t>& q = rw.q;
      const std::vector<uint16_t>& sz = rw.sz;
      OwnedTensor dw = upload(pack(q, n, k, ikt), {n / 8, k / (16 * ikt), 32, ikt / 2}, kI32);
      OwnedTensor dsz = upload(sz, {k / group, n, 2}, kBF16);
      aoti_cuda::shim::int4mm::Problem p;
      p.w = dw.data();
      p.sz = dsz.data();
      p.n = n;
      p.k = k;
      p.group = group;
      p.inner_k_tiles = ikt;
      const int64_t n0 = 16, rows = 24;
      OwnedTensor dense = empty({rows, k}, {}, kBF16, kCUDA, 0);
      REQUIRE(aoti_cuda::shim::int4mm::dequantize(p, n0, rows, dense.data(), nullptr) == 0);
      CHECK(aoti_cuda::shim::int4mm::dequantize(p, 4, 8, dense.data(), nullptr) != 0);    // not a multiple of 8
      CHECK(aoti_cuda::shim::int4mm::dequantize(p, 56, 16, dense.data(), nullptr) != 0);  // past N
      std::vector<uint16_t> got(static_cast<std::size_t>(rows * k));
      REQUIRE(cudaMemcpy(got.data(), dense.data(), got.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
      std::size_t bad = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t row = n0 + r;
          const std::size_t g = static_cast<std::size_t>((kk / group) * n + row) * 2;
          const double deq = (q[static_cast<std::size_t>(row * k + kk)] - 8.0) * bf16_to_float(sz[g]) +
                             bf16_to_float(sz[g + 1]);
          const float v = bf16_to_float(got[static_cast<std::size_t>(r * k + kk)]);
          bad += std::fabs(v - deq) > std::fabs(deq) / 256 + 1e-7;  // one bf16 rounding
        }
      INFO("innerKTiles " << ikt << " group " << group);
      CHECK(bad == 0);
    }
}

TEST_CASE("int4pack_mm: large M over weights past one dequantized slice (64 MiB)" * AOTI_CUDA_GPU_CASE) {
  // N x K x 2 bytes = 65 MiB: two slices; columns around the boundary (32768) are checked.
  const int64_t m = 72, n = 33280, k = 1024, group = 128;
  const int ikt = 8;
  std::mt19937 rng(29);
  const RandomWeights rw = random_weights(n, k, group, rng);
  const std::vector<uint16_t> x = random_activations(m, k, rng);
  OwnedTensor dx = upload(x, {m, k}, kBF16);
  OwnedTensor dw = upload(pack(rw.q, n, k, ikt), {n / 8, k / (16 * ikt), 32, ikt / 2}, kI32);
  OwnedTensor dsz = upload(rw.sz, {k / group, n, 2}, kBF16);
  const std::vector<float> got = run_mm(dx, dw, group, dsz, m, n, nullptr);
  std::vector<int64_t> cols;
  for (int64_t c = 0; c < 8; ++c) cols.push_back(c);
  for (int64_t c = 32768 - 16; c < 32768 + 16; ++c) cols.push_back(c);
  for (int64_t c = n - 8; c < n; ++c) cols.push_back(c);
  std::vector<float> got_cols, want_cols;
  for (int64_t col : cols) {
    for (int64_t row = 0; row < m; ++row) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        acc += bf16_to_float(x[static_cast<std::size_t>(row * k + kk)]) * weight_at(rw, n, k, group, col, kk);
      }
      want_cols.push_back(static_cast<float>(acc));
      got_cols.push_back(got[static_cast<std::size_t>(row * n + col)]);
    }
  }
  const Mismatch r = compare(got_cols, want_cols, 1.0 / 128, 1e-3);
  CHECK_MESSAGE(r.count == 0, "worst error / tolerance " << r.worst);
}

namespace {

// Runs fn(i) for i in [0, count) on all host cores (the float64 references of the large shapes).
template <class Fn>
void parallel_for(int64_t count, Fn fn) {
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(count, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < workers; ++t)
    pool.emplace_back([&, t] {
      for (int64_t i = t; i < count; i += workers) fn(i);
    });
  for (auto& th : pool) th.join();
}

// Random packed words (any 32-bit pattern is a valid word) and their dequantized weights
// wd[n][k] (bf16-rounded, as the kernels dequantize), decoded with the layout formula of
// weight_int4pack_mm.hpp (independently of pack(), which the other cases cover).
struct PackedCase {
  std::vector<int32_t> words;
  std::vector<uint16_t> sz;
  std::vector<float> wd, wd_exact;  // wd_exact: unrounded (the scale-after form's weights; float32 holds them)
};
PackedCase packed_case(int64_t n, int64_t k, int group, int ikt, uint32_t seed) {
  PackedCase c;
  const int words = ikt / 2;
  const int64_t k_super = k / (16 * ikt);
  c.words.resize(static_cast<std::size_t>(n * k / 8));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& w : c.words) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    w = static_cast<int32_t>(s >> 16);
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  c.sz.resize(static_cast<std::size_t>(k / group * n * 2));
  for (std::size_t i = 0; i < c.sz.size(); i += 2) {
    c.sz[i] = float_to_bf16(0.01f + 0.005f * unit(rng));
    c.sz[i + 1] = float_to_bf16(0.02f * unit(rng));
  }
  c.wd.resize(static_cast<std::size_t>(n * k));
  c.wd_exact.resize(c.wd.size());
  parallel_for(n / 8, [&](int64_t nt) {
    for (int64_t st = 0; st < k_super; ++st)
      for (int lane = 0; lane < 32; ++lane)
        for (int p = 0; p < words; ++p) {
          const uint32_t word = static_cast<uint32_t>(c.words[static_cast<std::size_t>(((nt * k_super + st) * 32 + lane) * words + p)]);
          const int64_t row = 8 * nt + lane / 4;
          for (int i = 0; i < 8; ++i) {
            const int64_t col = 16 * (ikt * st + 2 * p + (i % 4) / 2) + 8 * (i % 2) + 2 * (lane % 4) + i / 4;
            const std::size_t g = static_cast<std::size_t>((col / group) * n + row) * 2;
            const float q = static_cast<float>((word >> (4 * i)) & 15u);
            const float deq = (q - 8.f) * bf16_to_float(c.sz[g]) + bf16_to_float(c.sz[g + 1]);
            c.wd[static_cast<std::size_t>(row * k + col)] = bf16_to_float(float_to_bf16(deq));
            c.wd_exact[static_cast<std::size_t>(row * k + col)] = deq;
          }
        }
  });
  return c;
}

// M = 1..16 (the weight-streaming kernel's range) on one shape and group size: the float64
// reference of 16 rows, then each M takes the first M of them; every output element is checked,
// so an unwritten one fails too. constant_weights: the weight and its scales are marked as a
// program's constants (as the runtime marks them at load), so the shim lets the kernel issue its
// first weight loads before its dependent-launch wait (int4mm::Problem::weights_early).
void small_m_case(int64_t n, int64_t k, int group, int ikt, uint32_t seed, cudaStream_t stream,
                  bool constant_weights = false) {
  constexpr int64_t kRows = 16;
  const PackedCase c = packed_case(n, k, group, ikt, seed);
  std::mt19937 rng(seed + 1);
  const std::vector<uint16_t> x = random_activations(kRows, k, rng);
  std::vector<float> want(static_cast<std::size_t>(kRows * n)), want_exact(want.size());
  parallel_for(n, [&](int64_t col) {
    const float* wcol = c.wd.data() + col * k;
    const float* wexact = c.wd_exact.data() + col * k;
    for (int64_t row = 0; row < kRows; ++row) {
      double acc = 0, acc_exact = 0;
      const uint16_t* xr = x.data() + row * k;
      for (int64_t kk = 0; kk < k; ++kk) {
        acc += static_cast<double>(bf16_to_float(xr[kk])) * wcol[kk];
        acc_exact += static_cast<double>(bf16_to_float(xr[kk])) * wexact[kk];
      }
      want[static_cast<std::size_t>(row * n + col)] = static_cast<float>(acc);
      want_exact[static_cast<std::size_t>(row * n + col)] = static_cast<float>(acc_exact);
    }
  });
  OwnedTensor dw = upload(c.words, {n / 8, k / (16 * ikt), 32, ikt / 2}, kI32);
  OwnedTensor dsz = upload(c.sz, {k / group, n, 2}, kBF16);
  if (constant_weights) {
    for (const OwnedTensor* t : {&dw, &dsz}) {
      aoti_cuda::shim::checked_defined(t->get(), "weight")->storage->program_constant = true;
    }
  }
  for (int64_t m = 1; m <= kRows; ++m) {
    const std::vector<uint16_t> xm(x.begin(), x.begin() + m * k);
    OwnedTensor dx = upload(xm, {m, k}, kBF16);
    const std::vector<float> got = run_mm(dx, dw, group, dsz, m, n, stream);
    const std::vector<float> want_m(want.begin(), want.begin() + m * n);
    const std::vector<float> want_exact_m(want_exact.begin(), want_exact.begin() + m * n);
    // One bf16 rounding of the fp32 sum (half an ulp = 2^-9 relative) plus fp32 accumulation noise.
    const Mismatch r = either(compare(got, want_m, 1.0 / 256, 1e-4), compare(got, want_exact_m, 1.0 / 256, 1e-4));
    INFO("m=" << m << " n=" << n << " k=" << k << " group=" << group << " innerKTiles=" << ikt
              << (constant_weights ? " constant weights" : ""));
    CHECK_MESSAGE(r.count == 0, r.count << " elements off the float64 reference, worst error/tolerance " << r.worst);
  }
}

}  // namespace

TEST_CASE("int4pack_mm: M = 1..16 on the 1.1B model's shapes and the 4096/11008 ones, every group size, "
          "against float64" * AOTI_CUDA_GPU_CASE) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  // N x K: wqkv, wo, w13 (gate+up fused), w2 (down), output head (tools/export/llm, config 1b),
  // then the shapes of docs/benchmarks/int4.md.
  const int64_t shapes[][2] = {{3072, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048},
                               {4096, 4096}, {11008, 4096}, {4096, 11008}};
  uint32_t seed = 101;
  for (const auto& nk : shapes)
    for (int group : {32, 64, 128, 256}) small_m_case(nk[0], nk[1], group, 8, seed++, stream);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// The same with the weight-streaming kernel launched with programmatic dependent launch
// (OpSettings::dependent_launch, set here whatever the default): the kernel waits for its predecessor before
// touching memory (group 128), or before anything but its constant weights (group 32: weights marked as a
// program's constants), so every result must be as exact as without it.
TEST_CASE("int4pack_mm: M = 1..16 on the 1.1B model's shapes with dependent launch on, against float64" *
          AOTI_CUDA_GPU_CASE) {
  aoti_cuda::shim::OpSettings settings;
  settings.dependent_launch = true;
  const aoti_cuda::shim::OpSettingsScope scope(&settings);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const int64_t shapes[][2] = {{3072, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048}};
  uint32_t seed = 901;
  for (const auto& nk : shapes)
    for (int group : {32, 128}) small_m_case(nk[0], nk[1], group, 8, seed++, stream, group == 32);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("int4pack_mm: M = 1..16, odd n-tile counts, one super-tile, every innerKTiles and group size" *
          AOTI_CUDA_GPU_CASE) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  uint32_t seed = 7;
  for (int ikt : {2, 4, 8})
    for (int group : {32, 64, 128, 256}) {
      // 5 n-tiles (the last pair half empty); K of 5 super-tiles of innerKTiles 8 where the group allows it.
      small_m_case(40, group == 256 ? 768 : 640, group, ikt, seed++, stream);
      small_m_case(8, 256, group, ikt, seed++, stream);   // one n-tile
      // K of 38 super-tiles of innerKTiles 8 (76 of 4, 152 of 2): more chunks than warps per block.
      small_m_case(24, 38 * 128, group, ikt, seed++, stream);
    }
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}
