// Host and device allocation, per-device statistics, current-stream table.
#include "shim/allocator.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <optional>
#include <unordered_map>
#include <cstdlib>
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

void* cuda_allocate(std::size_t nbytes, int device, void* stream) {
  check_device(device);
  if (nbytes == 0) return nullptr;
  if (t_arena != nullptr && t_arena->device() == device) return t_arena->allocate(nbytes);
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
  const cudaError_t err = testing::FaultInjector::should_fail(testing::FaultKind::kDeviceAlloc)
                              ? cudaErrorMemoryAllocation
                              : cudaMallocAsync(&ptr, nbytes, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) throw_allocation_failure(err, nbytes, device, "cudaMallocAsync");
  count_allocation(device, nbytes);
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
  cudaError_t err = cudaSuccess;
  {
    DeviceSwitch on_device(device, DeviceSwitch::OnFailure::kIgnore);
    err = cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) (void)cudaGetLastError();
  }
  if (err == cudaSuccess) uncount_allocation(device, nbytes);
  return err;
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
