// Programmatic dependent launch (src/shim/ops/dependent_launch.hpp) on the GPU: a chain shaped like
// a decode step, where every kernel reads what the kernel right before it wrote:
//
//   y = x @ W1      few-row GEMV (mm_out), y pre-filled with NaN
//   a = attention(y as q [1, 16, 1, 128], K, V, position)   decode attention (two kernels)
//   z = a @ W2      int4 weight-streaming kernel (_weight_int4pack_mm)
//   u = z @ W3      few-row GEMV again
//
// Each consumer, launched with the overlap, may start while its producer still runs; it must see
// every byte the producer wrote. The chain runs with OpSettings::dependent_launch off (plain launches,
// stream order) and on, with inputs that change from run to run (a consumer reading too early would
// see the previous run's values or NaN), and every output must be bitwise the same: the kernels are
// deterministic, so any difference is a read before the producer's write landed.
//
// The second case runs the chain with its weights marked as the runtime marks a program's read-only
// constants (the int4 matmul then issues its first weight loads before its wait), with decode attention
// in both its forms (two kernels; one kernel over thread-block clusters). The third runs the fused
// exports' chain the same way (the fused linear operator, bf16 and int4, around the attention): there
// the projections also issue their first weight loads before their wait.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "aoti_cuda/shim.h"
#include "shim/op_settings.hpp"
#include "shim/tensor_object.hpp"
#include "support/gpu.hpp"
#include "support/half_bits.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::codes;

namespace {

// The chain's sizes: a 16-head, 4-KV-head attention of 128 dims over a 2048-position cache, between
// GEMVs large enough that a consumer launched early really overlaps its producer.
constexpr int64_t kIn = 8192, kHeads = 16, kKvHeads = 4, kDim = 128, kModel = kHeads * kDim, kCache = 2048;
constexpr int64_t kWide = 11264, kOut = 1024, kGroup = 128, kInnerKTiles = 8;

uint16_t bf16(float f) { return aoti_cuda_test::to16(f, false); }
float from_bf16(uint16_t b) { return aoti_cuda_test::from16(b, false); }

template <class T>
OwnedTensor device_tensor(const std::vector<T>& host, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, int32_t dtype) {
  OwnedTensor t = empty(sizes, strides, dtype, kCUDA, 0);
  REQUIRE(cudaMemcpy(t.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  // From pageable memory cudaMemcpy may return before its DMA has landed, and the kernels run on a
  // non-blocking stream that does not wait for the legacy stream's copy: wait for it here.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return t;
}

std::vector<uint16_t> random_bf16(std::size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& e : v) e = bf16(scale * unit(rng));
  return v;
}

std::vector<uint16_t> read_bf16(void* data, std::size_t n) {
  std::vector<uint16_t> v(n);
  REQUIRE(cudaMemcpy(v.data(), data, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

// A borrowed view of `t`'s memory with other sizes (dense strides).
OwnedTensor view(const OwnedTensor& t, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (std::size_t i = sizes.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * sizes[i];
  OwnedTensor v;
  REQUIRE(aoti_torch_create_tensor_from_blob(t.data(), static_cast<int64_t>(sizes.size()), sizes.data(),
                                             strides.data(), 0, kBF16, kCUDA, 0, v.out()) == AOTI_TORCH_SUCCESS);
  return v;
}

struct Weights {
  OwnedTensor w1, k, v, pos, w2, sz2, w3;
};

Weights make_weights(std::mt19937& rng) {
  Weights w;
  // Linear weights as the exporter passes them to mm: [in, out] with the input dimension contiguous.
  w.w1 = device_tensor(random_bf16(static_cast<std::size_t>(kIn * kModel), 0.02f, rng), {kIn, kModel}, {1, kIn}, kBF16);
  w.k = device_tensor(random_bf16(static_cast<std::size_t>(kKvHeads * kCache * kDim), 1.f, rng),
                      {1, kKvHeads, kCache, kDim}, {}, kBF16);
  w.v = device_tensor(random_bf16(static_cast<std::size_t>(kKvHeads * kCache * kDim), 1.f, rng),
                      {1, kKvHeads, kCache, kDim}, {}, kBF16);
  w.pos = device_tensor(std::vector<int64_t>{kCache - 100}, {1}, {}, kI64);
  std::vector<int32_t> words(static_cast<std::size_t>(kWide * kModel / 8));
  for (auto& e : words) e = static_cast<int32_t>(rng());  // every 32-bit pattern is 8 valid nibbles
  w.w2 = device_tensor(words, {kWide / 8, kModel / (16 * kInnerKTiles), 32, kInnerKTiles / 2}, {}, kI32);
  std::vector<uint16_t> sz(static_cast<std::size_t>(kModel / kGroup * kWide * 2));
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (std::size_t i = 0; i < sz.size(); i += 2) {
    sz[i] = bf16(0.01f + 0.005f * unit(rng));
    sz[i + 1] = bf16(0.02f * unit(rng));
  }
  w.sz2 = device_tensor(sz, {kModel / kGroup, kWide, 2}, {}, kBF16);
  w.w3 = device_tensor(random_bf16(static_cast<std::size_t>(kWide * kOut), 0.01f, rng), {kWide, kOut}, {1, kWide},
                       kBF16);
  return w;
}

struct ChainOutputs {
  std::vector<uint16_t> y, a, z, u;
};

// For one run of a chain: dependent launch on or off, decode attention's form (OpSettings::attention_cluster), and
// `stream` as the shim's current stream.
class ChainScope {
 public:
  ChainScope(bool dependent_launch, cudaStream_t stream, int attention_cluster = 0)
      : scope_(settings(dependent_launch, attention_cluster)) {
    REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous_) == 0);
  }
  ~ChainScope() { aoti_cuda_shim_set_current_stream(0, previous_, nullptr); }
  ChainScope(const ChainScope&) = delete;
  ChainScope& operator=(const ChainScope&) = delete;

 private:
  const aoti_cuda::shim::OpSettings* settings(bool dependent_launch, int attention_cluster) {
    settings_.dependent_launch = dependent_launch;
    settings_.attention_cluster = attention_cluster;
    settings_.gemv_max_rows = 1;
    return &settings_;
  }
  aoti_cuda::shim::OpSettings settings_;
  aoti_cuda::shim::OpSettingsScope scope_;
  void* previous_ = nullptr;
};

// The chain's attention step: y's row as 16 query heads over the K / V cache; the output, and a [1, kModel] view.
struct Attended {
  OwnedTensor a, flat;
};
Attended attend(const Weights& w, const OwnedTensor& y) {
  OwnedTensor q = view(y, {1, kHeads, 1, kDim});
  Attended r;
  const AOTITorchError rc = aoti_torch_cuda_aoti_cuda_decode_attention(
      q.get(), w.k.get(), w.v.get(), w.pos.get(), 1.0 / std::sqrt(static_cast<double>(kDim)), r.a.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  r.flat = view(r.a, {1, kModel});
  return r;
}

// The chain on `stream`, queued without a synchronization in between, with the given settings.
ChainOutputs run_chain(const Weights& w, const std::vector<uint16_t>& x_host, bool dependent_launch,
                       cudaStream_t stream, int attention_cluster = 0) {
  const ChainScope scope(dependent_launch, stream, attention_cluster);
  OwnedTensor x = empty({1, kIn}, {}, kBF16, kCUDA, 0);
  OwnedTensor y = empty({1, kModel}, {}, kBF16, kCUDA, 0);
  OwnedTensor u = empty({1, kOut}, {}, kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpyAsync(x.data(), x_host.data(), x_host.size() * 2, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(y.data(), 0xff, kModel * 2, stream) == cudaSuccess);  // NaN until the GEMV writes it
  REQUIRE(cudaMemsetAsync(u.data(), 0xff, kOut * 2, stream) == cudaSuccess);
  AOTITorchError rc = aoti_torch_cuda_mm_out(y.get(), x.get(), w.w1.get());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  const Attended a = attend(w, y);
  OwnedTensor z;
  rc = aoti_torch_cuda__weight_int4pack_mm(a.flat.get(), w.w2.get(), kGroup, w.sz2.get(), z.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  rc = aoti_torch_cuda_mm_out(u.get(), z.get(), w.w3.get());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  return {read_bf16(y.data(), kModel), read_bf16(a.a.data(), kModel), read_bf16(z.data(), kWide),
          read_bf16(u.data(), kOut)};
}

// Marks `t`'s storage as a program constant, as the runtime marks a program's parameters at load
// (runtime/constant_sharing.hpp): the fused linear kernels then load it before their wait.
void mark_constant(const OwnedTensor& t) {
  aoti_cuda::shim::checked_defined(t.get(), "t")->storage->program_constant = true;
  REQUIRE(aoti_cuda::shim::is_program_constant(*aoti_cuda::shim::checked_defined(t.get(), "t")));
}

// Bitwise the same with the overlap as without.
void check_same(const ChainOutputs& overlapped, const ChainOutputs& plain) {
  CHECK(overlapped.y == plain.y);
  CHECK(overlapped.a == plain.a);
  CHECK(overlapped.z == plain.z);
  CHECK(overlapped.u == plain.u);
}

// run(input, dependent_launch, stream) for every input with the overlap off, then for every input with it on: each
// overlapped run follows a run of other inputs, so a stale read cannot match by chance.
template <class Run>
void run_off_then_on(const std::vector<std::vector<uint16_t>>& inputs, Run run, std::vector<ChainOutputs>& plain,
                     std::vector<ChainOutputs>& overlapped) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  for (const auto& x : inputs) plain.push_back(run(x, false, stream));
  for (const auto& x : inputs) overlapped.push_back(run(x, true, stream));
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

int nan_count(const std::vector<uint16_t>& v) {
  int n = 0;
  for (uint16_t b : v) n += std::isnan(from_bf16(b)) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("gpu: dependent launch: each kernel of a decode-like chain reads what the kernel before it wrote" *
          AOTI_CUDA_GPU_CASE) {
  int major = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  if (major < 9) MESSAGE("sm_" << major << "x: launches are plain here, the overlap itself is not exercised");
  std::mt19937 rng(77);
  const Weights w = make_weights(rng);
  constexpr int kRuns = 4;
  std::vector<std::vector<uint16_t>> inputs;
  for (int r = 0; r < kRuns; ++r) inputs.push_back(random_bf16(static_cast<std::size_t>(kIn), 1.f, rng));
  std::vector<ChainOutputs> plain, overlapped;
  run_off_then_on(
      inputs, [&](const std::vector<uint16_t>& x, bool on, cudaStream_t s) { return run_chain(w, x, on, s); }, plain,
      overlapped);

  // The plain chain is the reference: y against float64, and nothing left NaN.
  std::vector<uint16_t> w1(static_cast<std::size_t>(kIn * kModel));
  REQUIRE(cudaMemcpy(w1.data(), w.w1.data(), w1.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int r = 0; r < kRuns; ++r) {
    CAPTURE(r);
    int off = 0;
    for (int64_t col = 0; col < kModel; ++col) {
      double want = 0;
      for (int64_t i = 0; i < kIn; ++i) want += double(from_bf16(inputs[r][i])) * from_bf16(w1[col * kIn + i]);
      const double got = from_bf16(plain[r].y[col]);
      off += std::fabs(got - want) > 1e-2 * std::fabs(want) + 1e-3 ? 1 : 0;
    }
    CHECK(off == 0);
    CHECK(nan_count(plain[r].u) == 0);
    CHECK(nan_count(plain[r].z) == 0);
    check_same(overlapped[r], plain[r]);
  }
  // The runs differ from one another (else a stale read would go unnoticed).
  CHECK(plain[0].u != plain[1].u);
}

TEST_CASE("gpu: dependent launch: the int4 matmul loads constant weights before its wait, and the attention as one "
          "kernel over clusters, still read what the kernel before wrote" * AOTI_CUDA_GPU_CASE) {
  // The first case's chain with its weights marked as a program's constants: the int4 weight-streaming kernel
  // (_weight_int4pack_mm) then requests its first weights before its wait (int4mm::Problem::weights_early). Then
  // the same with the decode attention as one kernel over thread-block clusters of 16 (OpSettings::
  // attention_cluster). Each bitwise the same with the overlap on and off.
  std::mt19937 rng(78);
  const Weights w = make_weights(rng);
  for (const OwnedTensor* t : {&w.w1, &w.w2, &w.sz2, &w.w3}) mark_constant(*t);
  std::vector<std::vector<uint16_t>> inputs;
  for (int r = 0; r < 4; ++r) inputs.push_back(random_bf16(static_cast<std::size_t>(kIn), 1.f, rng));
  for (int cluster : {0, 16}) {
    CAPTURE(cluster);
    std::vector<ChainOutputs> plain, overlapped;
    run_off_then_on(
        inputs,
        [&](const std::vector<uint16_t>& x, bool on, cudaStream_t s) { return run_chain(w, x, on, s, cluster); },
        plain, overlapped);
    for (std::size_t r = 0; r < inputs.size(); ++r) {
      CAPTURE(r);
      CHECK(nan_count(plain[r].u) == 0);
      check_same(overlapped[r], plain[r]);
    }
    CHECK(plain[0].z != plain[1].z);
  }
}

namespace {

struct FusedWeights {
  OwnedTensor w1, norm, w2, sz2, w3, residual;
};

// The fused exports' chain: y = fused_linear(x, norm, W1) (RMSNorm + GEMV), a = attention(y), z =
// fused_linear_int4(a, W2), u = fused_linear(z, W3) + residual. Each consumer reads what the kernel
// before it wrote; with the overlap, each projection's weight loads go out before its wait.
ChainOutputs run_fused_chain(const Weights& w, const FusedWeights& f, const std::vector<uint16_t>& x_host,
                             bool dependent_launch, cudaStream_t stream) {
  const ChainScope scope(dependent_launch, stream);
  OwnedTensor x = empty({1, kIn}, {}, kBF16, kCUDA, 0);
  REQUIRE(cudaMemcpyAsync(x.data(), x_host.data(), x_host.size() * 2, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  OwnedTensor y;
  AtenTensorHandle norm = f.norm.get();
  AOTITorchError rc = aoti_torch_cuda_aoti_cuda_fused_linear(x.get(), &norm, 1e-5, 0, f.w1.get(), nullptr, y.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  const Attended a = attend(w, y);
  OwnedTensor z, u;
  rc = aoti_torch_cuda_aoti_cuda_fused_linear_int4(a.flat.get(), nullptr, 1e-5, 0, f.w2.get(), f.sz2.get(), kGroup,
                                                   kWide, nullptr, z.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  AtenTensorHandle residual = f.residual.get();
  rc = aoti_torch_cuda_aoti_cuda_fused_linear(z.get(), nullptr, 1e-5, 0, f.w3.get(), &residual, u.out());
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  return {read_bf16(y.data(), kModel), read_bf16(a.a.data(), kModel), read_bf16(z.data(), kWide),
          read_bf16(u.data(), kOut)};
}

}  // namespace

TEST_CASE("gpu: dependent launch: fused projections load constant weights before their wait, and read the rest "
          "after it" * AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(78);
  const Weights w = make_weights(rng);
  FusedWeights f;
  // The same bytes as the mm chain's weights, seen as the fused operator takes them ([N, K] rows).
  f.w1 = view(w.w1, {kModel, kIn});
  f.w3 = view(w.w3, {kOut, kWide});
  f.w2 = device_tensor(read_bf16(w.w2.data(), static_cast<std::size_t>(kWide * kModel / 4)),
                       {kWide / 8, kModel / (16 * kInnerKTiles), 32, kInnerKTiles / 2}, {}, kI32);
  f.sz2 = view(w.sz2, {kModel / kGroup, kWide, 2});
  f.norm = device_tensor(random_bf16(static_cast<std::size_t>(kIn), 1.f, rng), {kIn}, {}, kBF16);
  f.residual = device_tensor(random_bf16(static_cast<std::size_t>(kOut), 1.f, rng), {1, kOut}, {}, kBF16);
  for (const OwnedTensor* t : {&f.w1, &f.w2, &f.sz2, &f.w3}) mark_constant(*t);
  CHECK_FALSE(aoti_cuda::shim::is_program_constant(*aoti_cuda::shim::checked_defined(f.norm.get(), "norm")));
  constexpr int kRuns = 4;
  std::vector<std::vector<uint16_t>> inputs;
  for (int r = 0; r < kRuns; ++r) inputs.push_back(random_bf16(static_cast<std::size_t>(kIn), 1.f, rng));
  std::vector<ChainOutputs> plain, overlapped;
  run_off_then_on(
      inputs,
      [&](const std::vector<uint16_t>& x, bool on, cudaStream_t s) { return run_fused_chain(w, f, x, on, s); }, plain,
      overlapped);
  for (int r = 0; r < kRuns; ++r) {
    CAPTURE(r);
    CHECK(nan_count(plain[r].u) == 0);
    check_same(overlapped[r], plain[r]);
  }
  CHECK(plain[0].u != plain[1].u);
}
