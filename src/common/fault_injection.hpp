// Private test hook: make the n-th allocation or CUDA call fail, to check that
// every failure path throws the right ErrorCode and leaks nothing.
//
// Compiled into every build and off by default. When off, a site costs one
// relaxed atomic load and a predictable branch; nothing is counted. Tests arm
// it through FaultInjector (they link the library's objects, aoti_cuda_core);
// the product API does not expose it.
//
// Sites (FaultKind):
//   kHostAlloc   shim host memory (CPU tensors the model or the Module creates)
//   kDeviceAlloc shim device memory (cudaMallocAsync) and pinned host memory
//   kCudaCall    CUDA runtime calls made while loading and running a Module
//   kLoaderCall  the system calls of loading a model library (memfd_create,
//                writing the bytes, mkstemp, dlopen)
// A failed kHostAlloc / kDeviceAlloc behaves like an exhausted allocator; a
// failed kCudaCall returns cudaErrorMemoryAllocation without calling CUDA; a
// failed kLoaderCall fails with EIO (dlopen: returns null) without the call.
//
// Thread-safety: arming and the sites may run on any threads; the n-th event
// is counted across all of them (tests arm it around single-threaded calls).
#pragma once

#include <atomic>
#include <cstdint>

namespace aoti_cuda::testing {

enum class FaultKind : std::uint32_t {
  kHostAlloc = 1u << 0,
  kDeviceAlloc = 1u << 1,
  kCudaCall = 1u << 2,
  kLoaderCall = 1u << 3,
};
constexpr std::uint32_t kAllFaultKinds = 0xF;

class FaultInjector {
 public:
  /// Arms the injector: the n-th event (1-based) from now whose kind is in
  /// `kinds` (a mask of FaultKind bits) fails, once; later events succeed.
  /// n == 0 counts events without failing any (to size a sweep).
  static void arm(std::uint32_t kinds, std::uint64_t n) noexcept;
  /// Turns the injector off (the default state).
  static void disarm() noexcept;
  /// Events of the armed kinds seen since arm().
  static std::uint64_t events() noexcept;
  /// True once the armed failure has been injected.
  static bool fired() noexcept;
  /// Kind of the injected failure (meaningful once fired()).
  static FaultKind fired_kind() noexcept;

  /// Called at each site: true when this event must fail.
  static bool should_fail(FaultKind kind) noexcept {
    if (!armed_.load(std::memory_order_relaxed)) return false;
    return hit(kind);
  }

 private:
  static bool hit(FaultKind kind) noexcept;
  static std::atomic<bool> armed_;
};

/// RAII: arms on construction, disarms on destruction.
class ScopedFault {
 public:
  ScopedFault(std::uint32_t kinds, std::uint64_t n) noexcept { FaultInjector::arm(kinds, n); }
  ~ScopedFault() { FaultInjector::disarm(); }
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;
};

}  // namespace aoti_cuda::testing
