#include "common/host_memory.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "aoti_cuda/error.hpp"
#include "common/fault_injection.hpp"

namespace aoti_cuda::common {

void* host_allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  // Requests beyond physical memory cannot be backed; refuse them up front
  // rather than relying on overcommit (or a sanitizer's allocator) to fail.
  static const std::size_t physical = [] {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return std::numeric_limits<std::size_t>::max() / 2;
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size);
  }();
  if (nbytes > physical) {
    throw Error(ErrorCode::kOutOfMemory, "out of memory: requested " + std::to_string(nbytes) +
                                             " bytes on cpu (more than the " + std::to_string(physical) +
                                             " bytes of physical memory)");
  }
  // aligned_alloc requires a size that is a multiple of the alignment.
  std::size_t rounded = (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* ptr = testing::FaultInjector::should_fail(testing::FaultKind::kHostAlloc)
                  ? nullptr
                  : std::aligned_alloc(kHostAlignment, rounded);
  if (ptr == nullptr) {
    throw Error(ErrorCode::kOutOfMemory, "out of memory: requested " + std::to_string(nbytes) + " bytes on cpu");
  }
  return ptr;
}

void host_free(void* ptr) noexcept { std::free(ptr); }

void* pinned_allocate(std::size_t nbytes, bool* pinned) {
  *pinned = false;
  if (nbytes == 0) return nullptr;
  void* ptr = nullptr;
  // A failure here falls back to pageable memory (pinning is a performance property).
  cudaError_t err = testing::FaultInjector::should_fail(testing::FaultKind::kDeviceAlloc)
                        ? cudaErrorMemoryAllocation
                        : cudaMallocHost(&ptr, nbytes);
  if (err == cudaSuccess && ptr != nullptr) {
    *pinned = true;
    return ptr;
  }
  (void)cudaGetLastError();
  return host_allocate(nbytes);
}

void pinned_free(void* ptr) noexcept {
  if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

std::shared_ptr<void> host_shared(std::size_t nbytes) {
  return std::shared_ptr<void>(host_allocate(nbytes == 0 ? 1 : nbytes), [](void* p) { host_free(p); });
}

}  // namespace aoti_cuda::common
