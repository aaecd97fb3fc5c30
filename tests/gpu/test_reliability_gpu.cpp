// Reliability on a real program: 1,000 load/run/unload cycles of
// the mlp fixture keep host memory flat. Prints the RSS and heap growth per
// cycle (the figures docs/reliability.md quotes) and, for comparison, the same
// with the fix switched off (AOTI_CUDA_KEEP_EH_POOL=1).
#include <doctest/doctest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/shim.h"
#include "support/gpu.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::DType;
using aoti_cuda::Module;
using aoti_cuda::Tensor;

namespace {

const std::string kMlpDir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/mlp";

long long heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<long long>(mi.uordblks + mi.hblkhd);
}

Tensor mlp_input() {
  const aoti_cuda_test::Bytes raw = aoti_cuda_test::read_file(kMlpDir + "/forward.in0.bin");
  Tensor x = Tensor::empty({8, 64}, DType::kFloat32);
  REQUIRE(raw.size() == x.nbytes());
  std::memcpy(x.data(), raw.data(), raw.size());
  return x;
}

void mlp_cycle(const Tensor& x) {
  Module m(kMlpDir + "/mlp.pte");
  REQUIRE(m.forward({x}).size() == 1);
}

}  // namespace

TEST_CASE("gpu reliability: 1,000 load/run/unload cycles of mlp keep host RSS within 2 MB" * AOTI_CUDA_GPU_CASE) {
  const Tensor x = mlp_input();
  constexpr int kSettle = 10, kCycles = 1000;
  constexpr long long kBound = 2LL << 20;
  long long rss_settled = 0, heap_settled = 0;
  const int fds0 = aoti_cuda_test::count_fds();
  for (int i = 1; i <= kCycles; ++i) {
    mlp_cycle(x);
    if (i == kSettle) {
      rss_settled = aoti_cuda_test::rss_bytes();
      heap_settled = heap_in_use();
    }
    if (i == 1 || i == kSettle || i % 250 == 0) {
      std::printf("mlp cycle %4d: host RSS %lld KiB, heap in use %lld KiB\n", i, aoti_cuda_test::rss_bytes() / 1024,
                  heap_in_use() / 1024);
    }
  }
  const long long rss_growth = aoti_cuda_test::rss_bytes() - rss_settled;
  const long long heap_growth = heap_in_use() - heap_settled;
  std::printf("RSS per cycle (mlp, cycles %d..%d): %lld bytes; heap per cycle: %lld bytes; fds %d -> %d\n", kSettle,
              kCycles, rss_growth / (kCycles - kSettle), heap_growth / (kCycles - kSettle), fds0,
              aoti_cuda_test::count_fds());
  CHECK(rss_growth < kBound);
  CHECK(aoti_cuda_test::count_fds() == fds0);

  // The same with the pool left alone: the leak the loader prevents.
  setenv("AOTI_CUDA_KEEP_EH_POOL", "1", 1);
  const long long rss0 = aoti_cuda_test::rss_bytes(), heap0 = heap_in_use();
  constexpr int kCompare = 100;
  for (int i = 0; i < kCompare; ++i) mlp_cycle(x);
  unsetenv("AOTI_CUDA_KEEP_EH_POOL");
  std::printf("with AOTI_CUDA_KEEP_EH_POOL=1 (no fix), %d cycles: RSS per cycle %lld bytes, heap per cycle %lld bytes\n",
              kCompare, (aoti_cuda_test::rss_bytes() - rss0) / kCompare, (heap_in_use() - heap0) / kCompare);
}
