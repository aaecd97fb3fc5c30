// Module I/O binding (execute_into) and the CUDA-graph options on the CPU:
// fake model libraries (tests/fake_model) in a synthesized program, run
// through the real shim. Graphs cannot run on the CPU: the fallback and its
// reason are what is tested here (tests/gpu/test_graphs.cpp covers replays).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "support/affine_program.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::GraphStatus;
using aoti_cuda::GraphUse;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::RunOptions;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

const std::vector<float>& kW = affine_weights();  // the affine model's weights: y = a * w + b

LoadOptions cpu_options() {
  LoadOptions o;
  o.device = Device::cpu();
  return o;
}

Tensor host_f32(std::vector<int64_t> shape, float first) {
  Tensor t = Tensor::empty(std::move(shape), DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<float>()[i] = first + static_cast<float>(i);
  return t;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("module io: execute_into writes the outputs into the caller's tensors") {
  AffineProgram prog;
  Module m(prog.pte, cpu_options());
  const int64_t handles = aoti_cuda_shim_live_handles();
  Tensor a = host_f32({3, 4}, 1.0f), b = host_f32({3, 4}, 0.0f);
  Tensor y0 = Tensor::empty({3, 4}, DType::kFloat32), y1 = Tensor::empty({3, 4}, DType::kFloat32);
  std::memset(y0.data(), 0xff, y0.nbytes());
  std::memset(y1.data(), 0xff, y1.nbytes());
  void* const y0_data = y0.data();
  m.execute_into("forward", {a, b}, {y0, y1});
  CHECK(y0.data() == y0_data);  // written in place, not replaced
  for (int64_t i = 0; i < 12; ++i) {
    const float want = a.data_ptr<float>()[i] * kW[static_cast<std::size_t>(i % 4)] + b.data_ptr<float>()[i];
    CHECK(y0.data_ptr<float>()[i] == want);
    CHECK(y1.data_ptr<float>()[i] == want);
  }
  // Same result as execute(); nothing of the call stays alive.
  auto out = m.forward({a, b});
  CHECK(std::memcmp(out[0].data(), y0.data(), y0.nbytes()) == 0);
  out.clear();
  CHECK(aoti_cuda_shim_live_handles() == handles);
}

TEST_CASE("module io: bound outputs are validated and the failing output is named") {
  AffineProgram prog;
  Module m(prog.pte, cpu_options());
  Tensor a = host_f32({2, 4}, 1.0f), b = host_f32({2, 4}, 0.0f);
  Tensor ok = Tensor::empty({2, 4}, DType::kFloat32);

  Error e = expect_error([&] { m.execute_into("forward", {a, b}, {ok}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "2 output(s), 1 output tensor(s) given"));

  e = expect_error([&] { m.execute_into("forward", {a, b}, {ok, Tensor::empty({2, 4}, DType::kInt32)}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "output 1"));
  CHECK(contains(e.what(), "dtype mismatch"));

  e = expect_error([&] { m.execute_into("forward", {a, b}, {Tensor::empty({8}, DType::kFloat32), ok}); });
  CHECK(contains(e.what(), "output 0"));
  CHECK(contains(e.what(), "rank mismatch"));

  e = expect_error([&] { m.execute_into("forward", {a, b}, {ok, Tensor()}); });
  CHECK(contains(e.what(), "output 1"));
  CHECK(contains(e.what(), "undefined"));

  std::vector<float> storage(8);
  Tensor transposed = Tensor::from_blob(storage.data(), {2, 4}, DType::kFloat32, Device::cpu(), {1, 2});
  e = expect_error([&] { m.execute_into("forward", {a, b}, {transposed, ok}); });
  CHECK(contains(e.what(), "output 0"));
  CHECK(contains(e.what(), "contiguous"));

  // Dynamic outputs: the shape the call produced is checked after the run.
  e = expect_error([&] { m.execute_into("forward", {a, b}, {Tensor::empty({3, 4}, DType::kFloat32), ok}); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "output 0"));
  CHECK(contains(e.what(), "produced shape [2, 4]"));
  // A CPU module cannot write device tensors.
  float dummy[8];
  Tensor fake_device = Tensor::from_blob(dummy, {2, 4}, DType::kFloat32, Device::cuda(0));
  e = expect_error([&] { m.execute_into("forward", {a, b}, {fake_device, ok}); });
  CHECK(contains(e.what(), "output 0"));
}

TEST_CASE("module io: CUDA graphs on a CPU module fall back with the reason") {
  AffineProgram prog;
  LoadOptions o = cpu_options();
  o.cuda_graphs = true;
  Module m(prog.pte, o);
  GraphStatus st = m.graph_status("forward");
  CHECK(st.requested);
  CHECK_FALSE(st.available);
  CHECK(contains(st.reason, "CUDA device"));
  // Calls still work (plain path), with graphs asked for per call as well.
  Tensor a = host_f32({2, 4}, 1.0f), b = host_f32({2, 4}, 0.0f);
  RunOptions ro;
  ro.use_graph = GraphUse::kOn;
  for (int i = 0; i < 3; ++i) {
    auto out = m.execute("forward", {a, b}, ro);
    CHECK(out[0].data_ptr<float>()[1] == 2.0f * kW[1] + 1.0f);
  }
  st = m.graph_status("forward");
  CHECK(st.replays == 0);
  CHECK(st.captures == 0);
  CHECK(st.graphs == 0);
  CHECK(expect_error([&] { (void)m.graph_status("nope"); }).code() == ErrorCode::kNotFound);
}

TEST_CASE("module io: graph options are validated; off by default") {
  AffineProgram prog;
  LoadOptions o = cpu_options();
  o.cuda_graph_methods = {"missing"};
  Error e = expect_error([&] { Module m(prog.pte, o); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(contains(e.what(), "'missing'"));
  o.cuda_graph_methods.clear();
  o.max_graphs_per_method = 0;
  CHECK(expect_error([&] { Module m(prog.pte, o); }).code() == ErrorCode::kInvalidArgument);

  Module plain(prog.pte, cpu_options());
  GraphStatus st = plain.graph_status("forward");
  CHECK_FALSE(st.requested);
  CHECK(st.available);
  CHECK(st.reason.empty());
  o.max_graphs_per_method = 2;
  o.cuda_graph_methods = {"forward"};
  Module listed(prog.pte, o);
  CHECK(listed.graph_status("forward").requested);
}
