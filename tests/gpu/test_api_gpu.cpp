// GPU cases of the user-facing API: per-call profiling with
// CUDA events, method names and dynamic dimensions from real libraries, the
// default method, and .npy round trips of real outputs.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/library_check.hpp"
#include "support/gpu.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Module;
using aoti_cuda::Tensor;

namespace {

std::string fx(const std::string& name) {
  return std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + name + ".pte";
}

Tensor read_input(const std::string& name, const std::string& file, const aoti_cuda::TensorSpec& spec) {
  std::ifstream f(std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Tensor t = Tensor::empty(spec.sizes, spec.dtype);
  REQUIRE(bytes.size() == t.nbytes());
  std::copy(bytes.begin(), bytes.end(), static_cast<char*>(t.data()));
  return t;
}

}  // namespace

TEST_CASE("gpu: RunOptions::profile gives GPU and host time per step" * AOTI_CUDA_GPU_CASE) {
  Module m(fx("mlp"));
  const Tensor x = read_input("mlp", "forward.in0.bin", m.method_meta("forward").inputs[0]);
  (void)m.forward({x});  // first call loads the kernels
  aoti_cuda::RunProfile prof;
  aoti_cuda::RunOptions ro;
  ro.profile = &prof;
  ro.outputs = aoti_cuda::OutputLocation::kHost;
  const auto out = m.forward({x}, ro);
  REQUIRE(out.size() == 1);
  REQUIRE(prof.steps.size() == 4);  // one host input: staged on its own, no "upload host inputs" step
  CHECK(prof.steps[1].what == "run: delegate 0 (forward)");
  for (const auto& s : prof.steps) {
    CAPTURE(s.what);
    CHECK(s.gpu_ms >= 0);
    CHECK(s.host_ms >= 0);
  }
  CHECK(prof.steps[1].gpu_ms > 0);  // the model's kernels ran there
  CHECK(prof.gpu_ms >= prof.steps[1].gpu_ms);
  std::printf("mlp profile: total GPU %.4f ms, host %.4f ms;", prof.gpu_ms, prof.host_ms);
  for (const auto& s : prof.steps) std::printf(" [%s: gpu %.4f host %.4f]", s.what.c_str(), s.gpu_ms, s.host_ms);
  std::printf("\n");
  // On a caller stream the profiled call still returns with the events done.
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  ro.stream = s;
  ro.outputs = aoti_cuda::OutputLocation::kDevice;
  {
    const auto dev_out = m.forward({x.to_device()}, ro);
    REQUIRE(prof.steps.size() == 4);  // device inputs: nothing to upload
    CHECK(prof.steps[1].gpu_ms > 0);
  }
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}

TEST_CASE("gpu: two host inputs go up in one copy, profiled as one step; results equal device inputs'" *
          AOTI_CUDA_GPU_CASE) {
  Module m(fx("add"));
  const aoti_cuda::MethodMeta meta = m.method_meta("forward");
  REQUIRE(meta.inputs.size() == 2);
  const Tensor a = read_input("add", "forward.in0.bin", meta.inputs[0]);
  const Tensor b = read_input("add", "forward.in1.bin", meta.inputs[1]);
  aoti_cuda::RunOptions ro;
  ro.outputs = aoti_cuda::OutputLocation::kHost;
  const Tensor want = m.forward({a.to_device(), b.to_device()}, ro)[0];
  aoti_cuda::RunProfile prof;
  ro.profile = &prof;
  for (int i = 0; i < 3; ++i) {  // the same staging buffer and block size call after call
    const Tensor got = m.forward({a, b}, ro)[0];
    REQUIRE(got.nbytes() == want.nbytes());
    CHECK(std::memcmp(got.data(), want.data(), want.nbytes()) == 0);
  }
  REQUIRE(prof.steps.size() == 5);
  CHECK(prof.steps[0].what == "upload host inputs");
  CHECK(prof.steps[2].what == "run: delegate 0 (forward)");
}

TEST_CASE("gpu: MethodMeta names and dynamic dimensions from real libraries; default method" * AOTI_CUDA_GPU_CASE) {
  Module dyn(fx("dynamic_mlp"));
  const aoti_cuda::MethodMeta meta = dyn.method_meta("forward");
  REQUIRE(meta.input_names.size() == 1);
  CHECK_FALSE(meta.input_names[0].empty());
  REQUIRE(meta.output_names.size() == 1);
  std::printf("dynamic_mlp input '%s', output '%s'\n", meta.input_names[0].c_str(), meta.output_names[0].c_str());
  REQUIRE(meta.dynamic_dims.size() == 1);
  REQUIRE(meta.dynamic_dims[0].size() == 1);  // the batch only; the feature dimension is fixed
  CHECK(meta.dynamic_dims[0][0].dim == 0);
  CHECK(meta.dynamic_dims[0][0].max == meta.inputs[0].sizes[0]);
  Module encdec(fx("encdec"));
  CHECK(encdec.default_method() == encdec.method_names().front());  // no "forward": the first method
  CHECK(dyn.default_method() == "forward");
}

TEST_CASE("gpu: outputs saved as .npy load back identical; check_library passes on this machine" * AOTI_CUDA_GPU_CASE) {
  Module m(fx("mlp"));
  const Tensor x = read_input("mlp", "forward.in0.bin", m.method_meta("forward").inputs[0]);
  aoti_cuda::RunOptions ro;
  ro.outputs = aoti_cuda::OutputLocation::kDevice;
  const auto y = m.forward({x.to_device()}, ro);
  const aoti_cuda_test::TempDir dir;  // not the build folder: the suite may run from a copy on another machine
  const std::string path = dir.path + "/gpu_out.npy";
  aoti_cuda::save_npy(y[0], path);  // a device tensor: copied to the host first
  const Tensor back = aoti_cuda::load_npy(path);
  const Tensor host = y[0].to_host();
  REQUIRE(back.nbytes() == host.nbytes());
  CHECK(std::equal(back.data_ptr<float>(), back.data_ptr<float>() + back.numel(), host.data_ptr<float>()));

  const aoti_cuda::DelegateSpec& d = m.program().method("forward").delegates.at(0);
  cudaDeviceProp p{};
  REQUIRE(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
  aoti_cuda::LibraryCheckOptions o;
  o.gpu_sms = {p.major * 10 + p.minor};
  o.has_weights = true;
  o.weights = d.weights;
  const aoti_cuda::LibraryReport r = aoti_cuda::check_library(d.so, o);
  CHECK_MESSAGE(r.runnable(), r.failures());
}

TEST_CASE("gpu: RunOptions::profile_kernels names every kernel a call launches, also under graphs" * AOTI_CUDA_GPU_CASE) {
  aoti_cuda::LoadOptions lo;
  lo.cuda_graph_methods = {"forward"};
  Module m(fx("mlp_int4"), lo);
  const Tensor x = read_input("mlp_int4", "forward.in0.bin", m.method_meta("forward").inputs[0]).to_device();
  for (int i = 0; i < 3; ++i) (void)m.forward({x});  // kernels loaded, graph captured and replayed
  const std::size_t replays = m.graph_status("forward").replays;
  CHECK(replays >= 1);
  aoti_cuda::RunProfile prof;
  aoti_cuda::RunOptions ro;
  ro.profile = &prof;
  ro.profile_kernels = true;
  const std::vector<Tensor> out = m.forward({x}, ro);
  CHECK(m.graph_status("forward").replays == replays);  // per-kernel times need the plain path
  REQUIRE_FALSE(prof.kernels.empty());
  double sum = 0;
  bool int4 = false, triton = false;
  for (const aoti_cuda::KernelProfile& k : prof.kernels) {
    CAPTURE(k.name);
    CHECK(k.launches >= 1);
    CHECK(k.gpu_ms > 0);
    CHECK(k.name.rfind("kernel 0x", 0) != 0);  // the driver named it
    int4 = int4 || k.name == "aoti_cuda _weight_int4pack_mm";
    triton = triton || k.name.rfind("triton_", 0) == 0;
    sum += k.gpu_ms;
    std::printf("mlp_int4 kernel %-50s %d x %.4f ms\n", k.name.c_str(), k.launches, k.gpu_ms);
  }
  CHECK(int4);    // the SDK's own kernel
  CHECK(triton);  // the model library's kernels, through the cuLaunchKernel pass-through
  for (std::size_t i = 1; i < prof.kernels.size(); ++i) CHECK(prof.kernels[i - 1].gpu_ms >= prof.kernels[i].gpu_ms);
  CHECK(sum <= prof.gpu_ms * 1.05 + 0.01);  // kernels run inside the call's GPU time
  // The same outputs as an unprofiled call (graph replay), and nothing timed afterwards.
  const std::vector<Tensor> again = m.forward({x});
  const Tensor a = again.at(0).to_host(), b = out.at(0).to_host();
  REQUIRE(a.nbytes() == b.nbytes());
  CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
  aoti_cuda::RunProfile plain_prof;
  ro.profile = &plain_prof;
  ro.profile_kernels = false;
  (void)m.forward({x}, ro);
  CHECK(plain_prof.kernels.empty());
}

TEST_CASE("gpu: blocks a model frees stay with the call slot: reused on its next call, also on another stream" *
          AOTI_CUDA_GPU_CASE) {
  const aoti_cuda::MemoryStats start = aoti_cuda::device_memory_stats(0);
  std::vector<char> first;
  {
    Module m(fx("block"));
    const Tensor x = read_input("block", "forward.in0.bin", m.method_meta("forward").inputs[0]).to_device();
    aoti_cuda::RunOptions ro;
    ro.outputs = aoti_cuda::OutputLocation::kHost;
    const Tensor y0 = m.forward({x}, ro)[0];
    first.assign(static_cast<const char*>(y0.data()), static_cast<const char*>(y0.data()) + y0.nbytes());
    const aoti_cuda::MemoryStats after_one = aoti_cuda::device_memory_stats(0);
    CHECK(after_one.cached_bytes > start.cached_bytes);  // the intermediates were kept, not freed
    const Tensor y1 = m.forward({x}, ro)[0];
    const aoti_cuda::MemoryStats after_two = aoti_cuda::device_memory_stats(0);
    CHECK(after_two.cache_hits > after_one.cache_hits);
    CHECK(after_two.cached_bytes == after_one.cached_bytes);  // the same blocks, handed out and kept again
    CHECK(std::memcmp(y1.data(), first.data(), first.size()) == 0);
    // Calls on callers' streams: the kept blocks follow the slot to each new
    // stream after the previous call's end; the first stream is destroyed
    // while blocks it used are still kept.
    for (int round = 0; round < 2; ++round) {
      cudaStream_t s = nullptr;
      REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
      ro.stream = s;
      ro.outputs = aoti_cuda::OutputLocation::kDevice;
      const std::size_t hits = aoti_cuda::device_memory_stats(0).cache_hits;
      {
        const Tensor yd = m.forward({x}, ro)[0];  // freed on `s`: released before it
        const Tensor yh = yd.to(aoti_cuda::Device::cpu(), s);
        REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
        CHECK(aoti_cuda::device_memory_stats(0).cache_hits > hits);
        CHECK(std::memcmp(yh.data(), first.data(), first.size()) == 0);
      }
      REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
    }
    ro.stream = nullptr;
    ro.outputs = aoti_cuda::OutputLocation::kHost;
    const Tensor y2 = m.forward({x}, ro)[0];  // back on the slot's own stream
    CHECK(std::memcmp(y2.data(), first.data(), first.size()) == 0);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const aoti_cuda::MemoryStats end = aoti_cuda::device_memory_stats(0);
  CHECK(end.cached_bytes == start.cached_bytes);  // returned to the pool with the Module
  CHECK(end.bytes_in_use == start.bytes_in_use);
  CHECK(cudaGetLastError() == cudaSuccess);
}
