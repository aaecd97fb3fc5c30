// LoadOptions::tuning on the GPU: each setting reaches the part of the SDK it
// tunes (seen through the few-row GEMM counter, the kernels a call launches,
// the allocator's cache counters, the load's statistics and trace), and the
// results stay those of the bundled references.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "runtime/weight_upload.hpp"
#include "shim/ops/gemm.hpp"
#include "support/gpu.hpp"

using aoti_cuda::DType;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Tensor;

namespace {

std::string fx(const std::string& name) {
  return std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + name + ".pte";
}

// A fixture's tensor file, read as `spec` says (host memory).
Tensor read_tensor(const std::string& name, const std::string& file, const aoti_cuda::TensorSpec& spec) {
  std::ifstream f(std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Tensor t = Tensor::empty(spec.sizes, spec.dtype);
  REQUIRE(bytes.size() == t.nbytes());
  std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

// float32 or bfloat16 host values as floats.
std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == DType::kFloat32) {
      v[i] = t.data_ptr<float>()[i];
    } else {
      REQUIRE(t.dtype() == DType::kBFloat16);
      const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(t.data())[i]) << 16;
      std::memcpy(&v[i], &bits, sizeof bits);
    }
  }
  return v;
}

// The method's one output against the fixture's reference (its manifest's tolerance).
void check_reference(const std::string& name, Module& m, const Tensor& got, double tol) {
  const Tensor want = read_tensor(name, "forward.out0.bin", m.method_meta("forward").outputs.at(0));
  const std::vector<float> a = values(got.to(aoti_cuda::Device::cpu())), b = values(want);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > tol + tol * std::fabs(b[i])) {
      FAIL_CHECK(name << " element " << i << ": " << a[i] << " vs " << b[i]);
    }
  }
}

LoadOptions with(const aoti_cuda::TuningOptions& t) {
  LoadOptions o;
  o.tuning = t;
  return o;
}

}  // namespace

TEST_CASE("gpu tuning: gemv_max_rows decides whether a cuBLAS-GEMM program's 8-row multiplies use the few-row kernels" *
          AOTI_CUDA_GPU_CASE) {
  namespace gemm = aoti_cuda::shim::gemm;
  for (int rows : {-1, 0, 8}) {  // -1: the default (1 row)
    CAPTURE(rows);
    aoti_cuda::TuningOptions t;
    if (rows >= 0) t.gemv_max_rows = rows;
    Module m(fx("mlp_cublas"), with(t));
    const Tensor x = read_tensor("mlp_cublas", "forward.in0.bin", m.method_meta("forward").inputs.at(0));  // 8 rows
    const uint64_t before = gemm::gemv_calls();
    const Tensor y = m.forward({x}).at(0);
    const uint64_t calls = gemm::gemv_calls() - before;
    if (rows == 8) {
      CHECK(calls > 0);
    } else {
      CHECK(calls == 0);
    }
    check_reference("mlp_cublas", m, y, 1e-3);
  }
}

TEST_CASE("gpu tuning: int4_dequant_min_m picks dequantize + cuBLAS or the int4 kernels for a 24-row call" *
          AOTI_CUDA_GPU_CASE) {
  for (int64_t min_m : {int64_t{-1}, int64_t{0}, int64_t{16}, int64_t{24}, int64_t{25}}) {  // -1: the default (65)
    CAPTURE(min_m);
    aoti_cuda::TuningOptions t;
    if (min_m >= 0) t.int4_dequant_min_m = min_m;
    Module m(fx("mlp_int4"), with(t));
    const Tensor x = read_tensor("mlp_int4", "forward.in0.bin", m.method_meta("forward").inputs.at(0));
    aoti_cuda::RunProfile prof;
    aoti_cuda::RunOptions ro;
    ro.profile = &prof;
    ro.profile_kernels = true;
    const Tensor y = m.forward({x}, ro).at(0);
    bool dequantized = false, int4_kernels = false;
    for (const aoti_cuda::KernelProfile& k : prof.kernels) {
      dequantized = dequantized || k.name == "aoti_cuda _weight_int4pack_mm (dequantize + cuBLAS)";
      int4_kernels = int4_kernels || k.name == "aoti_cuda _weight_int4pack_mm";
    }
    const bool want_dequantized = min_m == 16 || min_m == 24;
    CHECK(dequantized == want_dequantized);
    CHECK(int4_kernels == !want_dequantized);
    check_reference("mlp_int4", m, y, 0.03);
  }
}

TEST_CASE("gpu tuning: block_cache_mib 0 keeps no freed blocks between calls" * AOTI_CUDA_GPU_CASE) {
  aoti_cuda::TuningOptions t;
  t.block_cache_mib = 0;
  const aoti_cuda::MemoryStats start = aoti_cuda::device_memory_stats(0);
  {
    Module m(fx("block"), with(t));
    const Tensor x = read_tensor("block", "forward.in0.bin", m.method_meta("forward").inputs.at(0)).to_device();
    for (int i = 0; i < 3; ++i) check_reference("block", m, m.forward({x}).at(0), 0.06);
    const aoti_cuda::MemoryStats after = aoti_cuda::device_memory_stats(0);
    CHECK(after.cached_bytes == start.cached_bytes);
    CHECK(after.cache_hits == start.cache_hits);
  }
  // The default (1024 MiB) keeps them: the second call takes blocks back.
  Module m(fx("block"));
  const Tensor x = read_tensor("block", "forward.in0.bin", m.method_meta("forward").inputs.at(0)).to_device();
  (void)m.forward({x});
  const std::size_t hits = aoti_cuda::device_memory_stats(0).cache_hits;
  (void)m.forward({x});
  CHECK(aoti_cuda::device_memory_stats(0).cache_hits > hits);
}

TEST_CASE("gpu tuning: upload threads, staging memory and page-locking reach the weights upload" * AOTI_CUDA_GPU_CASE) {
  // cnn's 2.9 MiB blob is below the sizes that stage by default: lower them (as the conformance test does).
  const auto saved = aoti_cuda::runtime::upload_thresholds();
  aoti_cuda::runtime::set_upload_thresholds({1, 1});
  struct Restore {
    aoti_cuda::runtime::UploadThresholds t;
    ~Restore() {
      aoti_cuda::runtime::set_upload_thresholds(t);
      ::unsetenv("AOTI_CUDA_TRACE_WEIGHTS");
    }
  } restore{saved};
  ::setenv("AOTI_CUDA_TRACE_WEIGHTS", "1", 1);
  std::vector<std::string> lines;
  const aoti_cuda::LogHandler previous =
      aoti_cuda::set_log_handler([&lines](aoti_cuda::LogLevel, std::string_view msg) { lines.emplace_back(msg); });
  auto traced = [&lines](const std::string& part) {
    for (const std::string& l : lines) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  };
  for (int threads : {1, 2}) {
    for (aoti_cuda::StagingMemory memory : {aoti_cuda::StagingMemory::kWriteCombined,
                                            aoti_cuda::StagingMemory::kHostAlloc}) {
      CAPTURE(threads);
      CAPTURE(aoti_cuda::to_string(memory));
      lines.clear();
      aoti_cuda::TuningOptions t;
      t.upload_threads = threads;
      t.staging = memory;
      Module m(fx("cnn"), with(t));
      const aoti_cuda::LoadStats st = m.load_stats();
      CHECK_MESSAGE(st.staged_bytes == st.weight_bytes, st.upload_note);
      CHECK(traced("pinned staging (" + std::to_string(threads) + " copy threads"));
      const Tensor x = read_tensor("cnn", "forward.in0.bin", m.method_meta("forward").inputs.at(0));
      check_reference("cnn", m, m.forward({x}).at(0), 2e-3);
    }
  }
  aoti_cuda::TuningOptions lock;
  lock.page_lock_weights = true;
  Module m(fx("cnn"), with(lock));
  const aoti_cuda::LoadStats st = m.load_stats();
  CHECK(st.staged_bytes == 0);  // page-locked in place, or (refused) copied from pageable memory, never staged
  CHECK_MESSAGE((st.page_locked_bytes == st.weight_bytes || !st.upload_note.empty()), st.upload_note);
  aoti_cuda::set_log_handler(previous);
}

TEST_CASE("gpu tuning: small copies as memcpy nodes and other cuBLAS workspaces give the same results" *
          AOTI_CUDA_GPU_CASE) {
  aoti_cuda::TuningOptions dma;
  dma.small_copy_kernels = false;
  LoadOptions o = with(dma);
  o.cuda_graphs = true;
  Module m(fx("mlp"), o);
  const Tensor x = read_tensor("mlp", "forward.in0.bin", m.method_meta("forward").inputs.at(0));
  for (int i = 0; i < 4; ++i) check_reference("mlp", m, m.forward({x}).at(0), 1e-3);
  CHECK(m.graph_status("forward").replays >= 1);
  for (std::size_t mib : {std::size_t{0}, std::size_t{1}, std::size_t{64}}) {
    CAPTURE(mib);
    aoti_cuda::TuningOptions t;
    t.cublas_workspace_mib = mib;
    t.gemv_max_rows = 0;  // every multiply on cuBLAS
    Module c(fx("mlp_cublas"), with(t));
    const Tensor xc = read_tensor("mlp_cublas", "forward.in0.bin", c.method_meta("forward").inputs.at(0));
    check_reference("mlp_cublas", c, c.forward({xc}).at(0), 1e-3);
  }
}
