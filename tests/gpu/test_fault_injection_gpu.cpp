// Fault injection on a real program: for every n, the n-th CUDA
// call or allocation of a whole load and of a whole run of the mlp fixture
// fails (aoti_cuda::testing::FaultInjector). Each must throw kOutOfMemory (the
// injected cudaErrorMemoryAllocation), leave no handle, fd, mapping or shim
// device memory behind, and the Module must still produce the reference
// output (or, for a failed load, nothing is left).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/shim.h"
#include "common/fault_injection.hpp"
#include "support/gpu.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::Module;
using aoti_cuda::Tensor;
using aoti_cuda::testing::FaultInjector;
using aoti_cuda::testing::FaultKind;
using aoti_cuda::testing::kAllFaultKinds;
using aoti_cuda::testing::ScopedFault;

namespace {

const std::string kDir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/mlp";

Tensor read_f32(const std::string& file, std::vector<int64_t> shape) {
  const aoti_cuda_test::Bytes raw = aoti_cuda_test::read_file(kDir + "/" + file);
  Tensor t = Tensor::empty(std::move(shape), DType::kFloat32);
  REQUIRE(raw.size() == t.nbytes());
  std::memcpy(t.data(), raw.data(), raw.size());
  return t;
}

// Runs forward and compares with the reference output (atol/rtol 1e-3).
void run_and_check(Module& m, const Tensor& x, const Tensor& want) {
  auto out = m.forward({x});
  REQUIRE(out.size() == 1);
  const Tensor got = out[0].to_host();
  REQUIRE(got.numel() == want.numel());
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data_ptr<float>()[i], w = want.data_ptr<float>()[i];
    bad += std::fabs(g - w) > 1e-3f + 1e-3f * std::fabs(w);
  }
  CHECK(bad == 0);
}

struct Resources {
  int fds = aoti_cuda_test::count_fds();
  int maps = aoti_cuda_test::count_memfd_maps();
  int64_t handles = aoti_cuda_shim_live_handles();
  std::size_t device_bytes = aoti_cuda::device_memory_stats(0).bytes_in_use;
};

void check_same(const Resources& before, std::uint64_t n) {
  const Resources now;
  CAPTURE(n);
  CHECK(now.fds == before.fds);
  CHECK(now.maps == before.maps);
  CHECK(now.handles == before.handles);
  CHECK(now.device_bytes == before.device_bytes);
}

// Runs fn with the n-th event failing: it throws the code matching the
// injected failure (kOutOfMemory for allocations and CUDA calls, kIo / kLoad
// for the loader's system calls) or succeeds through a fallback.
bool fails_cleanly(std::uint64_t n, const std::function<void()>& fn) {
  ScopedFault fault(kAllFaultKinds, n);
  try {
    fn();
  } catch (const Error& e) {
    CAPTURE(n);
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(FaultInjector::fired());
    if (FaultInjector::fired_kind() == FaultKind::kLoaderCall) {
      CHECK((e.code() == ErrorCode::kIo || e.code() == ErrorCode::kLoad));
    } else {
      CHECK(e.code() == ErrorCode::kOutOfMemory);
    }
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("gpu fault injection: every CUDA call and allocation of a load and a run of mlp fails cleanly" *
          AOTI_CUDA_GPU_CASE) {
  const Tensor x = read_f32("forward.in0.bin", {8, 64}), want = read_f32("forward.out0.bin", {8, 10});
  const std::string pte = kDir + "/mlp.pte";
  { Module warm(pte); }
  std::uint64_t load_events = 0, run_events = 0;
  {
    ScopedFault count(kAllFaultKinds, 0);
    Module m(pte);
    load_events = FaultInjector::events();
  }
  Module m(pte);
  run_and_check(m, x, want);
  {
    ScopedFault count(kAllFaultKinds, 0);
    run_and_check(m, x, want);
    run_events = FaultInjector::events();
  }
  REQUIRE(load_events > 0);
  REQUIRE(run_events > 0);
  const Resources before;
  std::uint64_t load_threw = 0, run_threw = 0;
  for (std::uint64_t n = 1; n <= load_events; ++n) {
    load_threw += fails_cleanly(n, [&] { Module failed(pte); });
    check_same(before, n);
  }
  for (std::uint64_t n = 1; n <= run_events; ++n) {
    run_threw += fails_cleanly(n, [&] { run_and_check(m, x, want); });
    (void)cudaDeviceSynchronize();
    check_same(before, n);
    run_and_check(m, x, want);
  }
  std::printf("fault injection (mlp): load %llu faults (%llu threw, the rest had a fallback), run %llu faults "
              "(%llu threw); codes, leaks and the Module's results checked after each (see the test result)\n",
              static_cast<unsigned long long>(load_events), static_cast<unsigned long long>(load_threw),
              static_cast<unsigned long long>(run_events), static_cast<unsigned long long>(run_threw));
}
