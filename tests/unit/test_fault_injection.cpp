// Fault injection on the CPU: for every n, the n-th allocation of
// a whole load and of a whole run fails (aoti_cuda::testing::FaultInjector);
// the call must throw kOutOfMemory, leave no handle, fd, mapping or heap
// block behind, and the Module must still work (or, for a load, nothing is
// left). LeakSanitizer checks the heap exactly in the ASan stage of
// scripts/test.sh; here the heap is compared with a small tolerance.
#include <doctest/doctest.h>
#include <dirent.h>
#include <malloc.h>

#include <cstdlib>

#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "common/fault_injection.hpp"
#include "support/affine_program.hpp"
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
using aoti_cuda::testing::FaultInjector;
using aoti_cuda::testing::FaultKind;
using aoti_cuda::testing::kAllFaultKinds;
using aoti_cuda::testing::ScopedFault;
using namespace aoti_cuda_test;

namespace {

LoadOptions cpu_options() {
  LoadOptions o;
  o.device = Device::cpu();
  return o;
}

Tensor filled(std::vector<int64_t> shape, float v) {
  Tensor t = Tensor::empty(std::move(shape), DType::kFloat32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_ptr<float>()[i] = v;
  return t;
}

Tensor position(int64_t p) {
  Tensor t = Tensor::empty({1}, DType::kInt64);
  *t.data_ptr<int64_t>() = p;
  return t;
}

// One whole run of both methods, checking the values.
void run_both(Module& m) {
  auto y = m.forward({filled({2, 4}, 1), filled({2, 4}, 1)});
  REQUIRE(y.size() == 2);
  CHECK(y[0].data_ptr<float>()[3] == 5.0f);  // 1 * 4 + 1
  auto s = m.execute("accumulate", {position(1), filled({1, 4}, 2)});
  REQUIRE(s.size() == 1);
  CHECK(s[0].data_ptr<float>()[0] == 2.0f);
}

int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

struct Resources {
  int fds = count_fds();
  int memfd_maps = count_memfd_maps();
  int64_t handles = aoti_cuda_shim_live_handles();
  long long heap = static_cast<long long>(mallinfo2().uordblks + mallinfo2().hblkhd);
};

void check_same(const Resources& before, const char* after_what, std::uint64_t n) {
  const Resources now;
  CAPTURE(after_what);
  CAPTURE(n);
  CHECK(now.fds == before.fds);
  CHECK(now.memfd_maps == before.memfd_maps);
  CHECK(now.handles == before.handles);
}

// Runs fn with the n-th event failing. It must throw the code that matches
// the injected failure — kOutOfMemory for an allocation or CUDA call (which
// fails with cudaErrorMemoryAllocation), kIo or kLoad for a system call of
// the loader — or succeed when the failed call had a fallback (memfd -> temp
// file, pinned -> pageable memory). Returns whether it threw.
template <typename Fn>
bool fails_cleanly(std::uint64_t n, Fn&& fn) {
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
  CHECK(FaultInjector::fired());
  return false;
}

}  // namespace

TEST_CASE("fault injection: the injector counts, fires once, and is off by default") {
  CHECK_FALSE(FaultInjector::should_fail(FaultKind::kHostAlloc));
  {
    ScopedFault f(static_cast<std::uint32_t>(FaultKind::kHostAlloc), 2);
    CHECK_FALSE(FaultInjector::should_fail(FaultKind::kCudaCall));  // not armed for this kind, not counted
    CHECK_FALSE(FaultInjector::should_fail(FaultKind::kHostAlloc));
    CHECK(FaultInjector::should_fail(FaultKind::kHostAlloc));
    CHECK_FALSE(FaultInjector::should_fail(FaultKind::kHostAlloc));
    CHECK(FaultInjector::events() == 3);
    CHECK(FaultInjector::fired());
  }
  CHECK_FALSE(FaultInjector::should_fail(FaultKind::kHostAlloc));
  // A shim allocation made to fail reports out-of-memory through the C ABI.
  ScopedFault f(static_cast<std::uint32_t>(FaultKind::kHostAlloc), 1);
  AtenTensorHandle h = nullptr;
  const int64_t sizes[1] = {4};
  CHECK(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &h) != 0);
  CHECK(h == nullptr);
}

TEST_CASE("fault injection: every allocation and loader call of a whole load fails cleanly and leaves nothing") {
  TempDir dir, tmp;
  const std::string pte = write_affine_kv_program(dir.path, "faults", 2);
  // Temp files of the memfd fallback go here, so the test sees any left over.
  const char* old_tmp = std::getenv("TMPDIR");
  const std::string saved = old_tmp != nullptr ? old_tmp : "";
  setenv("TMPDIR", tmp.path.c_str(), 1);
  { Module warm(pte, cpu_options()); }  // first-use allocations (dl caches, shim state)
  std::uint64_t total = 0;
  {
    ScopedFault count(kAllFaultKinds, 0);
    Module m(pte, cpu_options());
    total = FaultInjector::events();
  }
  REQUIRE(total > 0);
  const Resources before;
  std::uint64_t threw = 0;
  for (std::uint64_t n = 1; n <= total; ++n) {
    threw += fails_cleanly(n, [&] { Module m(pte, cpu_options()); });
    check_same(before, "failed load", n);
    CHECK(count_entries(tmp.path) == 0);
  }
  const Resources after;
  CHECK(after.heap - before.heap < 64 * 1024);
  Module m(pte, cpu_options());
  run_both(m);
  if (old_tmp != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  MESSAGE("faults tried in a load (CPU, 2 methods): ", total, " (allocations and loader calls), ", threw,
          " threw, the rest had a fallback; codes, fds, maps, handles and $TMPDIR checked after each");
}

TEST_CASE("fault injection: every allocation of a whole run fails cleanly and the Module keeps working") {
  TempDir dir;
  Module m(write_affine_kv_program(dir.path, "faults", 2), cpu_options());
  run_both(m);  // warm
  std::uint64_t total = 0;
  {
    ScopedFault count(kAllFaultKinds, 0);
    run_both(m);
    total = FaultInjector::events();
  }
  REQUIRE(total > 0);
  const Resources before;
  std::uint64_t threw = 0;
  for (std::uint64_t n = 1; n <= total; ++n) {
    threw += fails_cleanly(n, [&] { run_both(m); });
    check_same(before, "failed run", n);
    run_both(m);  // still usable, same results
  }
  const Resources after;
  CHECK(after.heap - before.heap < 64 * 1024);
  MESSAGE("faults tried in a run (CPU, 2 methods): ", total, " allocation(s), ", threw,
          " threw; codes, fds, maps, handles and the Module's results checked after each");
}
