// Host-side weights blob handling. See weights_io.hpp.
#include "runtime/weights_io.hpp"

#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/cuda.hpp"
#include "common/env.hpp"

namespace aoti_cuda::runtime {
namespace {

std::uintptr_t page_size() {
  static const std::uintptr_t size = [] {
    const long s = ::sysconf(_SC_PAGESIZE);
    return static_cast<std::uintptr_t>(s > 0 ? s : 4096);
  }();
  return size;
}

// [first whole page, end of last whole page) inside bytes, or empty.
std::pair<std::uintptr_t, std::uintptr_t> inner_pages(ByteView bytes) {
  const std::uintptr_t p = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data);
  const std::uintptr_t first = (begin + p - 1) / p * p;
  const std::uintptr_t last = (begin + bytes.size) / p * p;
  return first < last ? std::make_pair(first, last) : std::make_pair(std::uintptr_t{0}, std::uintptr_t{0});
}

}  // namespace

bool trace_weights() noexcept { return env_flag("AOTI_CUDA_TRACE_WEIGHTS"); }

bool bytes_equal(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  constexpr std::size_t kParallelFrom = std::size_t{64} << 20;
  if (a == b || n == 0) return true;
  if (n < kParallelFrom) return std::memcmp(a, b, n) == 0;
  // Large ranges are mostly page faults (cold or released pages): spread them.
  const std::size_t threads = std::min<std::size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
  const std::size_t chunk = (n + threads - 1) / threads;
  std::atomic<bool> equal{true};
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t off = t * chunk;
    if (off >= n) break;
    const std::size_t len = std::min(chunk, n - off);
    pool.emplace_back([&, off, len] {
      // 16 MiB steps so that a difference found by one thread stops the others early.
      for (std::size_t k = 0; k < len && equal.load(std::memory_order_relaxed); k += std::size_t{16} << 20) {
        const std::size_t step = std::min(len - k, std::size_t{16} << 20);
        if (std::memcmp(a + off + k, b + off + k, step) != 0) equal = false;
      }
    });
  }
  for (auto& th : pool) th.join();
  return equal;
}

bool is_read_only_file_mapping(ByteView bytes) {
  if (bytes.data == nullptr || bytes.size == 0) return false;
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data);
  const std::uintptr_t end = begin + bytes.size;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset dev inode path"
    std::istringstream in(line);
    std::string range, perms, offset, dev;
    unsigned long long inode = 0;
    if (!(in >> range >> perms >> offset >> dev >> inode)) continue;
    const std::size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    const auto lo = static_cast<std::uintptr_t>(std::stoull(range.substr(0, dash), nullptr, 16));
    const auto hi = static_cast<std::uintptr_t>(std::stoull(range.substr(dash + 1), nullptr, 16));
    if (begin < lo || begin >= hi) continue;
    // The whole range in this one mapping, which must be a never-writable private file mapping.
    return end <= hi && perms.size() >= 4 && perms[1] == '-' && perms[3] == 'p' && inode != 0;
  }
  return false;
}

void prefetch_pages(ByteView bytes) noexcept {
  const std::uintptr_t p = page_size();
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data) / p * p;
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(bytes.data) + bytes.size;
  if (bytes.size == 0) return;
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

void release_pages(ByteView bytes) noexcept {
  const auto [first, last] = inner_pages(bytes);
  if (first == last) return;
  (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void release_blob_pages(ByteView bytes) {
  constexpr std::size_t kReleaseFrom = std::size_t{1} << 20;
  if (bytes.size >= kReleaseFrom && is_read_only_file_mapping(bytes)) release_pages(bytes);
}

PageLock::PageLock(ByteView bytes, int device) : device_(device) {
  if (bytes.size == 0 || device < 0) return;
  const std::uintptr_t p = page_size();
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(bytes.data) / p * p;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(bytes.data) + bytes.size + p - 1) / p * p;
  base_ = reinterpret_cast<void*>(begin);
  common::DeviceGuard guard(device, common::DeviceGuard::OnFailure::kIgnore);
  // The mapping is PROT_READ: without the read-only flag the driver would ask for writable pages.
  cudaError_t err = cudaHostRegister(base_, end - begin, cudaHostRegisterReadOnly);
  if (err != cudaSuccess && err != cudaErrorHostMemoryAlreadyRegistered) {
    (void)cudaGetLastError();
    const cudaError_t plain = cudaHostRegister(base_, end - begin, cudaHostRegisterDefault);
    if (plain == cudaSuccess || plain == cudaErrorHostMemoryAlreadyRegistered) err = plain;
  }
  if (err == cudaSuccess) {
    locked_ = registered_here_ = true;
  } else if (err == cudaErrorHostMemoryAlreadyRegistered) {
    locked_ = true;  // the caller's memory is page-locked already: leave it so
    (void)cudaGetLastError();
  } else {
    reason_ = std::string("cudaHostRegister refused: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    (void)cudaGetLastError();
  }
}

PageLock::~PageLock() {
  if (!registered_here_) return;
  common::DeviceGuard guard(device_, common::DeviceGuard::OnFailure::kIgnore);
  (void)cudaHostUnregister(base_);
  (void)cudaGetLastError();
}

}  // namespace aoti_cuda::runtime
