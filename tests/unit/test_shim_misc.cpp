// Shim C ABI: grad mode, warn/check, inf/nan check, printing, proxy executor,
// CUDA guards/streams/allocator failing cleanly without a GPU, memory API.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/memory.hpp"
#include "aoti_cuda/shim.h"
#include "support/gpu.hpp"
#include "shim/allocator.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::iota_f32;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;

TEST_CASE("shim grad mode: per thread, off by default") {
  CHECK_FALSE(aoti_torch_grad_mode_is_enabled());
  aoti_torch_grad_mode_set_enabled(true);
  CHECK(aoti_torch_grad_mode_is_enabled());
  bool other_thread = true;
  std::thread([&] { other_thread = aoti_torch_grad_mode_is_enabled(); }).join();
  CHECK_FALSE(other_thread);
  aoti_torch_grad_mode_set_enabled(false);
  CHECK_FALSE(aoti_torch_grad_mode_is_enabled());
}

namespace {
// Runs fn with stderr redirected to a temporary file and returns what it wrote.
template <class Fn>
std::string capture_stderr(Fn&& fn) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  int saved = dup(2);
  REQUIRE(saved >= 0);
  REQUIRE(dup2(fileno(tmp), 2) >= 0);
  fn();
  std::fflush(stderr);
  REQUIRE(dup2(saved, 2) >= 0);
  close(saved);
  std::rewind(tmp);
  std::string out;
  char buf[512];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), tmp)) > 0) out.append(buf, n);
  std::fclose(tmp);
  return out;
}
}  // namespace

TEST_CASE("shim warn: printed to stderr unless AOTI_CUDA_QUIET is set to anything but 0") {
  unsetenv("AOTI_CUDA_QUIET");
  std::string printed = capture_stderr([] { aoti_torch_warn("fn", "file.cpp", 42, "something odd"); });
  CHECK(printed.find("warning: something odd (fn at file.cpp:42)") != std::string::npos);
  setenv("AOTI_CUDA_QUIET", "1", 1);
  std::string quiet = capture_stderr([] { aoti_torch_warn("fn", "file.cpp", 43, "hidden"); });
  CHECK(quiet.empty());
  setenv("AOTI_CUDA_QUIET", "0", 1);  // "0" means off, as for every AOTI_CUDA_* switch
  std::string loud = capture_stderr([] { aoti_torch_warn("fn", "file.cpp", 44, "shown"); });
  CHECK(loud.find("warning: shown") != std::string::npos);
  unsetenv("AOTI_CUDA_QUIET");
  std::string nulls = capture_stderr([] { aoti_torch_warn(nullptr, nullptr, 0, nullptr); });  // tolerated
  CHECK(nulls.find("warning") != std::string::npos);
}

TEST_CASE("shim print_tensor_handle prints metadata and values") {
  OwnedTensor t = iota_f32({2, 3});
  std::string printed = capture_stderr([&] { aoti_torch_print_tensor_handle(t.get(), "t"); });
  CHECK(printed.find("t: cpu float32 [2, 3] strides [3, 1] offset 0 values [0, 1, 2, 3, 4, 5]") != std::string::npos);
}

TEST_CASE("shim check: true is a no-op, false records and throws std::runtime_error") {
  aoti_cuda_shim_clear_error();
  CHECK_NOTHROW(aoti_torch_check(true, "f", "x.cpp", 1, "fine"));
  CHECK(std::string(aoti_cuda_shim_last_error()).empty());
  bool threw = false;
  try {
    aoti_torch_check(false, "run_impl", "model.cpp", 7, "shape mismatch");
  } catch (const std::runtime_error& e) {
    threw = true;
    CHECK(std::string(e.what()).find("shape mismatch") != std::string::npos);
  }
  CHECK(threw);
  CHECK(last_error_contains("aoti_torch_check: check failed: shape mismatch (run_impl at model.cpp:7)"));
}

TEST_CASE("shim check_inf_and_nan") {
  OwnedTensor ok = iota_f32({4});
  CHECK(aoti_torch_check_inf_and_nan("ok", ok.get()) == AOTI_TORCH_SUCCESS);
  OwnedTensor nan = iota_f32({4});
  nan.data_as<float>()[2] = std::nanf("");
  CHECK(aoti_torch_check_inf_and_nan("buf3", nan.get()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("At least one NaN in buf3"));
  OwnedTensor inf = empty({2}, {}, 15);  // bfloat16
  inf.data_as<uint16_t>()[0] = 0x3f80;
  inf.data_as<uint16_t>()[1] = 0xff80;  // -inf
  CHECK(aoti_torch_check_inf_and_nan("bf", inf.get()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("At least one INF in bf"));
  // Only the view's elements count: a NaN outside a strided view is ignored.
  int64_t sizes[] = {2};
  int64_t strides[] = {2};
  OwnedTensor every_other;
  REQUIRE(aoti_torch__reinterpret_tensor(nan.get(), 1, sizes, strides, 0, every_other.out()) == 0);
  CHECK(aoti_torch_check_inf_and_nan("view", every_other.get()) == AOTI_TORCH_FAILURE);  // index 2 is in the view
  OwnedTensor odd;
  REQUIRE(aoti_torch__reinterpret_tensor(nan.get(), 1, sizes, strides, 1, odd.out()) == 0);
  CHECK(aoti_torch_check_inf_and_nan("odd", odd.get()) == AOTI_TORCH_SUCCESS);
  OwnedTensor ints = empty({3}, {}, 3);
  CHECK(aoti_torch_check_inf_and_nan("ints", ints.get()) == AOTI_TORCH_SUCCESS);
  CHECK(aoti_torch_check_inf_and_nan("null", nullptr) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim print_tensor_handle never throws") {
  OwnedTensor t = iota_f32({2, 3});
  aoti_torch_print_tensor_handle(t.get(), "t");
  aoti_torch_print_tensor_handle(nullptr, nullptr);
  OwnedTensor undefined;
  REQUIRE(aoti_torch_new_uninitialized_tensor(undefined.out()) == 0);
  aoti_torch_print_tensor_handle(undefined.get(), "undefined");
  CHECK(true);
}

TEST_CASE("shim proxy executor: always fails, naming the extern node") {
  CHECK(aoti_torch_proxy_executor_call_function(nullptr, 3, 0, nullptr, 0, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("extern node 3"));
  CHECK(last_error_contains("without a C shim"));
  CHECK(last_error_contains("unsupported"));
}

TEST_CASE("shim errors are per thread") {
  aoti_cuda_shim_clear_error();
  std::thread([] {
    int64_t v = 0;
    CHECK(aoti_torch_get_dim(nullptr, &v) == AOTI_TORCH_FAILURE);
    CHECK(last_error_contains("aoti_torch_get_dim"));
  }).join();
  CHECK(std::string(aoti_cuda_shim_last_error()).empty());
}

TEST_CASE("shim current stream table: per thread and per device, legacy stream by default") {
  void* prev = reinterpret_cast<void*>(0x1);
  auto* fake = reinterpret_cast<void*>(0x1234);
  REQUIRE(aoti_cuda_shim_set_current_stream(2, fake, &prev) == 0);
  CHECK(prev == nullptr);
  void* seen = reinterpret_cast<void*>(0x1);
  REQUIRE(aoti_torch_get_current_cuda_stream(0, &seen) == 0);
  CHECK(seen == nullptr);  // other devices unaffected
  void* seen_elsewhere = reinterpret_cast<void*>(0x1);
  std::thread([&] { CHECK(aoti_torch_get_current_cuda_stream(2, &seen_elsewhere) == 0); }).join();
  CHECK(seen_elsewhere == nullptr);
  void* stream = nullptr;
  REQUIRE(aoti_torch_get_current_cuda_stream(2, &stream) == 0);
  CHECK(stream == fake);
  REQUIRE(aoti_cuda_shim_set_current_stream(2, nullptr, &prev) == 0);
  CHECK(prev == fake);
  CHECK(aoti_cuda_shim_set_current_stream(64, fake, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("out of range"));
  CHECK(aoti_torch_get_current_cuda_stream(-2, &stream) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_get_current_cuda_stream(0, nullptr) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim guards and raw allocator fail cleanly without a GPU" *
          doctest::skip(aoti_cuda_test::gpu_available())) {
  CUDAGuardHandle guard = reinterpret_cast<CUDAGuardHandle>(0x1);
  CHECK(aoti_torch_create_cuda_guard(0, &guard) == AOTI_TORCH_FAILURE);
  CHECK(guard == nullptr);
  CHECK(last_error_contains("cuda"));
  CUDAStreamGuardHandle sguard = reinterpret_cast<CUDAStreamGuardHandle>(0x1);
  CHECK(aoti_torch_create_cuda_stream_guard(nullptr, 0, &sguard) == AOTI_TORCH_FAILURE);
  CHECK(sguard == nullptr);
  CHECK(last_error_contains("failed: cudaError"));
  void* stream = reinterpret_cast<void*>(0x1);
  CHECK(aoti_torch_get_current_cuda_stream(-1, &stream) == AOTI_TORCH_FAILURE);  // needs cudaGetDevice
  void* ptr = reinterpret_cast<void*>(0x1);
  CHECK(aoti_torch_cuda_caching_allocator_raw_alloc(1024, &ptr) == AOTI_TORCH_FAILURE);
  CHECK(ptr == nullptr);
  CHECK(aoti_torch_cuda_caching_allocator_raw_delete(nullptr) == AOTI_TORCH_SUCCESS);
  int dummy = 0;
  CHECK(aoti_torch_cuda_caching_allocator_raw_delete(&dummy) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("was not returned by aoti_torch_cuda_caching_allocator_raw_alloc"));
  // memory API: stats of an unused device are zeros; trim reports the CUDA failure as aoti_cuda::Error.
  aoti_cuda::MemoryStats stats = aoti_cuda::device_memory_stats(0);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.total_allocations == 0);
  CHECK(stats.pool_reserved_bytes == 0);
  aoti_cuda::reset_peak_memory(0);
  try {
    aoti_cuda::trim_device_memory(0);
    FAIL("trim_device_memory should throw without a GPU");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kNoDevice);
    CHECK(std::string(e.what()).find("trim_device_memory") != std::string::npos);
  }
  // A CUDA tensor over foreign memory cannot be copied to without a device: error, not a crash.
  static float fake[4];
  int64_t sizes[] = {4};
  OwnedTensor dev;
  REQUIRE(aoti_torch_create_tensor_from_blob(fake, 1, sizes, nullptr, 0, 6, 1, 0, dev.out()) == 0);
  OwnedTensor host = iota_f32({4});
  CHECK(aoti_torch_copy_(dev.get(), host.get(), 0) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("cuda"));
  float value = 0;
  OwnedTensor one;
  REQUIRE(aoti_torch_create_tensor_from_blob(fake, 0, nullptr, nullptr, 0, 6, 1, 0, one.out()) == 0);
  CHECK(aoti_torch_item_float32(one.get(), &value) == AOTI_TORCH_FAILURE);
  const int64_t live_before = aoti_cuda_shim_live_handles();
  OwnedTensor clone;
  CHECK(aoti_torch_clone(dev.get(), clone.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("CUDA allocation of 16 bytes on cuda:0"));
  CHECK(aoti_torch_clone_preserve_strides(dev.get(), clone.out()) == AOTI_TORCH_FAILURE);
  CHECK(aoti_cuda_shim_live_handles() == live_before);  // nothing half-built left behind
  CHECK(aoti_torch_zero_(dev.get()) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_check_inf_and_nan("dev", dev.get()) == AOTI_TORCH_FAILURE);
  CHECK(fake[0] == 0.0f);  // never touched through the "device" pointer
}

TEST_CASE("memory API validates the device index") {
  aoti_cuda::MemoryStats stats = aoti_cuda::device_memory_stats(-1);
  CHECK(stats.bytes_in_use == 0);
  CHECK_THROWS_AS(aoti_cuda::trim_device_memory(-1), aoti_cuda::Error);
  CHECK_THROWS_AS(aoti_cuda::trim_device_memory(1000), aoti_cuda::Error);
  aoti_cuda::reset_peak_memory(12345);  // ignored
}

TEST_CASE("shim guard functions reject null handles") {
  CHECK(aoti_torch_delete_cuda_guard(nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_cuda_guard_set_index(nullptr, 0) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_delete_cuda_stream_guard(nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_create_cuda_guard(0, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_create_cuda_stream_guard(nullptr, 0, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_cuda_caching_allocator_raw_alloc(16, nullptr) == AOTI_TORCH_FAILURE);
  CUDAGuardHandle guard = nullptr;
  CHECK(aoti_torch_create_cuda_guard(-5, &guard) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("CUDA device index -5 is out of range"));
  CHECK(guard == nullptr);
}

// ---- call block cache (shim/allocator.hpp): the bookkeeping, without a device ----

namespace {
std::vector<std::pair<void*, void*>> g_freed;  // (block, stream) in the order freed
void record_free(void* p, void* stream) { g_freed.emplace_back(p, stream); }
void* fake_block(std::uintptr_t i) { return reinterpret_cast<void*>(i * 0x1000); }
}  // namespace

TEST_CASE("block sizes: 512-byte steps to 1 MiB, then an eighth of a power of two") {
  using aoti_cuda::shim::block_size;
  CHECK(block_size(1) == 512);
  CHECK(block_size(512) == 512);
  CHECK(block_size(1000) == 1024);
  CHECK(block_size(4096) == 4096);
  CHECK(block_size(std::size_t{1} << 20) == std::size_t{1} << 20);
  CHECK(block_size((std::size_t{1} << 20) + 1) == (std::size_t{1} << 20) + (std::size_t{1} << 17));
  CHECK(block_size(std::size_t{3} << 20) == std::size_t{3} << 20);                       // 2 MiB + 4 x 256 KiB
  CHECK(block_size((std::size_t{5} << 20) + 7) == (std::size_t{5} << 20) + (std::size_t{1} << 19));
  for (std::size_t n : {std::size_t{1}, std::size_t{777}, std::size_t{123456}, std::size_t{5000000}, std::size_t{1} << 33}) {
    CHECK(block_size(n) >= n);
    CHECK(block_size(n) <= n + n / 8 + 512);
    CHECK(block_size(block_size(n)) == block_size(n));  // a block's size maps to itself
  }
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 3;
  CHECK(block_size(huge) == huge);  // no wrap-around: the driver refuses it
}

TEST_CASE("block cache: same size back, most recent first; bounded; oldest evicted on the cache's stream") {
  g_freed.clear();
  {
    aoti_cuda::shim::BlockCache cache(8192, record_free);
    CHECK(cache.take(1024) == nullptr);
    CHECK(cache.keep(fake_block(1), 1024));
    CHECK(cache.keep(fake_block(2), 2048));
    CHECK(cache.keep(fake_block(3), 1024));
    CHECK(cache.bytes() == 4096);
    CHECK(cache.take(512) == nullptr);        // no other size is handed out
    CHECK(cache.take(1024) == fake_block(3));  // the most recently freed first
    CHECK(cache.take(1024) == fake_block(1));
    CHECK(cache.take(1024) == nullptr);
    CHECK(cache.bytes() == 2048);
    CHECK_FALSE(cache.keep(fake_block(9), 16384));  // larger than the capacity: the caller frees it
    CHECK(g_freed.empty());
    CHECK(cache.keep(fake_block(4), 4096));  // 6144
    CHECK(cache.keep(fake_block(5), 4096));  // 10240 > 8192: block 2 (oldest) goes
    REQUIRE(g_freed.size() == 1);
    CHECK(g_freed[0].first == fake_block(2));
    CHECK(cache.bytes() == 8192);
    CHECK(cache.size() == 2);
    cache.release_all();
    CHECK(g_freed.size() == 3);
    CHECK(cache.bytes() == 0);
    CHECK(cache.keep(fake_block(6), 512));
  }
  CHECK(g_freed.size() == 4);  // the destructor frees what is left
  CHECK(g_freed.back().first == fake_block(6));
}

TEST_CASE("block cache: capacity 0 keeps nothing; the scope installs and restores") {
  g_freed.clear();
  aoti_cuda::shim::BlockCache off(0, record_free);
  CHECK_FALSE(off.keep(fake_block(1), 512));
  aoti_cuda::shim::BlockCache cache(4096, record_free);
  {
    aoti_cuda::shim::BlockCacheScope scope(&cache, 0, reinterpret_cast<void*>(0x10));
    CHECK(cache.device() == 0);
    CHECK(cache.stream() == reinterpret_cast<void*>(0x10));
    aoti_cuda::shim::BlockCacheScope off_scope(nullptr, 0, nullptr);  // nested: nothing installed, then restored
  }
  CHECK(cache.size() == 0);
  CHECK(g_freed.empty());
}

TEST_CASE("block cache: a call's end frees what earlier calls kept and it did not take back") {
  g_freed.clear();
  aoti_cuda::shim::BlockCache cache(1 << 20, record_free);
  cache.begin_call();  // call 1 frees two blocks
  CHECK(cache.keep(fake_block(1), 1024));
  CHECK(cache.keep(fake_block(2), 2048));
  cache.end_call();
  CHECK(cache.size() == 2);  // both are this call's: kept for the next
  CHECK(g_freed.empty());
  cache.begin_call();  // call 2 (same shapes for the 1 KiB buffer, not for the other)
  void* p = cache.take(1024);
  CHECK(p == fake_block(1));
  CHECK(cache.keep(p, 1024));
  CHECK(cache.keep(fake_block(3), 4096));
  cache.end_call();
  REQUIRE(g_freed.size() == 1);
  CHECK(g_freed[0].first == fake_block(2));  // call 1's, never taken by call 2
  CHECK(cache.size() == 2);
  CHECK(cache.bytes() == 1024 + 4096);
  cache.begin_call();  // call 3 takes nothing: everything goes
  cache.end_call();
  CHECK(cache.size() == 0);
  CHECK(cache.bytes() == 0);
  CHECK(g_freed.size() == 3);
}
