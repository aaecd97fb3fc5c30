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
//   * Call block cache: while a BlockCache is installed on a thread
//     (BlockCacheScope, one per call of a Module's call slot), device blocks
//     that thread frees on the cache's stream are kept by the cache instead of
//     cudaFreeAsync, and allocations of the same block size on that stream
//     take them back (most recently freed first). A block freed on a stream
//     may be reused by later work on that stream without synchronizing: the
//     stream orders them, as cudaFreeAsync would. This removes the
//     cudaMallocAsync/cudaFreeAsync pair (host time: docs/design-measurements.md)
//     of every intermediate a model makes in a steady state.
//     Every device allocation is rounded up to block_size(nbytes), cached or
//     not, so a block's size is known again when it is freed. At the end of a
//     call, blocks kept by an earlier call that this call did not take back
//     are freed: the cache holds at most what the last call freed (other input
//     shapes leave nothing behind), and never more than its capacity.
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

/// Multiprocessor count of `device` (0 <= device < kMaxCudaDevices), queried once per device;
/// operator kernels size their grids by it. Throws the CUDA error when it cannot be queried.
int multiprocessor_count(int device);

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

/// The size of the device block the shim allocates for a request of `nbytes`:
/// a multiple of 512 bytes up to 1 MiB, above that a multiple of an eighth of
/// the largest power of two not above nbytes (at most 12.5 % more), so that
/// nearby sizes (dynamic shapes) share cached blocks.
std::size_t block_size(std::size_t nbytes) noexcept;

/// Device blocks kept between the calls of one call slot (see policies).
/// Thread-compatible: used by one call at a time (the slot's lease), through
/// BlockCacheScope on the calling thread.
class BlockCache {
 public:
  struct Block {
    void* ptr;
    std::size_t size;
    uint64_t call;  ///< the call that kept it
  };
  /// Frees one block on a stream (tests replace cudaFreeAsync).
  using FreeFn = void (*)(void* ptr, void* stream);
  /// The default capacity (TuningOptions::block_cache_mib's default, 1 GiB).
  static constexpr std::size_t kDefaultCapacity = std::size_t{1024} << 20;
  /// `capacity_bytes` bounds the bytes kept (oldest blocks are freed first;
  /// 0: nothing is kept). A Module's call slots take
  /// TuningOptions::block_cache_mib.
  explicit BlockCache(std::size_t capacity_bytes = kDefaultCapacity, FreeFn free_fn = nullptr);
  /// Frees every block: waits for the last call's work first (its stream may be gone).
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  int device() const noexcept { return device_; }
  void* stream() const noexcept { return stream_; }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return blocks_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }

  /// A kept block of exactly `size` bytes (the most recently kept), or nullptr.
  void* take(std::size_t size) noexcept;
  /// Keeps a block freed on the cache's stream, first freeing the oldest
  /// blocks as needed to stay within capacity. False when the block alone is
  /// larger than the capacity (the caller frees it).
  bool keep(void* ptr, std::size_t size) noexcept;
  /// Frees every block on the cache's stream (the stream is live: used while
  /// a call runs, e.g. before retrying an allocation that ran out of memory).
  void release_all() noexcept;
  /// A call starts (BlockCacheScope does this).
  void begin_call() noexcept { ++call_; }
  /// A call ends: frees, on the cache's stream, the blocks kept by earlier
  /// calls that this one did not take back (BlockCacheScope does this).
  void end_call() noexcept;

 private:
  friend class BlockCacheScope;
  void free_block(const Block& b, void* stream) noexcept;
  /// Waits for the last call's end, then frees every block (on no stream in particular).
  void free_after_last_use() noexcept;

  std::size_t capacity_;
  FreeFn free_fn_;
  int device_ = -1;
  void* stream_ = nullptr;          ///< the stream of the last call that used the cache
  void* last_use_ = nullptr;        ///< cudaEvent_t recorded at the end of that call (created on first use)
  bool last_use_recorded_ = false;
  std::vector<Block> blocks_;       ///< oldest first
  std::size_t bytes_ = 0;
  uint64_t call_ = 0;               ///< calls begun
};

/// RAII: installs `cache` on the calling thread for one call on (`device`,
/// `stream`). A call on another stream than the cache's last one is first
/// ordered after that call's end (cudaStreamWaitEvent), so the kept blocks
/// move to the new stream safely. On exit the blocks this call left unused
/// are freed (BlockCache::end_call) and the end of the call is recorded on
/// `stream`. `cache` may be nullptr (nothing installed).
class BlockCacheScope {
 public:
  BlockCacheScope(BlockCache* cache, int device, void* stream) noexcept;
  ~BlockCacheScope();
  BlockCacheScope(const BlockCacheScope&) = delete;
  BlockCacheScope& operator=(const BlockCacheScope&) = delete;

 private:
  BlockCache* cache_;
  BlockCache* previous_;
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
