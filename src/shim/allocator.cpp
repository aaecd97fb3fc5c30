// Host and device allocation, per-device statistics, current-stream table.
#include "shim/allocator.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <optional>
#include <unordered_map>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>

#include <unistd.h>

#include "aoti_cuda/error.hpp"
#include "common/fault_injection.hpp"
#include "aoti_cuda/memory.hpp"
#include "common/cuda.hpp"
#include "shim/error_state.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

struct DeviceState {
  std::size_t bytes_in_use = 0;
  std::size_t peak_bytes_in_use = 0;
  std::size_t live_allocations = 0;
  std::size_t total_allocations = 0;
  std::size_t cached_bytes = 0;  ///< held by call block caches
  std::size_t cache_hits = 0;
  std::atomic<bool> pool_configured{false};  ///< read without the mutex on the allocation path
  cudaMemPool_t pool = nullptr;
};

struct AllocatorState {
  std::mutex mutex;
  std::array<DeviceState, kMaxCudaDevices> devices;
};

AllocatorState& state() {
  // Leaked on purpose: storages may be freed from static destructors of other
  // translation units (or the application) after this one would be destroyed.
  static AllocatorState* s = new AllocatorState();
  return *s;
}

std::string cuda_error_text(cudaError_t err) {
  const char* name = cudaGetErrorName(err);
  const char* text = cudaGetErrorString(err);
  return std::string(name ? name : "cudaError?") + " (" + (text ? text : "?") + ")";
}

// Sets the release threshold of the device's current pool once, so memory
// freed with cudaFreeAsync stays cached instead of going back to the driver at
// every synchronization. Caller holds the state mutex and has made `device` current.
void configure_pool_locked(DeviceState& dev, int device) {
  if (dev.pool_configured) return;
  cudaMemPool_t pool = nullptr;
  // The device's current pool: the one cudaMallocAsync draws from (the default
  // pool unless the application installed another with cudaDeviceSetMemPool).
  cudaError_t err = cudaDeviceGetMemPool(&pool, device);
  if (err != cudaSuccess) throw_cuda_error(err, "cudaDeviceGetMemPool(cuda:" + std::to_string(device) + ")");
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  if (err != cudaSuccess) throw_cuda_error(err, "cudaMemPoolSetAttribute(ReleaseThreshold, cuda:" + std::to_string(device) + ")");
  dev.pool = pool;
  dev.pool_configured = true;
}

// Thread-local current streams; nullptr (legacy default stream) until set.
std::array<void*, kMaxCudaDevices>& stream_table() {
  thread_local std::array<void*, kMaxCudaDevices> table{};
  return table;
}

void check_device(int device) {
  if (device < 0 || device >= kMaxCudaDevices) {
    throw_invalid("CUDA device index " + std::to_string(device) + " is out of range [0, " +
                  std::to_string(kMaxCudaDevices) + ")");
  }
}

}  // namespace

[[noreturn]] void throw_cuda_error(int cuda_error, const std::string& what) {
  // One classification for the whole library (also resets cudart's last
  // error, so the model's next cudaGetLastError() does not see our failure).
  throw common::cuda_error(static_cast<cudaError_t>(cuda_error), what);
}

int resolve_cuda_device(int32_t device_index) {
  if (device_index == -1) {
    int current = 0;
    cudaError_t err = cudaGetDevice(&current);
    if (err != cudaSuccess) throw_cuda_error(err, "cudaGetDevice (device index -1 = current device)");
    device_index = current;
  }
  check_device(device_index);
  return device_index;
}

void* current_stream(int device) {
  check_device(device);
  return stream_table()[static_cast<std::size_t>(device)];
}

int multiprocessor_count(int device) {
  check_device(device);
  static std::array<std::atomic<int>, kMaxCudaDevices> cache{};
  std::atomic<int>& slot = cache[static_cast<std::size_t>(device)];
  int count = slot.load(std::memory_order_relaxed);
  if (count > 0) return count;
  const cudaError_t err = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) throw common::cuda_error(err, "cudaDeviceGetAttribute(MultiProcessorCount)");
  slot.store(count, std::memory_order_relaxed);
  return count;
}

void* exchange_current_stream(int device, void* stream) {
  check_device(device);
  void*& slot = stream_table()[static_cast<std::size_t>(device)];
  void* previous = slot;
  slot = stream;
  return previous;
}

namespace {

// Every live CaptureArena block, for cuda_free (a block is never returned to
// the pool). `g_arena_blocks` keeps the common case (no graphs) lock-free.
struct ArenaRegistry {
  std::mutex mutex;
  std::unordered_map<void*, CaptureArena*> owner;
};
ArenaRegistry& arena_registry() {
  static ArenaRegistry* r = new ArenaRegistry();  // leaked like state()
  return *r;
}
std::atomic<std::size_t> g_arena_blocks{0};
thread_local CaptureArena* t_arena = nullptr;
thread_local BlockCache* t_cache = nullptr;

std::string allocation_where(std::size_t nbytes, int device) {
  return std::to_string(nbytes) + " bytes on cuda:" + std::to_string(device);
}

void count_allocation(int device, std::size_t nbytes) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
  dev.bytes_in_use += nbytes;
  if (dev.bytes_in_use > dev.peak_bytes_in_use) dev.peak_bytes_in_use = dev.bytes_in_use;
  dev.live_allocations += 1;
  dev.total_allocations += 1;
}

// A block of `size` moved into (+1) or out of (-1, a cache hit) a call block cache.
void count_cached(int device, std::size_t size, int direction) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
  if (direction > 0) {
    dev.cached_bytes += size;
    dev.bytes_in_use -= size <= dev.bytes_in_use ? size : dev.bytes_in_use;
    if (dev.live_allocations > 0) dev.live_allocations -= 1;
  } else {
    dev.cached_bytes -= size <= dev.cached_bytes ? size : dev.cached_bytes;
    if (direction < 0) {  // handed out again: an allocation
      dev.bytes_in_use += size;
      if (dev.bytes_in_use > dev.peak_bytes_in_use) dev.peak_bytes_in_use = dev.bytes_in_use;
      dev.live_allocations += 1;
      dev.total_allocations += 1;
      dev.cache_hits += 1;
    }
  }
}

bool cache_serves(int device, void* stream) noexcept {
  return t_cache != nullptr && t_arena == nullptr && t_cache->device() == device && t_cache->stream() == stream &&
         t_cache->capacity() > 0;
}

void uncount_allocation(int device, std::size_t nbytes) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
  dev.bytes_in_use -= nbytes <= dev.bytes_in_use ? nbytes : dev.bytes_in_use;
  if (dev.live_allocations > 0) dev.live_allocations -= 1;
}

[[noreturn]] void throw_allocation_failure(cudaError_t err, std::size_t nbytes, int device, const char* fn) {
  (void)cudaGetLastError();
  std::size_t in_use = 0;
  {
    AllocatorState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    in_use = s.devices[static_cast<std::size_t>(device)].bytes_in_use;
  }
  if (err == cudaErrorMemoryAllocation) {
    throw Error(ErrorCode::kOutOfMemory, "out of memory: requested " + allocation_where(nbytes, device) + " (" +
                                             cuda_error_text(err) + "; " + std::to_string(in_use) +
                                             " bytes in use by aoti_cuda on this device)");
  }
  throw_cuda_error(err, std::string(fn) + " of " + allocation_where(nbytes, device));
}

}  // namespace

std::size_t block_size(std::size_t nbytes) noexcept {
  constexpr std::size_t kSmall = std::size_t{1} << 20;
  std::size_t step = 512;
  if (nbytes > kSmall) {
    std::size_t top = kSmall;
    while (top <= nbytes / 2) top *= 2;  // largest power of two <= nbytes
    step = top / 8;
  }
  if (nbytes > std::numeric_limits<std::size_t>::max() - step) return nbytes;  // let the driver refuse it
  return (nbytes + step - 1) / step * step;
}

void* cuda_allocate(std::size_t nbytes, int device, void* stream) {
  check_device(device);
  if (nbytes == 0) return nullptr;
  if (t_arena != nullptr && t_arena->device() == device) return t_arena->allocate(nbytes);
  const std::size_t size = block_size(nbytes);
  const bool cached = cache_serves(device, stream);
  if (cached) {
    if (void* p = t_cache->take(size)) {
      count_cached(device, size, -1);
      return p;
    }
  }
  AllocatorState& s = state();
  DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
  // The guard outlives the try: cudaMallocAsync below runs on `device`. No
  // message is built on this path unless something fails.
  std::optional<DeviceSwitch> on_device;
  try {
    on_device.emplace(device);
    if (!dev.pool_configured) {
      std::lock_guard<std::mutex> lock(s.mutex);
      configure_pool_locked(dev, device);
    }
  } catch (const Error& e) {
    throw Error(e.code(), "CUDA allocation of " + allocation_where(nbytes, device) + ": " + e.what());
  }
  void* ptr = nullptr;
  cudaError_t err = testing::FaultInjector::should_fail(testing::FaultKind::kDeviceAlloc)
                        ? cudaErrorMemoryAllocation
                        : cudaMallocAsync(&ptr, size, static_cast<cudaStream_t>(stream));
  if (err == cudaErrorMemoryAllocation && cached && t_cache->size() > 0) {
    // Blocks kept for other sizes go back to the pool, which can hand them
    // out on this same stream at once; then one more try.
    (void)cudaGetLastError();
    t_cache->release_all();
    err = cudaMallocAsync(&ptr, size, static_cast<cudaStream_t>(stream));
  }
  if (err != cudaSuccess) throw_allocation_failure(err, size, device, "cudaMallocAsync");
  count_allocation(device, size);
  return ptr;
}

int cuda_free(void* ptr, std::size_t nbytes, int device, void* stream) noexcept {
  if (ptr == nullptr) return cudaSuccess;
  if (device < 0 || device >= kMaxCudaDevices) return cudaErrorInvalidDevice;
  if (g_arena_blocks.load(std::memory_order_acquire) > 0) {
    ArenaRegistry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.owner.find(ptr);
    if (it != r.owner.end()) {
      // An arena block: reusable while its capture runs, else kept until the arena goes.
      CaptureArena* arena = it->second;
      if (arena == t_arena) {
        for (const CaptureArena::Block& b : arena->blocks_) {
          if (b.ptr == ptr) {
            arena->free_.push_back(b);
            break;
          }
        }
      }
      return cudaSuccess;
    }
  }
  const std::size_t size = block_size(nbytes);
  if (cache_serves(device, stream) && t_cache->keep(ptr, size)) {
    count_cached(device, size, +1);
    return cudaSuccess;
  }
  cudaError_t err = cudaSuccess;
  {
    DeviceSwitch on_device(device, DeviceSwitch::OnFailure::kIgnore);
    err = cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) (void)cudaGetLastError();
  }
  if (err == cudaSuccess) uncount_allocation(device, size);
  return err;
}

// ---- BlockCache -------------------------------------------------------------

BlockCache::BlockCache(std::size_t capacity_bytes, FreeFn free_fn) : capacity_(capacity_bytes), free_fn_(free_fn) {}

BlockCache::~BlockCache() {
  if (device_ < 0 || free_fn_ != nullptr) {  // never used on a device, or a test's blocks
    for (const Block& b : blocks_) free_block(b, nullptr);
    return;
  }
  free_after_last_use();
  DeviceSwitch on_device(device_, DeviceSwitch::OnFailure::kIgnore);
  if (last_use_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(last_use_));
  (void)cudaGetLastError();
}

void BlockCache::free_after_last_use() noexcept {
  DeviceSwitch on_device(device_, DeviceSwitch::OnFailure::kIgnore);
  // The last call's stream may be gone (a caller's stream): wait for that
  // call's end, then the blocks are idle and any stream may free them.
  if (last_use_recorded_) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(last_use_));
  for (const Block& b : blocks_) free_block(b, nullptr);
  blocks_.clear();
  bytes_ = 0;
  (void)cudaGetLastError();
}

void* BlockCache::take(std::size_t size) noexcept {
  for (std::size_t i = blocks_.size(); i-- > 0;) {
    if (blocks_[i].size != size) continue;
    void* p = blocks_[i].ptr;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
    bytes_ -= size;
    return p;
  }
  return nullptr;
}

bool BlockCache::keep(void* ptr, std::size_t size) noexcept {
  if (size > capacity_) return false;
  std::size_t evict = 0;
  std::size_t kept = bytes_;
  while (kept + size > capacity_ && evict < blocks_.size()) kept -= blocks_[evict++].size;
  if (blocks_.size() - evict == blocks_.capacity()) {
    try {
      blocks_.reserve(std::max<std::size_t>(16, 2 * blocks_.capacity()));
    } catch (...) {
      return false;  // no room to remember it: freed the ordinary way
    }
  }
  for (std::size_t i = 0; i < evict; ++i) free_block(blocks_[i], stream_);
  blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(evict));
  blocks_.push_back(Block{ptr, size, call_});
  bytes_ = kept + size;
  return true;
}

void BlockCache::release_all() noexcept {
  for (const Block& b : blocks_) free_block(b, stream_);
  blocks_.clear();
  bytes_ = 0;
}

void BlockCache::end_call() noexcept {
  std::size_t kept = 0;
  for (const Block& b : blocks_) {
    if (b.call == call_) {
      blocks_[kept++] = b;  // freed during this call: kept for the next one
    } else {
      free_block(b, stream_);  // an earlier call's, unused by this one
      bytes_ -= b.size;
    }
  }
  blocks_.resize(kept);
}

void BlockCache::free_block(const Block& b, void* stream) noexcept {
  if (free_fn_ != nullptr) {
    free_fn_(b.ptr, stream);
    return;
  }
  const cudaError_t err = cudaFreeAsync(b.ptr, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) (void)cudaGetLastError();
  if (device_ >= 0) count_cached(device_, b.size, 0);
}

BlockCacheScope::BlockCacheScope(BlockCache* cache, int device, void* stream) noexcept
    : cache_(cache), previous_(t_cache) {
  t_cache = cache;
  if (cache == nullptr) return;
  if (!cache->blocks_.empty() && (cache->device_ != device || cache->stream_ != stream)) {
    // The kept blocks were last used by the previous call, on its stream.
    const bool ordered = cache->device_ == device && cache->last_use_recorded_ &&
                         cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                             static_cast<cudaEvent_t>(cache->last_use_), 0) == cudaSuccess;
    if (!ordered) cache->free_after_last_use();
  }
  cache->device_ = device;
  cache->stream_ = stream;
  cache->begin_call();
}

BlockCacheScope::~BlockCacheScope() {
  t_cache = previous_;
  if (cache_ == nullptr) return;
  cache_->end_call();
  if (cache_->blocks_.empty()) return;
  // Recorded so that a later call on another stream (or the cache's
  // destruction) can wait for the work that last used the kept blocks.
  auto stream = static_cast<cudaStream_t>(cache_->stream_);
  cudaError_t err = cudaSuccess;
  if (cache_->last_use_ == nullptr) {
    cudaEvent_t e = nullptr;
    err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err == cudaSuccess) cache_->last_use_ = e;
  }
  if (err == cudaSuccess) err = cudaEventRecord(static_cast<cudaEvent_t>(cache_->last_use_), stream);
  cache_->last_use_recorded_ = err == cudaSuccess;
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(stream);  // nothing pending on the blocks then
    (void)cudaGetLastError();
  }
}

void* CaptureArena::allocate(std::size_t nbytes) {
  {
    std::lock_guard<std::mutex> lock(arena_registry().mutex);
    for (std::size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size >= nbytes && free_[i].size <= 2 * nbytes) {
        void* p = free_[i].ptr;
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return p;
      }
    }
  }
  const std::size_t size = (nbytes + 511) / 512 * 512;
  blocks_.reserve(blocks_.size() + 1);  // no throw after the cudaMalloc below
  void* ptr = nullptr;
  cudaError_t err = cudaSuccess;
  {
    DeviceSwitch on_device(device_);
    // cudaMalloc is not a stream operation, but a thread-local capture treats
    // it as unsafe; it is what this arena is for, so relax the mode around it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    err = cudaMalloc(&ptr, size);
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
  }
  if (err != cudaSuccess) throw_allocation_failure(err, size, device_, "cudaMalloc (graph capture)");
  {
    ArenaRegistry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    try {
      r.owner.emplace(ptr, this);
    } catch (...) {
      (void)cudaFree(ptr);
      throw;
    }
    blocks_.push_back(Block{ptr, size});
    g_arena_blocks.fetch_add(1, std::memory_order_release);
  }
  bytes_ += size;
  count_allocation(device_, size);
  return ptr;
}

CaptureArena::~CaptureArena() {
  {
    ArenaRegistry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const Block& b : blocks_) r.owner.erase(b.ptr);
    g_arena_blocks.fetch_sub(blocks_.size(), std::memory_order_release);
  }
  DeviceSwitch on_device(device_, DeviceSwitch::OnFailure::kIgnore);
  for (const Block& b : blocks_) {
    if (cudaFree(b.ptr) == cudaSuccess) uncount_allocation(device_, b.size);
  }
  (void)cudaGetLastError();
}

CaptureArenaScope::CaptureArenaScope(CaptureArena* arena) noexcept : previous_(t_arena) { t_arena = arena; }
CaptureArenaScope::~CaptureArenaScope() { t_arena = previous_; }

AOTITorchError set_storage_free_stream(AtenTensorHandle handle, void* stream) noexcept {
  return shim_call("set_storage_free_stream", [&] {
    AtenTensorOpaque* t = checked_defined(handle, "handle");
    if (t->storage->kind == StorageKind::kCuda) t->storage->free_stream = stream;
  });
}

}  // namespace shim

// ---- public memory API (aoti_cuda/memory.hpp) ----------------------------

MemoryStats device_memory_stats(int device) {
  MemoryStats stats;
  if (device < 0 || device >= shim::kMaxCudaDevices) return stats;
  shim::AllocatorState& s = shim::state();
  cudaMemPool_t pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const shim::DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
    stats.bytes_in_use = dev.bytes_in_use;
    stats.peak_bytes_in_use = dev.peak_bytes_in_use;
    stats.live_allocations = dev.live_allocations;
    stats.total_allocations = dev.total_allocations;
    stats.cached_bytes = dev.cached_bytes;
    stats.cache_hits = dev.cache_hits;
    pool = dev.pool_configured ? dev.pool : nullptr;
  }
  if (pool != nullptr) {
    uint64_t reserved = 0;
    if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess) {
      stats.pool_reserved_bytes = static_cast<std::size_t>(reserved);
    } else {
      (void)cudaGetLastError();
    }
  }
  return stats;
}

void reset_peak_memory(int device) {
  if (device < 0 || device >= shim::kMaxCudaDevices) return;
  shim::AllocatorState& s = shim::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  shim::DeviceState& dev = s.devices[static_cast<std::size_t>(device)];
  dev.peak_bytes_in_use = dev.bytes_in_use;
}

void trim_device_memory(int device, std::size_t keep_bytes) {
  if (device < 0 || device >= shim::kMaxCudaDevices) {
    throw Error(ErrorCode::kInvalidArgument, "trim_device_memory: CUDA device index " + std::to_string(device) +
                                                 " is out of range [0, " + std::to_string(shim::kMaxCudaDevices) + ")");
  }
  try {
    shim::DeviceSwitch on_device(device);
    // Frees enqueued with cudaFreeAsync return to the pool only when they run.
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) shim::throw_cuda_error(err, "cudaDeviceSynchronize(cuda:" + std::to_string(device) + ")");
    cudaMemPool_t pool = nullptr;
    err = cudaDeviceGetMemPool(&pool, device);
    if (err != cudaSuccess) shim::throw_cuda_error(err, "cudaDeviceGetMemPool(cuda:" + std::to_string(device) + ")");
    err = cudaMemPoolTrimTo(pool, keep_bytes);
    if (err != cudaSuccess) shim::throw_cuda_error(err, "cudaMemPoolTrimTo(cuda:" + std::to_string(device) + ")");
  } catch (const Error& e) {
    throw Error(e.code(), std::string("trim_device_memory: ") + e.what());
  }
}

}  // namespace aoti_cuda
