// GPU conformance: every exported fixture program (manifest-driven) loaded and
// run through aoti_cuda::Module on a real device, plus state, device-resident
// I/O, caller streams, concurrency and load/unload cycles.
//
// Fixture directories: AOTI_CUDA_TEST_FIXTURES (tests/fixtures) plus every
// entry of the environment variable AOTI_CUDA_FIXTURE_DIRS (':'-separated).
// Each model directory holds manifest.json (see tests/fixtures/README.md).
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/shim.h"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"
#include "runtime/weight_upload.hpp"
#include "support/gpu.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::OutputLocation;
using aoti_cuda::RunOptions;
using aoti_cuda::Tensor;
using json = nlohmann::json;

using aoti_cuda_test::count_fds;
using aoti_cuda_test::count_memfd_maps;

namespace {

struct TensorFile {
  std::string file;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  double atol = 0, rtol = 0;
};
struct Case {
  std::vector<TensorFile> inputs, outputs;
};
struct MethodCases {
  std::string name;
  Case main;
  bool has_alt = false;
  Case alt;
};
struct Fixture {
  std::string name, dir, pte;
  std::vector<std::string> data_files;
  std::vector<MethodCases> methods;
  bool expect_not_runnable = false;    // the program must be refused (e.g. a KernelCall left outside the delegate)
  std::vector<std::string> kernel_calls;  // ... naming these operators
};

bool is_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::kFloat32;
  if (s == "bfloat16") return DType::kBFloat16;
  if (s == "float16") return DType::kFloat16;
  if (s == "int64") return DType::kInt64;
  if (s == "int32") return DType::kInt32;
  if (s == "bool") return DType::kBool;
  throw std::runtime_error("manifest: unknown dtype " + s);
}

std::vector<TensorFile> parse_tensors(const json& arr) {
  std::vector<TensorFile> out;
  for (const auto& t : arr) {
    TensorFile f;
    f.file = t.at("file").get<std::string>();
    f.dtype = parse_dtype(t.at("dtype").get<std::string>());
    f.shape = t.at("shape").get<std::vector<int64_t>>();
    f.atol = t.value("atol", 0.0);
    f.rtol = t.value("rtol", 0.0);
    out.push_back(f);
  }
  return out;
}

Fixture parse_fixture(const std::string& dir) {
  std::ifstream in(dir + "/manifest.json");
  json j = json::parse(in);
  Fixture f;
  f.dir = dir;
  f.name = j.value("name", dir.substr(dir.find_last_of('/') + 1));
  f.pte = dir + "/" + j.at("pte").get<std::string>();
  for (const auto& d : j.value("data_files", json::array())) f.data_files.push_back(dir + "/" + d.get<std::string>());
  f.expect_not_runnable = j.value("expect_not_runnable", false);
  for (const auto& k : j.value("kernel_calls", json::array())) f.kernel_calls.push_back(k.get<std::string>());
  for (auto it = j.at("methods").begin(); it != j.at("methods").end(); ++it) {
    MethodCases m;
    m.name = it.key();
    m.main.inputs = parse_tensors(it.value().at("inputs"));
    m.main.outputs = parse_tensors(it.value().at("outputs"));
    if (it.value().contains("alt_case")) {
      m.has_alt = true;
      m.alt.inputs = parse_tensors(it.value()["alt_case"].at("inputs"));
      m.alt.outputs = parse_tensors(it.value()["alt_case"].at("outputs"));
    }
    f.methods.push_back(m);
  }
  return f;
}

std::vector<std::string> fixture_roots() {
  std::vector<std::string> roots = {AOTI_CUDA_TEST_FIXTURES};
  if (const char* extra = std::getenv("AOTI_CUDA_FIXTURE_DIRS")) {
    std::stringstream ss(extra);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty()) roots.push_back(item);
    }
  }
  return roots;
}

std::vector<Fixture> all_fixtures() {
  std::vector<Fixture> out;
  for (const std::string& root : fixture_roots()) {
    if (is_file(root + "/manifest.json")) {
      out.push_back(parse_fixture(root));
      continue;
    }
    std::vector<std::string> dirs;
    if (DIR* d = opendir(root.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != ".." && is_file(root + "/" + n + "/manifest.json")) dirs.push_back(root + "/" + n);
      }
      closedir(d);
    }
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) out.push_back(parse_fixture(d));
  }
  return out;
}

const Fixture* find_fixture(const std::vector<Fixture>& all, const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

Tensor load_tensor(const std::string& dir, const TensorFile& tf) {
  Tensor t = Tensor::empty(tf.shape, tf.dtype);
  std::ifstream in(dir + "/" + tf.file, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << dir << "/" << tf.file);
  in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  REQUIRE_MESSAGE(static_cast<std::size_t>(in.gcount()) == t.nbytes(), dir << "/" << tf.file << " is too short");
  return t;
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data_ptr<float>()[i];
    case DType::kBFloat16: {
      const uint32_t bits = static_cast<uint32_t>(t.data_ptr<uint16_t>()[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kFloat16: {
      // IEEE binary16 -> float
      const uint16_t h = t.data_ptr<uint16_t>()[i];
      const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
      double v;
      if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
      else if (exp == 31) v = mant ? NAN : INFINITY;
      else v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
      return sign ? -v : v;
    }
    case DType::kInt64: return static_cast<double>(t.data_ptr<int64_t>()[i]);
    case DType::kInt32: return t.data_ptr<int32_t>()[i];
    case DType::kBool: return t.data_ptr<bool>()[i] ? 1 : 0;
    default: FAIL("unsupported dtype in comparison"); return 0;
  }
}

// Compares `got` (any device/layout) with `want` (host, contiguous); returns max |got-want|.
double compare(const Tensor& got_any, const Tensor& want, double atol, double rtol, const std::string& what,
               bool* pass = nullptr) {
  INFO(what);
  REQUIRE(got_any.defined());
  Tensor got = got_any.to_host();
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  double max_err = 0;
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = element(got, i), w = element(want, i);
    const double err = std::fabs(g - w);
    if (!(err <= atol + rtol * std::fabs(w))) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
    if (err > max_err || std::isnan(err)) max_err = std::isnan(err) ? INFINITY : err;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << want.numel() << " elements out of tolerance (first at "
                                << first_bad << ", max_abs_err=" << max_err << ")");
  if (pass != nullptr) *pass = bad == 0;
  return max_err;
}

LoadOptions options_for(const Fixture& f) {
  LoadOptions o;
  o.data_files = f.data_files;
  return o;
}

// Runs one case and prints the conformance line. Returns true on PASS.
bool run_case(Module& m, const Fixture& f, const std::string& method, const Case& c, const char* label,
              const RunOptions& ro = {}, bool inputs_on_device = false) {
  std::vector<Tensor> inputs;
  for (const auto& tf : c.inputs) {
    Tensor t = load_tensor(f.dir, tf);
    inputs.push_back(inputs_on_device ? t.to_device(0) : t);
  }
  std::vector<Tensor> out;
  try {
    out = m.execute(method, inputs, ro);
  } catch (const Error& e) {
    std::printf("fixture %s method %s%s: FAIL (%s)\n", f.name.c_str(), method.c_str(), label, e.what());
    CHECK_MESSAGE(false, e.what());
    return false;
  }
  if (ro.stream != nullptr) REQUIRE(cudaStreamSynchronize(static_cast<cudaStream_t>(ro.stream)) == cudaSuccess);
  REQUIRE(out.size() == c.outputs.size());
  double max_err = 0;
  bool ok = true;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const TensorFile& tf = c.outputs[i];
    Tensor want = load_tensor(f.dir, tf);
    bool pass = false;
    double err = compare(out[i], want, tf.atol, tf.rtol, f.name + "." + method + label + " output " + std::to_string(i), &pass);
    ok = ok && pass;
    max_err = std::max(max_err, err);
  }
  std::printf("fixture %s method %s%s: %s max_abs_err=%.3g\n", f.name.c_str(), method.c_str(), label,
              ok ? "PASS" : "FAIL", max_err);
  std::fflush(stdout);
  return ok;
}

}  // namespace

TEST_CASE("gpu conformance: every fixture, every method, within tolerance" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  REQUIRE_MESSAGE(!fixtures.empty(), "no fixtures found under " << AOTI_CUDA_TEST_FIXTURES);
  int passed = 0, failed = 0;
  for (const Fixture& f : fixtures) {
    CAPTURE(f.name);
    std::unique_ptr<Module> m;
    if (f.expect_not_runnable) {
      try {
        Module refused(f.pte, options_for(f));
        std::printf("fixture %s: FAIL (loaded, but the manifest expects a refusal)\n", f.name.c_str());
        CHECK_MESSAGE(false, f.name << " should have been refused");
        ++failed;
      } catch (const Error& e) {
        bool names_ops = true;
        for (const auto& op : f.kernel_calls) names_ops = names_ops && std::string(e.what()).find(op) != std::string::npos;
        CHECK(e.code() == ErrorCode::kUnsupported);
        CHECK_MESSAGE(names_ops, e.what());
        const bool ok = e.code() == ErrorCode::kUnsupported && names_ops;
        std::printf("fixture %s: %s refused as expected (%s)\n", f.name.c_str(), ok ? "PASS" : "FAIL", e.what());
        (ok ? passed : failed)++;
      }
      continue;
    }
    try {
      m = std::make_unique<Module>(f.pte, options_for(f));
    } catch (const Error& e) {
      std::printf("fixture %s: FAIL to load (%s)\n", f.name.c_str(), e.what());
      CHECK_MESSAGE(false, f.name << ": " << e.what());
      ++failed;
      continue;
    }
    const auto t = m->load_timings();
    std::printf("fixture %s: loaded in %.1f ms (parse %.1f, library %.1f, container %.1f, weights %.1f)\n",
                f.name.c_str(), t.total_ms, t.parse_ms, t.library_ms, t.container_ms, t.weights_ms);
    for (const MethodCases& mc : f.methods) {
      // Each method's reference was computed on a fresh model; methods may
      // share state (lm's KV cache), so every further method gets a new Module.
      if (&mc != &f.methods.front()) m = std::make_unique<Module>(f.pte, options_for(f));
      (run_case(*m, f, mc.name, mc.main, "") ? passed : failed)++;
      // kv_cache is stateful: its alt/second calls are checked in their own case.
      if (mc.has_alt) (run_case(*m, f, mc.name, mc.alt, " (alt_case)") ? passed : failed)++;
    }
  }
  std::printf("gpu conformance: %d passed, %d failed\n", passed, failed);
  CHECK(failed == 0);
}

TEST_CASE("gpu conformance: weights installed through the pinned staging pipeline" * AOTI_CUDA_GPU_CASE) {
  // Loads of multi-MiB blobs record the library's copies and carry them out
  // through pinned slots (runtime/weight_upload.hpp); the bundled programs are
  // smaller than the default thresholds, so lower them to send these through
  // the same path, many small constants sharing a slot.
  const auto saved = aoti_cuda::runtime::upload_thresholds();
  aoti_cuda::runtime::set_upload_thresholds({1, 1});
  struct Restore {
    aoti_cuda::runtime::UploadThresholds t;
    ~Restore() { aoti_cuda::runtime::set_upload_thresholds(t); }
  } restore{saved};
  int passed = 0, failed = 0;
  for (const Fixture& f : all_fixtures()) {
    if (f.expect_not_runnable) continue;
    CAPTURE(f.name);
    for (const MethodCases& mc : f.methods) {
      Module m(f.pte, options_for(f));
      const aoti_cuda::LoadStats st = m.load_stats();
      CHECK_MESSAGE(st.staged_bytes == st.weight_bytes, f.name << ": " << st.upload_note);
      CHECK(st.page_locked_bytes == 0);
      (run_case(m, f, mc.name, mc.main, " (staged weights)") ? passed : failed)++;
    }
  }
  std::printf("gpu conformance with staged weights: %d passed, %d failed\n", passed, failed);
  CHECK(passed > 0);
  CHECK(failed == 0);
}

TEST_CASE("gpu: kv_cache state persists across calls (sum of both written rows)" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "kv_cache");
  REQUIRE_MESSAGE(f != nullptr, "fixture kv_cache not found");
  Module m(f->pte, options_for(*f));
  const auto& c = f->methods.at(0).main;
  Tensor x1 = load_tensor(f->dir, c.inputs.at(0));  // f32[1,32]
  Tensor p1 = load_tensor(f->dir, c.inputs.at(1));  // i64[1]
  auto out1 = m.forward({x1, p1});
  compare(out1.at(0), load_tensor(f->dir, c.outputs.at(0)), 1e-5, 1e-5, "kv_cache first call");
  // Second call: another row and another x.
  Tensor x2 = Tensor::empty({1, 32}, DType::kFloat32);
  for (int i = 0; i < 32; ++i) x2.data_ptr<float>()[i] = 0.25f * static_cast<float>(i) - 3.0f;
  Tensor p2 = Tensor::empty({1}, DType::kInt64);
  // The cache has 16 rows (2048 bytes of float32[16,32] in the weights blob).
  p2.data_ptr<int64_t>()[0] = (p1.data_ptr<int64_t>()[0] + 1) % 16;
  auto out2 = m.forward({x2, p2});
  Tensor want = Tensor::empty({32}, DType::kFloat32);
  for (int i = 0; i < 32; ++i) want.data_ptr<float>()[i] = x1.data_ptr<float>()[i] + x2.data_ptr<float>()[i];
  const double err = compare(out2.at(0), want, 1e-5, 1e-5, "kv_cache second call");
  std::printf("fixture kv_cache method forward (two calls): max_abs_err=%.3g\n", err);
}

TEST_CASE("gpu: device-resident inputs give device outputs; caller stream; host outputs on request" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE_MESSAGE(f != nullptr, "fixture mlp not found");
  Module m(f->pte, options_for(*f));
  const auto& c = f->methods.at(0).main;
  Tensor x = load_tensor(f->dir, c.inputs.at(0)).to_device(0);
  Tensor want = load_tensor(f->dir, c.outputs.at(0));

  auto out = m.forward({x});  // kSameAsInputs: device
  REQUIRE(out.at(0).device().is_cuda());
  compare(out[0], want, c.outputs[0].atol, c.outputs[0].rtol, "mlp device in/out");

  RunOptions host;
  host.outputs = OutputLocation::kHost;
  out = m.forward({x}, host);
  CHECK(out.at(0).device().is_cpu());
  compare(out[0], want, c.outputs[0].atol, c.outputs[0].rtol, "mlp device in, host out");

  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  RunOptions on_stream;
  on_stream.stream = s;
  on_stream.outputs = OutputLocation::kDevice;
  Tensor xh = load_tensor(f->dir, c.inputs.at(0));
  for (int i = 0; i < 3; ++i) {
    out = m.forward({xh}, on_stream);  // host input staged, device output, caller stream
    REQUIRE(out.at(0).device().is_cuda());
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    compare(out[0], want, c.outputs[0].atol, c.outputs[0].rtol, "mlp caller stream");
  }
  out.clear();
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  std::printf("fixture mlp method forward (device inputs, caller stream): PASS\n");
}

TEST_CASE("gpu: device outputs outlive the Module that made them" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE_MESSAGE(f != nullptr, "fixture mlp not found");
  const auto& c = f->methods.at(0).main;
  Tensor x = load_tensor(f->dir, c.inputs.at(0));
  Tensor want = load_tensor(f->dir, c.outputs.at(0));
  const auto before = aoti_cuda::device_memory_stats(0);
  std::vector<Tensor> out;
  {
    Module m(f->pte, options_for(*f));
    RunOptions run;
    run.outputs = OutputLocation::kDevice;
    out = m.forward({x}, run);  // on the Module's own stream
  }  // the Module and its streams are gone, the output is not
  REQUIRE(out.at(0).device().is_cuda());
  compare(out[0], want, c.outputs[0].atol, c.outputs[0].rtol, "mlp output read after its Module");
  aoti_cuda_shim_clear_error();
  out.clear();  // its cudaFreeAsync must not go to the destroyed stream
  CHECK(std::string(aoti_cuda_shim_last_error()) == "");
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(aoti_cuda::device_memory_stats(0).live_allocations == before.live_allocations);
}

TEST_CASE("gpu: input validation on a real program" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE(f != nullptr);
  Module m(f->pte, options_for(*f));
  try {
    m.forward({Tensor::empty({8, 64}, DType::kBFloat16)});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("input 0") != std::string::npos);
  }
  try {
    m.execute("nope", {});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNotFound);
    CHECK(std::string(e.what()).find("'forward'") != std::string::npos);
  }
}

TEST_CASE("gpu: num_models=2, two threads" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE(f != nullptr);
  LoadOptions o = options_for(*f);
  o.num_models = 2;
  Module m(f->pte, o);
  const auto& c = f->methods.at(0).main;
  Tensor x = load_tensor(f->dir, c.inputs.at(0));
  Tensor want = load_tensor(f->dir, c.outputs.at(0));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        try {
          Tensor got = m.forward({x}).at(0);
          for (int64_t k = 0; k < want.numel(); ++k) {
            const float g = got.data_ptr<float>()[k], w = want.data_ptr<float>()[k];
            if (!(std::fabs(g - w) <= 1e-3 + 1e-3 * std::fabs(w))) {
              ++errors;
              break;
            }
          }
        } catch (const std::exception& e) {
          std::printf("concurrency: %s\n", e.what());
          ++errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  std::printf("fixture mlp method forward (num_models=2, 2 threads x 25): %s\n", errors == 0 ? "PASS" : "FAIL");
}

TEST_CASE("gpu: 200 load/unload cycles of mlp leave memory, fds and mappings where they were" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE(f != nullptr);
  const auto& c = f->methods.at(0).main;
  Tensor x = load_tensor(f->dir, c.inputs.at(0));
  auto cycle = [&] {
    Module m(f->pte, options_for(*f));
    auto out = m.forward({x});
    REQUIRE(out.size() == 1);
  };
  cycle();  // warm-up: CUDA context, pools, first-use allocations
  // cudaMemGetInfo sees the whole GPU: another process allocating while the cycles run (an export beside the suite
  // on a GPU machine) moves it too. So two windows of 100 cycles each: a leak shows in both, another process's
  // allocation in at most the one it happened in.
  auto free_bytes = [] {
    aoti_cuda::trim_device_memory(0);
    std::size_t free = 0, total = 0;
    REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
    return static_cast<long long>(free);
  };
  const long long free0 = free_bytes();
  const auto stats0 = aoti_cuda::device_memory_stats(0);
  const int fds0 = count_fds();
  const int maps0 = count_memfd_maps();
  const int64_t handles0 = aoti_cuda_shim_live_handles();
  for (int i = 0; i < 100; ++i) cycle();
  const long long free1 = free_bytes();
  for (int i = 0; i < 100; ++i) cycle();
  const long long free2 = free_bytes();
  const auto stats1 = aoti_cuda::device_memory_stats(0);
  const long long drift_a = free0 - free1, drift_b = free1 - free2;
  std::printf("200 cycles: cudaMemGetInfo free drift %lld + %lld bytes (two windows of 100), shim bytes_in_use "
              "%zu -> %zu, live handles %lld -> %lld, fds %d -> %d, memfd maps %d -> %d\n",
              drift_a, drift_b, stats0.bytes_in_use, stats1.bytes_in_use, static_cast<long long>(handles0),
              static_cast<long long>(aoti_cuda_shim_live_handles()), fds0, count_fds(), maps0, count_memfd_maps());
  CHECK(stats1.bytes_in_use == stats0.bytes_in_use);
  CHECK(aoti_cuda_shim_live_handles() == handles0);
  CHECK(count_fds() == fds0);
  CHECK(count_memfd_maps() == maps0);
  // The AOTI runtime never unloads its kernels' modules; the Module unloads them (docs/shim-abi.md, "Kernel
  // modules"). Allow 64 KiB a cycle of other driver memory, nothing like the weights (which are > 100 KiB a load).
  CHECK(std::min(drift_a, drift_b) <= 100LL * 64 * 1024);
}

TEST_CASE("gpu: Tensor copies between host, pinned and device, contiguous and strided" * AOTI_CUDA_GPU_CASE) {
  std::vector<float> src(24);
  for (int i = 0; i < 24; ++i) src[i] = static_cast<float>(i);
  Tensor h = Tensor::from_blob(src.data(), {4, 6}, DType::kFloat32);
  Tensor d = h.to_device(0);
  CHECK(d.device().is_cuda());
  Tensor p = d.to(Device::cpu(), nullptr, /*pinned=*/true);
  CHECK(std::memcmp(p.data(), src.data(), 24 * sizeof(float)) == 0);
  // Strided device view (transpose [6,4] of the [4,6] storage) -> host.
  Tensor dt = Tensor::from_blob(d.data(), {6, 4}, DType::kFloat32, Device::cuda(0), {1, 6});
  Tensor back = dt.to_host();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(back.data_ptr<float>()[i * 4 + j] == src[j * 6 + i]);
  // Host -> strided device destination (every other column of a [4,12] buffer).
  Tensor wide = Tensor::empty({4, 12}, DType::kFloat32, Device::cuda(0));
  REQUIRE(cudaMemset(wide.data(), 0, wide.nbytes()) == cudaSuccess);
  Tensor every_other = Tensor::from_blob(wide.data(), {4, 6}, DType::kFloat32, Device::cuda(0), {12, 2});
  every_other.copy_from(h);
  Tensor wh = wide.to_host();
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 12; ++k) CHECK(wh.data_ptr<float>()[r * 12 + k] == (k % 2 ? 0.0f : src[r * 6 + k / 2]));
  // Device -> device.
  Tensor d2 = Tensor::empty({4, 6}, DType::kFloat32, Device::cuda(0));
  d2.copy_from(d);
  CHECK(std::memcmp(d2.to_host().data(), src.data(), 24 * sizeof(float)) == 0);
}

TEST_CASE("gpu: device-to-device copies between any two layouts run as one kernel, stream-ordered" * AOTI_CUDA_GPU_CASE) {
  // A [4, 6, 5] source stored as [6, 5, 4] (a 3-d permutation: no 2-d memcpy can
  // express it) copied into row-major memory, for 2-, 4- and 8-byte elements.
  const std::vector<int64_t> shape{4, 6, 5}, permuted{1, 20, 4};
  auto expected = [&](int64_t i, int64_t j, int64_t k) { return static_cast<double>(i * permuted[0] + j * permuted[1] + k * permuted[2]); };
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kInt64}) {
    CAPTURE(static_cast<int>(dt));
    // Storage element n holds n (exact in every one of the three dtypes).
    Tensor host = Tensor::empty({120}, dt);
    for (int n = 0; n < 120; ++n) {
      if (dt == DType::kFloat16) host.data_ptr<uint16_t>()[n] = __half_as_ushort(__float2half_rn(static_cast<float>(n)));
      else if (dt == DType::kFloat32) host.data_ptr<float>()[n] = static_cast<float>(n);
      else host.data_ptr<int64_t>()[n] = n;
    }
    Tensor flat = host.to_device(0);
    Tensor src = Tensor::from_blob(flat.data(), shape, dt, Device::cuda(0), permuted);
    Tensor dst = Tensor::empty(shape, dt, Device::cuda(0));
    dst.copy_from(src);
    Tensor back = dst.to_host();
    auto value = [&](int64_t at) -> double {
      if (dt == DType::kFloat16) return __half2float(__ushort_as_half(back.data_ptr<uint16_t>()[at]));
      if (dt == DType::kFloat32) return back.data_ptr<float>()[at];
      return static_cast<double>(back.data_ptr<int64_t>()[at]);
    };
    bool all_equal = true;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j)
        for (int64_t k = 0; k < 5; ++k) all_equal = all_equal && value((i * 6 + j) * 5 + k) == expected(i, j, k);
    CHECK(all_equal);
  }
  // The same re-striding as the bound outputs of a call do it: queued on a stream
  // that is still busy, it must wait for that stream's earlier work.
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  std::vector<float> values(120);
  for (int n = 0; n < 120; ++n) values[n] = static_cast<float>(n);
  Tensor src = Tensor::empty({120}, DType::kFloat32, Device::cuda(0));
  Tensor dst = Tensor::empty(shape, DType::kFloat32, Device::cuda(0));
  REQUIRE(cudaMemsetAsync(src.data(), 0, src.nbytes(), stream) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(src.data(), values.data(), 480, cudaMemcpyHostToDevice, stream) == cudaSuccess);
  Tensor view = Tensor::from_blob(src.data(), shape, DType::kFloat32, Device::cuda(0), permuted);
  dst.copy_from(view, stream);
  Tensor back = dst.to_host();
  bool all_equal = true;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t k = 0; k < 5; ++k)
        all_equal = all_equal && back.data_ptr<float>()[(i * 6 + j) * 5 + k] == static_cast<float>(expected(i, j, k));
  CHECK(all_equal);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("gpu: a device output fed to another method equals the host round trip (encdec)" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "encdec");
  REQUIRE_MESSAGE(f != nullptr, "fixture encdec not found");
  Module m(f->pte, options_for(*f));
  const MethodCases* enc = nullptr;
  for (const auto& mc : f->methods) {
    if (mc.name == "encode") enc = &mc;
  }
  REQUIRE(enc != nullptr);
  Tensor x = load_tensor(f->dir, enc->main.inputs.at(0));
  RunOptions on_device;
  on_device.outputs = OutputLocation::kDevice;
  Tensor code = m.execute("encode", {x}, on_device).at(0);
  REQUIRE(code.device().is_cuda());
  Tensor via_device = m.execute("decode", {code}).at(0);  // device in -> device out (kSameAsInputs)
  CHECK(via_device.device().is_cuda());
  Tensor via_host = m.execute("decode", {code.to_host()}).at(0);  // host in -> host out
  CHECK(via_host.device().is_cpu());
  const double err = compare(via_device, via_host, 0.0, 0.0, "decode(encode(x)) device vs host");
  std::printf("fixture encdec methods encode->decode (device-resident intermediate): max_abs_err=%.3g\n", err);
}

TEST_CASE("gpu: a device ordinal that does not exist is kNoDevice" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "add");
  REQUIRE(f != nullptr);
  LoadOptions o = options_for(*f);
  o.device = Device::cuda(99);
  try {
    Module m(f->pte, o);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoDevice);
    CHECK(std::string(e.what()).find("cuda:99") != std::string::npos);
  }
}

TEST_CASE("gpu: an allocation the device cannot hold is kOutOfMemory, and the Module keeps working" * AOTI_CUDA_GPU_CASE) {
  const auto fixtures = all_fixtures();
  const Fixture* f = find_fixture(fixtures, "mlp");
  REQUIRE(f != nullptr);
  Module m(f->pte, options_for(*f));
  try {
    (void)Tensor::empty({int64_t{1} << 48}, DType::kFloat32, Device::cuda(0));  // 1 PiB
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kOutOfMemory);
  }
  // The failure left no sticky CUDA error behind: the program still runs.
  const MethodCases& meth = f->methods.front();
  std::vector<Tensor> inputs;
  for (const TensorFile& in : meth.main.inputs) inputs.push_back(load_tensor(f->dir, in));
  const std::vector<Tensor> out = m.execute(meth.name, inputs);
  REQUIRE(out.size() == meth.main.outputs.size());
  const TensorFile& want = meth.main.outputs[0];
  compare(out[0], load_tensor(f->dir, want), want.atol, want.rtol, "mlp after OOM");
}
// Weights and state across methods (lm's KV cache, deduplication, sessions): test_state_cuda.cpp.
