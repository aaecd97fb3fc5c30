// CUDA graphs and bound outputs on a real device, for every exported fixture
// (manifest-driven, tests/fixtures): graph replays bit-identical to the plain
// path call by call (so stateful programs advance the same way), dynamic
// shapes with the LRU bound, concurrent slots, caller streams, bound outputs,
// no device memory growth over many replays, the kernel node that makes a
// replay's small copies, and the two capture diagnostics (AOTI_CUDA_GRAPH_DOT,
// AOTI_CUDA_GRAPH_PROBE).
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/memory.hpp"
#include "common/small_copy.hpp"
#include "support/gpu.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::GraphStatus;
using aoti_cuda::GraphUse;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::OutputLocation;
using aoti_cuda::RunOptions;
using aoti_cuda::Tensor;
using json = nlohmann::json;

namespace {

struct MethodCase {
  std::string method;
  std::vector<Tensor> inputs;      // host tensors from the manifest's files
  std::vector<Tensor> alt_inputs;  // the alt_case's, when there is one
};
struct Fixture {
  std::string name, pte;
  std::vector<MethodCase> methods;
};

DType parse_dtype(const std::string& s) {
  if (s == "float32") return DType::kFloat32;
  if (s == "bfloat16") return DType::kBFloat16;
  if (s == "float16") return DType::kFloat16;
  if (s == "int64") return DType::kInt64;
  if (s == "int32") return DType::kInt32;
  if (s == "bool") return DType::kBool;
  throw std::runtime_error("manifest: unknown dtype " + s);
}

std::vector<Tensor> read_tensors(const std::string& dir, const json& arr) {
  std::vector<Tensor> out;
  for (const auto& t : arr) {
    Tensor x = Tensor::empty(t.at("shape").get<std::vector<int64_t>>(), parse_dtype(t.at("dtype").get<std::string>()));
    std::ifstream f(dir + "/" + t.at("file").get<std::string>(), std::ios::binary);
    f.read(static_cast<char*>(x.data()), static_cast<std::streamsize>(x.nbytes()));
    REQUIRE(static_cast<std::size_t>(f.gcount()) == x.nbytes());
    out.push_back(x);
  }
  return out;
}

// Every runnable fixture under tests/fixtures, sorted by name.
std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  const std::string root = AOTI_CUDA_TEST_FIXTURES;
  DIR* d = opendir(root.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string dir = root + "/" + e->d_name;
    struct stat st{};
    if (e->d_name[0] == '.' || ::stat((dir + "/manifest.json").c_str(), &st) != 0) continue;
    std::ifstream in(dir + "/manifest.json");
    const json j = json::parse(in);
    if (j.value("expect_not_runnable", false)) continue;
    Fixture f;
    f.name = e->d_name;
    f.pte = dir + "/" + j.at("pte").get<std::string>();
    for (auto it = j.at("methods").begin(); it != j.at("methods").end(); ++it) {
      MethodCase c;
      c.method = it.key();
      c.inputs = read_tensors(dir, it.value().at("inputs"));
      if (it.value().contains("alt_case")) c.alt_inputs = read_tensors(dir, it.value()["alt_case"].at("inputs"));
      f.methods.push_back(c);
    }
    out.push_back(f);
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

const Fixture& fixture(const std::string& name) {
  static const std::vector<Fixture> all = fixtures();
  for (const Fixture& f : all) {
    if (f.name == name) return f;
  }
  FAIL("fixture " << name << " is missing");
  throw std::logic_error("unreachable");
}

std::vector<Tensor> on_device(const std::vector<Tensor>& host) {
  std::vector<Tensor> out;
  for (const Tensor& t : host) out.push_back(t.to_device());
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.device().is_cuda() ? a.to_host() : a;
  const Tensor hb = b.device().is_cuda() ? b.to_host() : b;
  return ha.shape() == hb.shape() && ha.dtype() == hb.dtype() && ha.nbytes() == hb.nbytes() &&
         std::memcmp(ha.data(), hb.data(), ha.nbytes()) == 0;
}

void check_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << " output " << i);
    CHECK(same_bytes(got[i], want[i]));
  }
}

LoadOptions graph_options(std::size_t max_graphs = 4) {
  LoadOptions o;
  o.cuda_graphs = true;
  o.max_graphs_per_method = max_graphs;
  return o;
}

RunOptions device_io() {
  RunOptions r;
  r.outputs = OutputLocation::kDevice;
  return r;
}

}  // namespace

TEST_CASE("graphs: every fixture, call by call bit-identical to the plain path" * AOTI_CUDA_GPU_CASE) {
  for (const Fixture& f : fixtures()) {
    CAPTURE(f.name);
    Module plain(f.pte);
    Module graphs(f.pte, graph_options());
    // The same sequence on both: state kept by the program (KV caches) advances alike.
    for (const MethodCase& c : f.methods) {
      const std::vector<Tensor> din = on_device(c.inputs);
      // Calls 0-2 device I/O; then every other mix of host and device inputs
      // and outputs, each replayed by its own one-launch variant.
      for (int call = 0; call < 6; ++call) {
        CAPTURE(c.method);
        CAPTURE(call);
        const bool host_in = call == 3 || call == 4, host_out = call == 3 || call == 5;
        RunOptions ro;
        ro.outputs = host_out ? OutputLocation::kHost : OutputLocation::kDevice;
        const std::vector<Tensor>& in = host_in ? c.inputs : din;
        auto want = plain.execute(c.method, in, ro);
        auto got = graphs.execute(c.method, in, ro);
        check_same(got, want, f.name + "." + c.method);
        for (const Tensor& t : got) CHECK(t.device().is_cpu() == host_out);
      }
      const GraphStatus st = graphs.graph_status(c.method);
      MESSAGE(f.name << "." << c.method << ": captures " << st.captures << ", replays " << st.replays
                     << (st.available ? "" : ", graphs off: " + st.reason));
      CHECK(st.requested);
      if (st.available) {
        CHECK(st.captures == 1);
        CHECK(st.replays == 5);  // call 0 warms up, call 1 captures and replays, the others replay
      }
    }
  }
  // The plain fixtures must be capturable.
  for (const char* name : {"add", "mlp", "conv", "kv_cache"}) {
    Module m(fixture(name).pte, graph_options());
    const auto in = on_device(fixture(name).methods[0].inputs);
    for (int i = 0; i < 3; ++i) (void)m.execute(fixture(name).methods[0].method, in, device_io());
    const GraphStatus st = m.graph_status(fixture(name).methods[0].method);
    INFO(name << ": " << st.reason);
    CHECK(st.available);
    CHECK(st.replays == 2);
  }
}

TEST_CASE("graphs: a stateful program advances under graphs" * AOTI_CUDA_GPU_CASE) {
  // kv_cache: cache[pos] = x, returns cache.sum(0): each new position changes the result.
  const Fixture& f = fixture("kv_cache");
  const MethodCase& c = f.methods[0];
  Module plain(f.pte);
  Module graphs(f.pte, graph_options());
  const Tensor x = c.inputs[0].to_device();
  Tensor previous;
  int changed = 0;
  for (int64_t call = 0; call < 8; ++call) {
    CAPTURE(call);
    Tensor pos = Tensor::empty({1}, DType::kInt64);
    *pos.data_ptr<int64_t>() = call;
    const std::vector<Tensor> in = {x, pos.to_device()};
    auto want = plain.execute(c.method, in, device_io());
    auto got = graphs.execute(c.method, in, device_io());
    check_same(got, want, "kv_cache");
    if (previous.defined() && !same_bytes(previous, got[0])) ++changed;
    previous = got[0];
  }
  CHECK(changed == 7);  // the cache is written in place by each call (also by replays)
  CHECK(graphs.graph_status(c.method).replays == 7);
}

TEST_CASE("graphs: shape changes on a dynamic program, LRU bound respected" * AOTI_CUDA_GPU_CASE) {
  for (const char* name : {"dynamic_mlp", "sdpa_bf16_dynamic"}) {
    const Fixture& f = fixture(name);
    const MethodCase& c = f.methods[0];
    REQUIRE(!c.alt_inputs.empty());
    Module plain(f.pte);
    Module graphs(f.pte, graph_options(1));
    const auto a = on_device(c.inputs), b = on_device(c.alt_inputs);
    // a a a b b b a a : every call matches the plain path
    const std::vector<const std::vector<Tensor>*> seq = {&a, &a, &a, &b, &b, &b, &a, &a};
    for (std::size_t k = 0; k < seq.size(); ++k) {
      CAPTURE(name);
      CAPTURE(k);
      check_same(graphs.execute(c.method, *seq[k], device_io()), plain.execute(c.method, *seq[k], device_io()), name);
      CHECK(graphs.graph_status(c.method).graphs <= 1);
    }
    const GraphStatus st = graphs.graph_status(c.method);
    INFO(st.reason);
    CHECK(st.available);
    CHECK(st.captures == 3);   // a, b, then a again after its eviction
    CHECK(st.evictions == 2);
    CHECK(st.replays == 6);    // all but the two warm-up calls
  }
}

TEST_CASE("graphs: concurrent calls (num_models = 3) replay their own graphs" * AOTI_CUDA_GPU_CASE) {
  const Fixture& f = fixture("mlp");
  const MethodCase& c = f.methods[0];
  Module plain(f.pte);
  const auto want = plain.execute(c.method, c.inputs);  // host result
  LoadOptions o = graph_options();
  o.num_models = 3;
  Module m(f.pte, o);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      cudaStream_t s = nullptr;
      if (t % 2 == 1) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      RunOptions ro;
      ro.stream = s;
      ro.outputs = OutputLocation::kHost;
      const auto din = on_device(c.inputs);
      for (int i = 0; i < 40; ++i) {
        auto got = m.execute(c.method, t % 3 == 0 ? c.inputs : din, ro);
        if (!same_bytes(got[0], want[0])) mismatches.fetch_add(1);
      }
      if (s != nullptr) cudaStreamDestroy(s);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches.load() == 0);
  const GraphStatus st = m.graph_status(c.method);
  CHECK(st.available);
  CHECK(st.captures >= 1);
  CHECK(st.captures <= 3);  // at most one per slot
  CHECK(st.replays >= 240 - 6);
}

TEST_CASE("graphs: bound outputs, device and pinned host, with and without graphs" * AOTI_CUDA_GPU_CASE) {
  for (const char* name : {"mlp", "multi_out", "block"}) {
    const Fixture& f = fixture(name);
    const MethodCase& c = f.methods[0];
    Module plain(f.pte);
    const auto want = plain.execute(c.method, c.inputs);
    for (bool use_graphs : {false, true}) {
      CAPTURE(name);
      CAPTURE(use_graphs);
      Module m(f.pte, use_graphs ? graph_options() : LoadOptions{});
      std::vector<Tensor> dev_out, host_out, pageable_out;
      for (const Tensor& w : want) {
        dev_out.push_back(Tensor::empty(w.shape(), w.dtype(), Device::cuda(0)));
        host_out.push_back(Tensor::empty(w.shape(), w.dtype(), Device::cpu(), /*pinned=*/true));
        pageable_out.push_back(Tensor::empty(w.shape(), w.dtype(), Device::cpu()));
      }
      const auto din = on_device(c.inputs);
      for (int i = 0; i < 4; ++i) {
        for (Tensor& t : host_out) std::memset(t.data(), 0, t.nbytes());
        for (Tensor& t : pageable_out) std::memset(t.data(), 0, t.nbytes());
        for (Tensor& t : dev_out) REQUIRE(cudaMemset(t.data(), 0, t.nbytes()) == cudaSuccess);
        m.execute_into(c.method, din, dev_out);
        check_same(dev_out, want, "device bound, device inputs");
        m.execute_into(c.method, c.inputs, host_out);
        check_same(host_out, want, "pinned host bound, host inputs");
        m.execute_into(c.method, din, pageable_out);
        check_same(pageable_out, want, "pageable host bound, device inputs");
        for (Tensor& t : dev_out) REQUIRE(cudaMemset(t.data(), 0, t.nbytes()) == cudaSuccess);
        m.execute_into(c.method, c.inputs, dev_out);
        check_same(dev_out, want, "device bound, host inputs");
      }
      if (use_graphs) CHECK(m.graph_status(c.method).replays == 15);  // all but the first call
      // A mismatching bound output names the output.
      std::vector<Tensor> wrong = dev_out;
      wrong[0] = Tensor::empty({1}, wrong[0].dtype(), Device::cuda(0));
      try {
        m.execute_into(c.method, din, wrong);
        FAIL("a wrong bound output was accepted");
      } catch (const aoti_cuda::Error& e) {
        CHECK(std::string(e.what()).find("output 0") != std::string::npos);
      }
    }
  }
}

TEST_CASE("graphs: no device memory growth over many replays; caller stream" * AOTI_CUDA_GPU_CASE) {
  const Fixture& f = fixture("block");
  const MethodCase& c = f.methods[0];
  Module plain(f.pte);
  const auto want = plain.execute(c.method, c.inputs);
  Module m(f.pte, graph_options());
  const auto din = on_device(c.inputs);
  std::vector<Tensor> out;
  for (const Tensor& w : want) out.push_back(Tensor::empty(w.shape(), w.dtype(), Device::cuda(0)));
  for (int i = 0; i < 3; ++i) m.execute_into(c.method, din, out);
  cudaDeviceSynchronize();
  const auto stats0 = aoti_cuda::device_memory_stats(0);
  std::size_t free0 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  RunOptions ro;
  ro.stream = s;
  for (int i = 0; i < 300; ++i) {
    m.execute_into(c.method, din, out, i % 2 == 0 ? RunOptions{} : ro);
    if (i % 50 == 0) (void)m.execute(c.method, din, device_io());  // returned outputs come and go
  }
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
  check_same(out, want, "after 300 replays");
  const auto stats1 = aoti_cuda::device_memory_stats(0);
  std::size_t free1 = 0;
  cudaMemGetInfo(&free1, &total);
  CHECK(stats1.bytes_in_use == stats0.bytes_in_use);
  CHECK(stats1.live_allocations == stats0.live_allocations);
  CHECK(free1 + (4u << 20) >= free0);  // within 4 MiB (pool bookkeeping)
  CHECK(m.graph_status(c.method).replays >= 300);
  cudaStreamDestroy(s);
}

TEST_CASE("graphs: one-launch replays follow the caller's input and output addresses" * AOTI_CUDA_GPU_CASE) {
  // Device inputs and bound device outputs are copied by nodes inside the graph;
  // when a call passes other buffers the nodes are re-pointed. Two input sets
  // (the fixture's input and a scaled copy) in alternating buffers, two output
  // sets: every call must equal the plain path on the same input.
  for (const char* name : {"mlp", "multi_out"}) {
    CAPTURE(name);
    const Fixture& f = fixture(name);
    const MethodCase& c = f.methods[0];
    std::vector<std::vector<Tensor>> host_inputs{c.inputs, {}};
    for (const Tensor& t : c.inputs) {
      Tensor s = t.to_host();  // a copy: the fixture's input scaled by 0.5 (float inputs)
      if (s.dtype() == aoti_cuda::DType::kFloat32) {
        for (int64_t k = 0; k < s.numel(); ++k) s.data_ptr<float>()[k] *= 0.5f;
      }
      host_inputs[1].push_back(s);
    }
    Module plain(f.pte);
    const std::vector<std::vector<Tensor>> want{plain.execute(c.method, host_inputs[0]),
                                                plain.execute(c.method, host_inputs[1])};
    Module m(f.pte, graph_options());
    // Four device copies of the inputs: buffers (set k % 2) at two addresses each.
    std::vector<std::vector<Tensor>> din{on_device(host_inputs[0]), on_device(host_inputs[1]),
                                         on_device(host_inputs[0]), on_device(host_inputs[1])};
    std::vector<std::vector<Tensor>> outs(3);
    for (auto& o : outs) {
      for (const Tensor& w : want[0]) o.push_back(Tensor::empty(w.shape(), w.dtype(), Device::cuda(0)));
    }
    for (int i = 0; i < 12; ++i) {
      const std::size_t k = static_cast<std::size_t>(i % 4), o = static_cast<std::size_t>(i % 3);
      m.execute_into(c.method, din[k], outs[o]);
      check_same(outs[o], want[k % 2], "bound outputs after a replay with moved buffers");
      check_same(m.execute(c.method, din[k], device_io()), want[k % 2], "returned outputs");
    }
    CHECK(m.graph_status(c.method).replays >= 20);
    // Host inputs on a caller's stream, not synchronized between calls: each
    // call's inputs are staged for its own launch (the next call waits until
    // the previous launch has read the staging buffer), so every result is
    // that of its own inputs.
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    RunOptions on_stream = device_io();
    on_stream.stream = s;
    std::vector<std::vector<Tensor>> results;
    for (int i = 0; i < 8; ++i) results.push_back(m.execute(c.method, host_inputs[i % 2], on_stream));
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    for (int i = 0; i < 8; ++i) check_same(results[static_cast<std::size_t>(i)], want[i % 2], "host inputs, caller stream");
    results.clear();
    cudaStreamDestroy(s);
  }
}

TEST_CASE("graphs: one kernel node makes a list of copies, and is re-pointed as a whole" * AOTI_CUDA_GPU_CASE) {
  // The copy nodes around a replay (common/small_copy.hpp): copies of several sizes, 16-byte and unaligned, the
  // largest at kSmallCopyMax, in one node; then the same node pointed at other buffers.
  namespace common = aoti_cuda::common;
  const std::vector<std::size_t> sizes = {8, 1000, 4096 + 3, common::kSmallCopyMax};
  auto device_bytes = [](std::size_t n, int seed) {
    std::vector<unsigned char> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(i * 131 + seed);
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, n + 1) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, host.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
    return std::make_pair(p, host);
  };
  std::vector<void*> owned;
  common::CopyList first, second;
  std::vector<std::vector<unsigned char>> want_first, want_second;
  for (std::size_t c = 0; c < sizes.size(); ++c) {
    auto [s1, h1] = device_bytes(sizes[c], 1 + static_cast<int>(c));
    auto [s2, h2] = device_bytes(sizes[c], 50 + static_cast<int>(c));
    void *d1 = nullptr, *d2 = nullptr;
    REQUIRE(cudaMalloc(&d1, sizes[c] + 1) == cudaSuccess);
    REQUIRE(cudaMalloc(&d2, sizes[c] + 1) == cudaSuccess);
    // Odd copies start one byte in: unaligned ends take the byte loop.
    const std::size_t off = c % 2;
    REQUIRE(first.add(static_cast<char*>(d1) + off, s1, sizes[c] - off));
    REQUIRE(second.add(static_cast<char*>(d2) + off, s2, sizes[c] - off));
    want_first.push_back(std::vector<unsigned char>(h1.begin(), h1.end() - static_cast<std::ptrdiff_t>(off)));
    want_second.push_back(std::vector<unsigned char>(h2.begin(), h2.end() - static_cast<std::ptrdiff_t>(off)));
    owned.insert(owned.end(), {s1, s2, d1, d2});
  }
  cudaGraph_t graph = nullptr;
  cudaGraphNode_t node = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaGraphCreate(&graph, 0) == cudaSuccess);
  REQUIRE(common::add_copy_list_node(&node, graph, nullptr, 0, first) == 0);
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  auto check_copies = [&](const common::CopyList& list, const std::vector<std::vector<unsigned char>>& want) {
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    for (int c = 0; c < list.count; ++c) {
      CAPTURE(c);
      std::vector<unsigned char> got(list.bytes[c]);
      REQUIRE(cudaMemcpy(got.data(), list.dst[c], got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(got == want[static_cast<std::size_t>(c)]);
    }
  };
  check_copies(first, want_first);
  REQUIRE(common::set_copy_list_node(exec, node, second) == 0);
  check_copies(second, want_second);
  common::CopyList empty;
  CHECK(common::set_copy_list_node(exec, node, empty) == static_cast<int>(cudaErrorInvalidValue));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  for (void* p : owned) cudaFree(p);
}

TEST_CASE("graphs: AOTI_CUDA_GRAPH_DOT writes each captured plan, with its kernels" * AOTI_CUDA_GPU_CASE) {
  aoti_cuda_test::TempDir folder;
  const Fixture& f = fixture("mlp");
  const MethodCase& c = f.methods[0];
  ::setenv("AOTI_CUDA_GRAPH_DOT", folder.path.c_str(), 1);
  {
    Module m(f.pte, graph_options());
    const auto in = on_device(c.inputs);
    for (int i = 0; i < 3; ++i) (void)m.execute(c.method, in, device_io());
    CHECK(m.graph_status(c.method).captures == 1);
  }
  ::unsetenv("AOTI_CUDA_GRAPH_DOT");
  std::vector<std::string> dots;
  DIR* d = opendir(folder.path.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') dots.push_back(e->d_name);
  }
  closedir(d);
  REQUIRE(dots.size() == 1);  // one capture, one file
  CHECK(dots[0].rfind(c.method + "-", 0) == 0);
  std::ifstream in(folder.path + "/" + dots[0]);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("digraph") != std::string::npos);
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  CHECK(text.find("kernel") != std::string::npos);  // the library's kernels are nodes of the plan
}

TEST_CASE("graphs: AOTI_CUDA_GRAPH_PROBE times the plan kernel by kernel, and replays stay right" * AOTI_CUDA_GPU_CASE) {
  const Fixture& f = fixture("mlp");
  const MethodCase& c = f.methods[0];
  std::vector<std::string> lines;
  std::mutex lines_mutex;
  aoti_cuda::LogHandler previous = aoti_cuda::set_log_handler([&](aoti_cuda::LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> lock(lines_mutex);
    if (m.find("AOTI_CUDA_GRAPH_PROBE") != std::string_view::npos) lines.emplace_back(m);
  });
  ::setenv("AOTI_CUDA_GRAPH_PROBE", "on", 1);
  Module plain(f.pte);
  const auto in = on_device(c.inputs);
  {
    Module m(f.pte, graph_options());
    for (int i = 0; i < 3; ++i) {
      check_same(m.execute(c.method, in, device_io()), plain.execute(c.method, in, device_io()), "mlp");
    }
  }
  ::unsetenv("AOTI_CUDA_GRAPH_PROBE");
  aoti_cuda::set_log_handler(previous);
  for (const std::string& l : lines) MESSAGE(l);
  // mlp's plan: 2 kernel nodes of 2 distinct kernels (graph-dot-h100-2026-12-05/mlp.dot): a summary, one line each,
  // and the estimate; no failure.
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find("2 kernel nodes (2 distinct kernels)") != std::string::npos);
  CHECK(lines[1].find("the only real kernel among empty ones adds") != std::string::npos);
  CHECK(lines[2].find("the only real kernel among empty ones adds") != std::string::npos);
  CHECK(lines[3].find("every kernel empty plus each kernel's addition") != std::string::npos);
  for (const std::string& l : lines) CHECK(l.find("stopped") == std::string::npos);
}
