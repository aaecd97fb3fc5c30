// The load-order test on a GPU: bundled programs run behind libcudart (see
// main.cpp) with CUDA graphs, bit-identical to the plain path, their CUDA
// imports bound to the SDK's hooks; load/run/unload cycles keep device memory
// flat. Without a GPU every case says so and is skipped.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"

namespace {

using aoti_cuda::DType;
using aoti_cuda::Tensor;

std::string gpu_missing() {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
  return n > 0 ? "" : "no CUDA device";
}

bool skip_without_gpu() {
  static const std::string why = gpu_missing();
  if (why.empty()) return false;
  MESSAGE("GPU load-order case SKIPPED: " << why);
  return true;
}

DType dtype_named(const std::string& name) {
  for (int code = 0; code < 32; ++code) {
    if (name == aoti_cuda::dtype_name(code)) return static_cast<DType>(code);
  }
  FAIL("unknown dtype " << name);
  return DType::kFloat32;
}

// The bundled programs: where the build was configured, or AOTI_CUDA_FIXTURES (a copy of the
// build run elsewhere, e.g. on the GPU machine).
std::string fixture(const std::string& name) {
  const char* dir = std::getenv("AOTI_CUDA_FIXTURES");
  return std::string(dir != nullptr && *dir != '\0' ? dir : AOTI_CUDA_TEST_FIXTURES) + "/" + name;
}

// The manifest's inputs of `method`, on the host.
std::vector<Tensor> inputs_of(const std::string& name, const std::string& method = "forward") {
  std::ifstream f(fixture(name) + "/manifest.json");
  REQUIRE(f.good());
  const nlohmann::json m = nlohmann::json::parse(f);
  std::vector<Tensor> out;
  for (const auto& in : m.at("methods").at(method).at("inputs")) {
    std::vector<int64_t> shape = in.at("shape").get<std::vector<int64_t>>();
    Tensor t = Tensor::empty(shape, dtype_named(in.at("dtype").get<std::string>()));
    std::ifstream bin(fixture(name) + "/" + in.at("file").get<std::string>(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() == t.nbytes());
    std::memcpy(t.data(), bytes.data(), bytes.size());
    out.push_back(t);
  }
  return out;
}

std::string pte_of(const std::string& name) { return fixture(name) + "/" + name + ".pte"; }

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to_host(), hb = b.to_host();
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.data(), hb.data(), ha.nbytes()) == 0;
}

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double device_used_mib() {
  std::size_t free_b = 0, total_b = 0;
  REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  return static_cast<double>(total_b - free_b) / (1024.0 * 1024.0);
}

const char* const kPrograms[] = {"mlp", "block", "mlp_int4", "mlp_cublas", "sdpa_bf16_dynamic", "conv"};

}  // namespace

TEST_CASE("load order (GPU): graphs capture and replay bit-identically, imports bound to the hooks") {
  if (skip_without_gpu()) return;
  int ran = 0;
  for (const std::string name : kPrograms) {
    CAPTURE(name);
    std::ifstream probe(pte_of(name));
    if (!probe.good()) {
      MESSAGE("program " << name << " is not bundled here (" << pte_of(name) << "); skipped");
      continue;
    }
    ++ran;
    const std::vector<Tensor> in = inputs_of(name);
    aoti_cuda::Module plain(pte_of(name));
    const std::vector<Tensor> expected = plain.forward(in);
    aoti_cuda::LoadOptions o;
    o.cuda_graphs = true;
    aoti_cuda::Module graphed(pte_of(name), o);
    std::vector<Tensor> got;
    for (int round = 0; round < 4; ++round) got = graphed.forward(in);
    const aoti_cuda::GraphStatus gs = graphed.graph_status("forward");
    CHECK_MESSAGE(gs.available, gs.reason);
    CHECK(gs.captures >= 1);
    CHECK(gs.replays >= 1);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(same_bytes(got[i], expected[i]));
    const aoti_cuda::LoadStats stats = graphed.load_stats();
    REQUIRE(!stats.libraries.empty());
    for (const aoti_cuda::LibraryHooks& lib : stats.libraries) {
      const auto& h = lib.hooked;
      CHECK_MESSAGE(std::find(h.begin(), h.end(), "cudaEventRecord") != h.end(), lib.library);
      CHECK_MESSAGE(std::find(h.begin(), h.end(), "cuModuleLoadData") != h.end(), lib.library);
    }
    MESSAGE(name << ": graphs " << gs.captures << " captured, " << gs.replays << " replays; hooks bound: "
                 << stats.libraries[0].hooked.size());
  }
  CHECK_MESSAGE(ran > 0, "no bundled program was found: set AOTI_CUDA_FIXTURES");
}

TEST_CASE("load order (GPU): load/run/unload cycles keep device memory flat") {
  if (skip_without_gpu()) return;
  const char* env = std::getenv("AOTI_CUDA_ORDER_CYCLES");
  const int cycles = env != nullptr ? std::atoi(env) : 100;
  int ran = 0;
  for (const std::string name : kPrograms) {
    CAPTURE(name);
    std::ifstream probe(pte_of(name));
    if (!probe.good()) continue;
    ++ran;
    const std::vector<Tensor> in = inputs_of(name);
    auto cycle = [&](bool graphs) {
      aoti_cuda::LoadOptions o;
      o.cuda_graphs = graphs;
      aoti_cuda::Module m(pte_of(name), o);
      for (int k = 0; k < (graphs ? 3 : 1); ++k) (void)m.forward(in);
    };
    for (int k = 0; k < 5; ++k) cycle(k % 2 == 1);  // settle: caches, the context's first allocations
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const double settled = device_used_mib(), rss_settled = rss_mib();
    for (int k = 0; k < cycles; ++k) cycle(k % 2 == 1);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const double after = device_used_mib(), rss_after = rss_mib();
    MESSAGE(name << ": " << cycles << " cycles (graphs on every other), device memory " << settled << " -> " << after
                 << " MiB (" << (after - settled) * 1024.0 / cycles << " KiB per cycle), host RSS " << rss_settled
                 << " -> " << rss_after << " MiB");
    CHECK(after - settled <= 2.0);
    CHECK(rss_after - rss_settled <= 2.0);
  }
  CHECK_MESSAGE(ran > 0, "no bundled program was found: set AOTI_CUDA_FIXTURES");
}

TEST_CASE("load order (GPU): a program of 64 MiB or more of weights uploads through the SDK's pinned staging") {
  if (skip_without_gpu()) return;
  const char* path = std::getenv("AOTI_CUDA_LARGE_PROGRAM");  // e.g. the exporter's mlp_wide (80 MiB)
  if (path == nullptr || *path == '\0') {
    MESSAGE("large-program case SKIPPED: AOTI_CUDA_LARGE_PROGRAM names no program");
    return;
  }
  for (int round = 0; round < 3; ++round) {
    aoti_cuda::Module m(path);
    const aoti_cuda::LoadStats s = m.load_stats();
    CHECK(s.weight_bytes >= (std::size_t{64} << 20));
    CHECK_MESSAGE(s.staged_bytes + s.page_locked_bytes >= s.weight_bytes * 9 / 10, s.upload_note);
    MESSAGE("large program, load " << round << ": " << s.weight_bytes / 1048576.0 << " MiB, staged "
                                   << s.staged_bytes / 1048576.0 << " MiB, " << s.upload_gb_per_s << " GB/s"
                                   << (s.upload_note.empty() ? std::string() : "; note: " + s.upload_note));
  }
}
