// aoti_cuda shim — memory, devices and current streams (private to the shim;
// the Module reaches it only through shim.h and memory.hpp).
//
// Policies (documented here because the Module depends on them):
//   * Current stream: each thread has its own table device -> cudaStream_t.
//     An entry nobody set is nullptr, the LEGACY default stream (not a
//     per-thread stream, and no stream is ever created implicitly). The stream
//     guard the model opens in Run installs the Run's stream, so everything
//     the model allocates during Run is ordered on that stream.
//   * CUDA memory: cudaMallocAsync on the current stream of the target device,
//     from the device's current memory pool (the default pool unless the
//     application replaced it), whose release threshold is set to UINT64_MAX
//     on first use so freed blocks stay cached across Runs. Statistics count
//     an allocation from cudaMallocAsync until its cudaFreeAsync is enqueued.
//     Each Storage remembers its allocation stream and is freed (cudaFreeAsync)
//     on it, so that stream must still exist when the last handle goes — or
//     call set_storage_free_stream() to move the free to another stream first
//     (after ordering the two streams, e.g. with an event: the free is only
//     ordered after work on the stream it is enqueued on).
//   * CUDA graph capture: while a CaptureArena is installed on a thread
//     (CaptureArenaScope), that thread's CUDA allocations on the arena's
//     device come from plain cudaMalloc blocks owned by the arena instead of
//     the pool (cudaMallocAsync would be captured as graph memory nodes whose
//     lifetime the graph, not the tensor, then decides). A block freed while
//     its arena is installed returns to the arena for later allocations of
//     the same capture (safe: a capture is one stream, in order); a block
//     freed afterwards (e.g. a graph output's handle) stays allocated. Every
//     block is released with the arena, after the graphs using it are gone.
//   * Copies involving host memory synchronize the stream before returning,
//     except non_blocking copies whose host side is page-locked memory the
//     shim allocated (empty_strided_pinned); item_* always synchronizes.
//   * Host memory: 64-byte aligned pageable memory. "Pinned" requests use
//     cudaMallocHost and silently fall back to pageable memory when that fails
//     (e.g. no driver): pinning is a performance property, not a semantic one.
//   * Failures throw aoti_cuda::Error (kOutOfMemory, kNoDevice, kCuda) and clear
//     the CUDA runtime's last-error state so a later cudaGetLastError() in the
//     model does not see our failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "common/cuda.hpp"
#include "common/host_memory.hpp"

namespace aoti_cuda {
namespace shim {

/// Device ordinals accepted by the shim are [0, kMaxCudaDevices).
constexpr int kMaxCudaDevices = 64;
using common::kHostAlignment;

/// Resolves a CUDA device index from the C ABI: -1 means the calling thread's
/// current device. Throws invalid_argument for other negatives or >= kMaxCudaDevices.
int resolve_cuda_device(int32_t device_index);

/// The calling thread's current stream for `device` (nullptr = legacy default stream).
void* current_stream(int device);
/// Installs `stream` as the calling thread's current stream for `device`; returns the previous one.
void* exchange_current_stream(int device, void* stream);

/// RAII: makes `device` the calling thread's current CUDA device (only calls
/// cudaSetDevice if it differs) and restores the previous one on destruction.
using DeviceSwitch = common::DeviceGuard;

/// Throws common::cuda_error(cuda_error, what): kNoDevice for no
/// device/driver, kOutOfMemory for allocation failures, else kCuda; resets
/// the runtime's last error. `what` names the operation.
[[noreturn]] void throw_cuda_error(int cuda_error, const std::string& what);

/// Stream-ordered device allocation on `stream` (see policies). nbytes 0 -> nullptr.
void* cuda_allocate(std::size_t nbytes, int device, void* stream);
/// Stream-ordered free; returns the cudaError_t (0 = success) and never throws.
int cuda_free(void* ptr, std::size_t nbytes, int device, void* stream) noexcept;

// Host memory: the low layer's one allocator (common/host_memory.hpp).
using common::host_allocate;
using common::host_free;
using common::pinned_allocate;
using common::pinned_free;

/// RAII: `nbytes` of stream-ordered device scratch (cuda_allocate), freed on the same stream when
/// it goes out of scope, so kernels enqueued before that may still use it.
class StreamScratch {
 public:
  StreamScratch(std::size_t nbytes, int device, void* stream)
      : ptr_(cuda_allocate(nbytes, device, stream)), nbytes_(nbytes), device_(device), stream_(stream) {}
  ~StreamScratch() {
    if (ptr_ != nullptr) (void)cuda_free(ptr_, nbytes_, device_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const noexcept { return ptr_; }

 private:
  void* ptr_;
  std::size_t nbytes_;
  int device_;
  void* stream_;
};

/// Device memory owned by one captured CUDA graph (see policies). Not
/// copyable; thread-compatible (the capturing thread installs it).
class CaptureArena {
 public:
  explicit CaptureArena(int device) : device_(device) {}
  /// Frees every block (the caller has destroyed the graph and its stream is idle).
  ~CaptureArena();
  CaptureArena(const CaptureArena&) = delete;
  CaptureArena& operator=(const CaptureArena&) = delete;

  int device() const noexcept { return device_; }
  /// Bytes of device memory the arena holds.
  std::size_t bytes() const noexcept { return bytes_; }
  /// A block of at least nbytes: a released one of up to twice the size, else
  /// a new cudaMalloc (made with the thread's capture mode relaxed, so it is
  /// legal inside a thread-local capture). Throws like cuda_allocate.
  void* allocate(std::size_t nbytes);

 private:
  friend int cuda_free(void*, std::size_t, int, void*) noexcept;
  struct Block {
    void* ptr;
    std::size_t size;
  };
  int device_;
  std::size_t bytes_ = 0;
  std::vector<Block> blocks_;  ///< every block (owned)
  std::vector<Block> free_;    ///< released during the capture, reusable
};

/// RAII: installs `arena` as the calling thread's capture arena (restores the previous one).
class CaptureArenaScope {
 public:
  explicit CaptureArenaScope(CaptureArena* arena) noexcept;
  ~CaptureArenaScope();
  CaptureArenaScope(const CaptureArenaScope&) = delete;
  CaptureArenaScope& operator=(const CaptureArenaScope&) = delete;

 private:
  CaptureArena* previous_;
};

/// Moves the stream on which the handle's storage will be freed (e.g. before the
/// stream it was allocated on is destroyed; the caller orders the two streams,
/// e.g. with an event). No-op for non-CUDA or borrowed storage.
AOTITorchError set_storage_free_stream(AtenTensorHandle handle, void* stream) noexcept;

}  // namespace shim
}  // namespace aoti_cuda
