// Module end to end on the CPU: fake AOTInductor model libraries
// (tests/fake_model) packed into synthesized .pte/.ptd files, loaded from
// memory, run through the real shim, unloaded.
#include <dirent.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "runtime/library_loader.hpp"
#include "runtime/sha256.hpp"
#include "shim/ops/gemm.hpp"
#include "support/fake_module.hpp"
#include "support/gpu.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

// Weights of the affine model (w) and the initial 4x4 kv cache.
const std::vector<float> kAffineW = {0.5f, 1.0f, 2.0f, -1.0f};
std::vector<float> kv_init() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  return v;
}

TensorDesc dynamic(TensorDesc t) {
  t.shape_dynamism = 1;
  return t;
}

// forward(a, b) -> (y, y) on the affine library (B dynamic, <= 8), and
// accumulate(x, pos) -> sum on the kv library.
BuiltProgram build_program(const std::string& affine_so_path = AOTI_CUDA_FAKE_MODEL_AFFINE, bool with_kv = true) {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", read_file(affine_so_path), float_bytes(kAffineW));
  b.add_method(cuda_method("forward", {dynamic(f32({8, 4})), dynamic(f32({8, 4}))},
                           {dynamic(f32({8, 4})), dynamic(f32({8, 4}))}, fw));
  if (with_kv) {
    auto kv = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "accumulate", read_file(AOTI_CUDA_FAKE_MODEL_KV),
                               float_bytes(kv_init()));
    b.add_method(fake_kv_method("accumulate", kv));  // method inputs (x, pos), delegate args (pos, x, out)
  }
  return b.build();
}

LoadOptions cpu_options() {
  LoadOptions o;
  o.device = Device::cpu();
  return o;
}

Tensor host_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty(std::move(shape), DType::kInt64);
  std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("module(fake): load from files, run, values, dedup of a repeated output handle") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  const int64_t handles_before = aoti_cuda_shim_live_handles();
  {
    Module m(pte, cpu_options());
    CHECK(m.method_names() == std::vector<std::string>{"forward", "accumulate"});
    auto meta = m.method_meta("forward");
    CHECK(meta.name == "forward");
    REQUIRE(meta.inputs.size() == 2);
    CHECK(meta.inputs[0].dynamic);
    CHECK(meta.inputs[0].sizes == std::vector<int64_t>{8, 4});
    CHECK(meta.outputs.size() == 2);
    CHECK(meta.num_delegates == 1);
    CHECK(m.program().pte_path() == pte);
    // Names from the library; the dynamic dimension from its input check (dim 1 is fixed).
    CHECK(meta.input_names == std::vector<std::string>{"a", "b"});
    CHECK(meta.output_names == std::vector<std::string>{"y", "y_again"});
    REQUIRE(meta.dynamic_dims.size() == 2);
    for (const auto& dims : meta.dynamic_dims) {
      REQUIRE(dims.size() == 1);
      CHECK(dims[0].dim == 0);
      CHECK(dims[0].max == 8);
    }
    CHECK(m.default_method() == "forward");

    Tensor a = host_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor b = host_floats({2, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
    auto out = m.forward({a, b});
    REQUIRE(out.size() == 2);
    CHECK(out[0].shape() == std::vector<int64_t>{2, 4});
    CHECK(floats(out[0]) == std::vector<float>{1.5f, 3, 7, -3, 2.5f, 6, 14, -8});
    // Both outputs are the same model buffer, owned once.
    CHECK(out[0].data() == out[1].data());
    // Inputs are untouched (the model got copies).
    CHECK(floats(a) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
    auto t = m.load_timings();
    CHECK(t.total_ms >= t.library_ms);
    CHECK(t.parse_ms >= 0);
  }
  CHECK(aoti_cuda_shim_live_handles() == handles_before);
}

TEST_CASE("module(fake): dynamic shapes up to the bound, strided host input") {
  TempDir dir;
  Module m(build_program().write(dir.path, "fake"), cpu_options());
  for (int64_t rows : {1, 3, 8, 0}) {
    CAPTURE(rows);
    std::vector<float> av(static_cast<std::size_t>(rows * 4)), bv(av.size(), 1.0f);
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i);
    auto out = m.forward({host_floats({rows, 4}, av), host_floats({rows, 4}, bv)});
    REQUIRE(out.at(0).shape() == std::vector<int64_t>{rows, 4});
    auto y = floats(out[0]);
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == av[i] * kAffineW[i % 4] + 1.0f);
  }
  // A transposed (non-contiguous) view as input is re-laid out before the model sees it.
  std::vector<float> storage = {1, 2, 3, 4, 5, 6, 7, 8};  // [4,2] row-major; its transpose is [2,4]
  Tensor at = Tensor::from_blob(storage.data(), {2, 4}, DType::kFloat32, Device::cpu(), {1, 2});
  CHECK_FALSE(at.is_contiguous());
  auto out = m.forward({at, host_floats({2, 4}, std::vector<float>(8, 0.0f))});
  CHECK(floats(out[0]) == std::vector<float>{1 * 0.5f, 3 * 1.0f, 5 * 2.0f, 7 * -1.0f, 2 * 0.5f, 4 * 1.0f, 6 * 2.0f, 8 * -1.0f});
}

TEST_CASE("module(fake): input validation names the input and expected vs got") {
  TempDir dir;
  Module m(build_program().write(dir.path, "fake"), cpu_options());
  Tensor ok = host_floats({2, 4}, std::vector<float>(8, 1.0f));

  Error e = expect_error([&] { m.forward({ok}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "takes 2 input(s), got 1"));

  e = expect_error([&] { m.forward({ok, host_i64({2, 4}, std::vector<int64_t>(8, 1))}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "input 1"));
  CHECK(contains(e.what(), "float32"));
  CHECK(contains(e.what(), "int64"));

  e = expect_error([&] { m.forward({host_floats({8}, std::vector<float>(8, 1.0f)), ok}); });
  CHECK(contains(e.what(), "input 0"));
  CHECK(contains(e.what(), "rank"));

  e = expect_error([&] { m.forward({host_floats({9, 4}, std::vector<float>(36, 1.0f)), ok}); });
  CHECK(contains(e.what(), "input 0"));
  CHECK(contains(e.what(), "dimension 0 is 9, expected at most 8"));

  e = expect_error([&] { m.forward({ok, host_floats({2, 5}, std::vector<float>(10, 1.0f))}); });
  CHECK(contains(e.what(), "input 1"));
  CHECK(contains(e.what(), "dimension 1 is 5, expected at most 4"));

  e = expect_error([&] { m.forward({ok, Tensor()}); });
  CHECK(contains(e.what(), "undefined"));

  // Static shapes must match exactly.
  e = expect_error(
      [&] { m.execute("accumulate", {host_floats({2, 4}, std::vector<float>(8, 0)), host_i64({1}, {0})}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "method 'accumulate' input 0"));
  CHECK(contains(e.what(), "dimension 0 is 2, expected 1"));
}

TEST_CASE("module(fake): unknown method lists the loaded names; methods filter") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  {
    Module m(pte, cpu_options());
    Error e = expect_error([&] { m.execute("backward", {}); });
    CHECK(e.code() == ErrorCode::kNotFound);
    CHECK(contains(e.what(), "'forward'"));
    CHECK(contains(e.what(), "'accumulate'"));
    e = expect_error([&] { m.method_meta("nope"); });
    CHECK(e.code() == ErrorCode::kNotFound);
  }
  LoadOptions o = cpu_options();
  o.methods = {"accumulate"};
  Module only(pte, o);
  CHECK(only.method_names() == std::vector<std::string>{"accumulate"});
  CHECK(only.default_method() == "accumulate");  // no "forward": the first loaded method
  Error e = expect_error([&] { only.forward({}); });
  CHECK(e.code() == ErrorCode::kNotFound);
  CHECK(contains(e.what(), "not loaded"));

  o.methods = {"missing_method"};
  e = expect_error([&] { Module bad(pte, o); });
  CHECK(e.code() == ErrorCode::kNotFound);
}

TEST_CASE("module(fake): delegate argument order differs from method input order; state persists") {
  TempDir dir;
  Module m(build_program().write(dir.path, "fake"), cpu_options());
  auto init = kv_init();
  auto expect_sum = [&](const std::vector<float>& cache) {
    std::vector<float> s(4, 0.0f);
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < 4; ++k) s[k] += cache[r * 4 + k];
    return s;
  };
  // Method inputs (x, pos) reach the delegate as (pos, x): names follow the values.
  const auto meta = m.method_meta("accumulate");
  CHECK(meta.input_names == std::vector<std::string>{"x", "pos"});
  CHECK(meta.output_names == std::vector<std::string>{"sum"});
  REQUIRE(meta.dynamic_dims.size() == 2);
  CHECK(meta.dynamic_dims[0].empty());  // static inputs
  CHECK(meta.dynamic_dims[1].empty());
  std::vector<float> cache = init;
  auto out = m.execute("accumulate", {host_floats({1, 4}, {100, 200, 300, 400}), host_i64({1}, {1})});
  for (int k = 0; k < 4; ++k) cache[4 + k] = 100.0f * (k + 1);
  REQUIRE(out.size() == 1);
  CHECK(floats(out[0]) == expect_sum(cache));
  out = m.execute("accumulate", {host_floats({1, 4}, {-1, -2, -3, -4}), host_i64({1}, {3})});
  for (int k = 0; k < 4; ++k) cache[12 + k] = -(k + 1.0f);
  CHECK(floats(out[0]) == expect_sum(cache));
}

TEST_CASE("module(fake): Module(Program) from memory, progress callback and timings") {
  BuiltProgram built = build_program();
  auto program = aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()},
                                                 {{built.ptd.data(), built.ptd.size()}}, "mem.pte");
  std::vector<std::string> phases;
  LoadOptions o = cpu_options();
  o.on_progress = [&](const aoti_cuda::LoadProgress& p) { phases.push_back(p.phase + ":" + p.method + ":" + std::to_string(p.done) + "/" + std::to_string(p.total)); };
  Module m(std::move(program), o);
  // Weights go in after every container exists, largest constant table first
  // (accumulate's library declares one constant, forward's none).
  CHECK(phases == std::vector<std::string>{"parse::1/1", "library:forward:1/2", "container:forward:1/2",
                                           "library:accumulate:2/2", "container:accumulate:2/2",
                                           "weights:forward:1/2", "weights:accumulate:2/2"});
  auto out = m.forward({host_floats({1, 4}, {2, 2, 2, 2}), host_floats({1, 4}, {0, 0, 0, 0})});
  CHECK(floats(out[0]) == std::vector<float>{1, 2, 4, -2});
  CHECK(m.load_timings().parse_ms == 0.0);
  // A moved-from module refuses politely.
  Module moved = std::move(m);
  CHECK(moved.method_names().size() == 2);
  Error e = expect_error([&] { m.method_names(); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("module(fake): a failed container Run is reported with the shim's message; nothing leaks") {
  TempDir dir;
  Module m(build_program().write(dir.path, "fake"), cpu_options());
  const int64_t handles_before = aoti_cuda_shim_live_handles();
  Error e = expect_error([&] {
    m.forward({host_floats({1, 4}, {1, 2, 3, 4}), host_floats({1, 4}, {-777, 0, 0, 0})});
  });
  CHECK(e.code() == ErrorCode::kModel);
  CHECK(contains(e.what(), "method 'forward' delegate 0"));
  CHECK(contains(e.what(), "AOTInductorModelContainerRun failed"));
  CHECK(contains(e.what(), "99"));  // the shim's message about the bogus dtype code
  CHECK(aoti_cuda_shim_live_handles() == handles_before);
  // The module still works afterwards.
  auto out = m.forward({host_floats({1, 4}, {1, 1, 1, 1}), host_floats({1, 4}, {0, 0, 0, 0})});
  CHECK(floats(out[0]) == std::vector<float>{0.5f, 1, 2, -1});
}

TEST_CASE("module(fake): a missing shim symbol is named before dlopen") {
  TempDir dir;
  const std::string pte = build_program(AOTI_CUDA_FAKE_MODEL_BAD_IMPORT, false).write(dir.path, "bad");
  const int fds = count_fds();
  const int maps = count_memfd_maps();
  Error e = expect_error([&] { Module m(pte, cpu_options()); });
  CHECK(e.code() == ErrorCode::kLoad);
  CHECK(contains(e.what(), "aoti_torch_fake_op"));
  CHECK(contains(e.what(), "method 'forward' delegate 0"));
  CHECK(count_fds() == fds);
  CHECK(count_memfd_maps() == maps);
}

TEST_CASE("module(fake): a program that imports a cuBLAS-backed shim starts opening cuBLAS at load") {
  // Pointed at a file that does not exist, the background open fails at once: this test needs no
  // cuBLAS and maps none (nothing else in this process multiplies through it).
  REQUIRE(setenv("AOTI_CUDA_CUBLAS", "/nonexistent/aoti_cuda_test/libcublas.so", 1) == 0);
  TempDir dir;
  {
    Module plain(build_program(AOTI_CUDA_FAKE_MODEL_AFFINE, false).write(dir.path, "plain"), cpu_options());
  }
  CHECK_FALSE(aoti_cuda::shim::gemm::opening_started());
  Module m(build_program(AOTI_CUDA_FAKE_MODEL_AFFINE_MM, false).write(dir.path, "mm"), cpu_options());
  CHECK(aoti_cuda::shim::gemm::opening_started());
  auto out = m.forward({host_floats({1, 4}, {1, 1, 1, 1}), host_floats({1, 4}, {0, 0, 0, 0})});
  CHECK(floats(out[0]) == std::vector<float>{0.5f, 1, 2, -1});  // the import is never called: runs as before
  CHECK(aoti_cuda::shim::gemm::uses_cublas("aoti_torch_cuda__weight_int4pack_mm"));
  CHECK_FALSE(aoti_cuda::shim::gemm::uses_cublas("aoti_torch_cuda_baddbmm_out"));
}

TEST_CASE("module(fake): missing .ptd fails the load") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  REQUIRE(std::remove((dir.path + "/aoti_cuda_blob.ptd").c_str()) == 0);
  Error e = expect_error([&] { Module m(pte, cpu_options()); });
  CHECK((e.code() == ErrorCode::kNotFound || e.code() == ErrorCode::kIo || e.code() == ErrorCode::kInvalidProgram));
  CHECK((contains(e.what(), "ptd") || contains(e.what(), "weights_blob")));
}

TEST_CASE("module(fake): a weights blob shorter than the model reads is refused") {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", read_file(AOTI_CUDA_FAKE_MODEL_AFFINE),
                             float_bytes({1.0f, 2.0f, 3.0f}));  // 12 bytes, the model reads 16
  b.add_method(cuda_method("forward", {f32({1, 4}), f32({1, 4})}, {f32({1, 4}), f32({1, 4})}, fw));
  BuiltProgram built = b.build();
  auto program = aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()},
                                                 {{built.ptd.data(), built.ptd.size()}}, "short.pte");
  Error e = expect_error([&] { Module m(std::move(program), cpu_options()); });
  CHECK(e.code() == ErrorCode::kInvalidProgram);
  CHECK(contains(e.what(), "forward_weights_blob"));
  CHECK(contains(e.what(), "has 12 bytes but the model library reads 16"));
}

TEST_CASE("module(fake): an empty weights blob for a model that reads weights is refused") {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", read_file(AOTI_CUDA_FAKE_MODEL_AFFINE), {});
  b.add_method(cuda_method("forward", {f32({1, 4}), f32({1, 4})}, {f32({1, 4}), f32({1, 4})}, fw));
  BuiltProgram built = b.build();
  auto program = aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()},
                                                 {{built.ptd.data(), built.ptd.size()}}, "empty.pte");
  Error e = expect_error([&] { Module m(std::move(program), cpu_options()); });
  CHECK(e.code() == ErrorCode::kInvalidProgram);
  CHECK(contains(e.what(), "reads 16 bytes of weights but the program has no weights blob"));
}

TEST_CASE("module(fake): SHA-256 trust pin") {
  TempDir dir;
  const std::string pte = build_program(AOTI_CUDA_FAKE_MODEL_AFFINE, false).write(dir.path, "fake");
  Bytes so = read_file(AOTI_CUDA_FAKE_MODEL_AFFINE);
  const std::string digest = aoti_cuda::runtime::sha256_hex(so.data(), so.size());
  LoadOptions o = cpu_options();
  o.allowed_so_sha256 = {std::string(64, '0')};
  Error e = expect_error([&] { Module m(pte, o); });
  CHECK(e.code() == ErrorCode::kLoad);
  CHECK(contains(e.what(), digest));
  CHECK(contains(e.what(), "allowed_so_sha256"));
  std::string upper = digest;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  o.allowed_so_sha256 = {std::string(64, '0'), upper};  // case-insensitive
  Module ok(pte, o);
  CHECK(ok.method_names() == std::vector<std::string>{"forward"});
}

TEST_CASE("module(fake): bad load options and the default CUDA device") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  LoadOptions o = cpu_options();
  o.num_models = 0;
  CHECK(expect_error([&] { Module m(pte, o); }).code() == ErrorCode::kInvalidArgument);
  // Default options ask for cuda:0. Without a GPU that is a clear kNoDevice;
  // with one, the CPU-only fake library refuses the "cuda:0" container.
  Error e = expect_error([&] { Module m(pte); });
  if (aoti_cuda_test::gpu_available()) {
    CHECK(e.code() == ErrorCode::kModel);
    CHECK(contains(e.what(), "cuda:0"));
  } else {
    CHECK(e.code() == ErrorCode::kNoDevice);
    CHECK(contains(e.what(), "cudaGetDeviceCount"));
  }
}

TEST_CASE("module(fake): non-runnable methods are reported with the reader's reason") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", read_file(AOTI_CUDA_FAKE_MODEL_AFFINE),
                                float_bytes(kAffineW));
  MethodDesc other = cuda_method("other", {f32({4})}, {f32({4})}, blobs);
  other.delegates[0].id = "XnnpackBackend";
  b.add_method(other);
  BuiltProgram built = b.build();
  auto open = [&] {
    return aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()}, {{built.ptd.data(), built.ptd.size()}},
                                           "other.pte");
  };
  Error e = expect_error([&] { Module m(open(), cpu_options()); });
  CHECK(e.code() == ErrorCode::kUnsupported);
  CHECK(contains(e.what(), "'other'"));
  CHECK(contains(e.what(), "XnnpackBackend"));
  LoadOptions o = cpu_options();
  o.methods = {"other"};
  e = expect_error([&] { Module m(open(), o); });
  CHECK(e.code() == ErrorCode::kUnsupported);
  CHECK(contains(e.what(), "XnnpackBackend"));
}

TEST_CASE("module(fake): num_models concurrent calls from several threads") {
  TempDir dir;
  LoadOptions o = cpu_options();
  o.num_models = 2;
  Module m(build_program().write(dir.path, "fake"), o);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float v = static_cast<float>(t * 100 + i);
        auto out = m.forward({host_floats({1, 4}, {v, v, v, v}), host_floats({1, 4}, {1, 1, 1, 1})});
        auto y = floats(out[0]);
        for (int k = 0; k < 4; ++k) bad += y[k] != v * kAffineW[k] + 1.0f;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
}

TEST_CASE("module(fake): 50 load/unload cycles leave fds, handles and mappings where they were") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  { Module warm(pte, cpu_options()); }  // first-use allocations (dl caches, etc.)
  const int fds = count_fds();
  const int maps = count_memfd_maps();
  const int64_t handles = aoti_cuda_shim_live_handles();
  for (int i = 0; i < 50; ++i) {
    Module m(pte, cpu_options());
    auto out = m.forward({host_floats({1, 4}, {1, 1, 1, 1}), host_floats({1, 4}, {0, 0, 0, 0})});
    REQUIRE(floats(out[0]) == std::vector<float>{0.5f, 1, 2, -1});
    if (i == 0) CHECK(count_memfd_maps() > maps);  // the libraries really are memfd-backed
  }
  CHECK(count_fds() == fds);
  CHECK(count_memfd_maps() == maps);
  CHECK(aoti_cuda_shim_live_handles() == handles);
}

TEST_CASE("module(fake): outputs outlive the module") {
  TempDir dir;
  std::vector<Tensor> out;
  {
    Module m(build_program().write(dir.path, "fake"), cpu_options());
    out = m.forward({host_floats({1, 4}, {4, 4, 4, 4}), host_floats({1, 4}, {1, 1, 1, 1})});
  }
  CHECK(floats(out[0]) == std::vector<float>{3, 5, 9, -3});
}

namespace {
// Sets an environment variable for the scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};
int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}
}  // namespace

TEST_CASE("module(fake): temp-file fallback when memfd is unavailable leaves no file behind") {
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  TempDir tmp;
  ScopedEnv no_memfd("AOTI_CUDA_DISABLE_MEMFD", "1");
  ScopedEnv tmpdir("TMPDIR", tmp.path.c_str());
  const int fds = count_fds();
  {
    Module m(pte, cpu_options());
    CHECK(count_entries(tmp.path) == 0);  // unlinked right after dlopen
    auto out = m.forward({host_floats({1, 4}, {1, 1, 1, 1}), host_floats({1, 4}, {0, 0, 0, 0})});
    CHECK(floats(out[0]) == std::vector<float>{0.5f, 1, 2, -1});
  }
  CHECK(count_fds() == fds);
  // An unusable TMPDIR is reported, naming the directory.
  ScopedEnv bad_tmp("TMPDIR", "/nonexistent/aoti_cuda_no_such_dir");
  Error e = expect_error([&] { Module m(pte, cpu_options()); });
  CHECK(e.code() == ErrorCode::kIo);
  CHECK(contains(e.what(), "/nonexistent/aoti_cuda_no_such_dir"));
}

TEST_CASE("module(fake): GNU_UNIQUE symbols: rewritten so libraries unload; kept, the library stays and a reused fd path is not confused") {
  Bytes so = read_file(AOTI_CUDA_FAKE_MODEL_KV);
  CHECK_FALSE(aoti_cuda::runtime::gnu_unique_symbol_offsets({so.data(), so.size()}).empty());
  TempDir dir;
  const std::string pte = build_program().write(dir.path, "fake");
  LoadOptions o = cpu_options();
  o.methods = {"accumulate"};
  const int maps = count_memfd_maps();
  { Module m(pte, o); }
  CHECK(count_memfd_maps() == maps);  // default: unloaded
  {
    ScopedEnv keep("AOTI_CUDA_KEEP_UNIQUE_SYMBOLS", "1");
    Module m(pte, o);
    m.execute("accumulate", {host_floats({1, 4}, {100, 100, 100, 100}), host_i64({1}, {0})});
  }
  // glibc keeps a library defining a GNU_UNIQUE symbol it bound (nodelete).
  const int stale = count_memfd_maps();
  CHECK(stale > maps);
  // The next load may get the same fd number; it must still be a fresh library
  // (fresh container state), not the stale one glibc knows by that path.
  Module fresh(pte, o);
  auto out = fresh.execute("accumulate", {host_floats({1, 4}, {0, 0, 0, 0}), host_i64({1}, {0})});
  auto init = kv_init();
  std::vector<float> want(4, 0.0f);
  for (int r = 1; r < 4; ++r)
    for (int k = 0; k < 4; ++k) want[k] += init[r * 4 + k];
  CHECK(floats(out[0]) == want);
}

TEST_CASE("module(fake): a plan with et_copy steps, a move and the same delegate called twice") {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "chain", read_file(AOTI_CUDA_FAKE_MODEL_AFFINE),
                             float_bytes(kAffineW));
  MethodDesc m;
  m.name = "chain";
  for (int i = 0; i < 9; ++i) m.values.push_back(ValueDesc::of(f32({2, 4})));
  m.inputs = {0, 1};
  m.outputs = {8, 4};
  m.operators = {{"et_copy::_h2d_copy", "out"}, {"et_copy::_d2h_copy", "out"}};
  InstrDesc h2d;
  h2d.kind = InstrDesc::Kind::kKernel;
  h2d.index = 0;
  h2d.args = {0, 2};
  InstrDesc call1;
  call1.kind = InstrDesc::Kind::kDelegate;
  call1.index = 0;
  call1.args = {2, 1, 3, 4};  // y = a*w + b
  InstrDesc call2 = call1;
  call2.args = {3, 1, 5, 6};  // z = y*w + b
  InstrDesc d2h;
  d2h.kind = InstrDesc::Kind::kKernel;
  d2h.index = 1;
  d2h.args = {5, 7, 7};  // the emitter may repeat the out value
  InstrDesc move;
  move.kind = InstrDesc::Kind::kMove;
  move.index = 7;
  move.second = 8;
  m.instructions = {h2d, call1, call2, d2h, move};
  m.delegates.push_back(cuda_delegate(fw));
  b.add_method(m);
  BuiltProgram built = b.build();
  auto program = aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()},
                                                 {{built.ptd.data(), built.ptd.size()}}, "chain.pte");
  REQUIRE_MESSAGE(program.method("chain").runnable, program.method("chain").not_runnable_reason);
  Module mod(std::move(program), cpu_options());
  const int64_t handles = aoti_cuda_shim_live_handles();
  {
    std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8}, bb = {1, 1, 1, 1, 2, 2, 2, 2};
    auto out = mod.execute("chain", {host_floats({2, 4}, a), host_floats({2, 4}, bb)});
    REQUIRE(out.size() == 2);
    std::vector<float> y(8), z(8);
    for (int i = 0; i < 8; ++i) {
      y[i] = a[i] * kAffineW[i % 4] + bb[i];
      z[i] = y[i] * kAffineW[i % 4] + bb[i];
    }
    CHECK(floats(out[0]) == z);
    CHECK(floats(out[1]) == y);
  }
  CHECK(aoti_cuda_shim_live_handles() == handles);
}

TEST_CASE("module: the 'partial' fixture (a KernelCall outside the delegate) is refused before any device work") {
  const std::string dir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/partial";
  Error e = expect_error([&] { Module m(dir + "/partial.pte"); });
  CHECK(e.code() == ErrorCode::kUnsupported);
  CHECK(contains(e.what(), "aten::sigmoid.out"));
  CHECK(contains(e.what(), "'forward'"));
}

TEST_CASE("module(fake): RunOptions::profile times staging, the delegate, its outputs and collection") {
  TempDir dir;
  Module m(build_program().write(dir.path, "fake"), cpu_options());
  aoti_cuda::RunProfile prof;
  aoti_cuda::RunOptions ro;
  ro.profile = &prof;
  auto out = m.forward(
      {host_floats({2, 4}, std::vector<float>(8, 1.0f)), host_floats({2, 4}, std::vector<float>(8, 0.0f))}, ro);
  REQUIRE(out.size() == 2);
  std::vector<std::string> names;
  double sum = 0;
  for (const auto& s : prof.steps) {
    names.push_back(s.what);
    CHECK(s.host_ms >= 0);
    CHECK(s.gpu_ms == -1);  // a CPU Module has no GPU time
    sum += s.host_ms;
  }
  CHECK(names == std::vector<std::string>{"stage inputs: delegate 0 (forward)", "run: delegate 0 (forward)",
                                          "outputs of delegate 0 (forward)", "collect outputs"});
  CHECK(prof.host_ms >= sum);
  CHECK(prof.gpu_ms == -1);
  CHECK(prof.kernels.empty());
  // Kernel times are GPU times: a CPU Module's profile has none, and the call still runs.
  ro.profile_kernels = true;
  out = m.forward({host_floats({2, 4}, std::vector<float>(8, 1.0f)), host_floats({2, 4}, std::vector<float>(8, 0.0f))},
                  ro);
  CHECK(out.size() == 2);
  CHECK(prof.steps.size() == 4);
  CHECK(prof.kernels.empty());
  // Without a RunProfile nothing is recorded (and the old one is left alone).
  m.forward({host_floats({2, 4}, std::vector<float>(8, 1.0f)), host_floats({2, 4}, std::vector<float>(8, 0.0f))});
  CHECK(prof.steps.size() == 4);
}
