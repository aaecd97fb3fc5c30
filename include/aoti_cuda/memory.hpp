// aoti_cuda — device memory used by the shim's allocator.
//
// CUDA tensors a model creates through the shim while it runs (intermediates,
// outputs, aoti_torch_cuda_caching_allocator_raw_alloc workspaces) are
// allocated stream-ordered (cudaMallocAsync on the run's stream) from each
// device's current memory pool, in blocks rounded up to 512 bytes (an eighth
// of a power of two above 1 MiB). The pool keeps freed memory cached for the
// next run; trim_device_memory() gives it back to the driver. Blocks a model
// frees during a call are kept by that call slot of the Module for its next
// call (up to AOTI_CUDA_BLOCK_CACHE_MIB, default 1024 MiB per slot; 0 turns
// this off); those the next call does not take back (other shapes) return to
// the pool at its end, and all of them when the Module is destroyed. Only these shim
// allocations are counted: Tensor::empty(), the Module's pinned input staging
// and what the model library allocates itself with cudaMalloc (its weights)
// are not.
//
// Thread-safety: these functions may be called from any thread, concurrently
// with each other and with running models.
#pragma once

#include <cstddef>
#include <cstdint>

#include "aoti_cuda/export.h"

namespace aoti_cuda {

/// A snapshot of the shim allocator's counters for one CUDA device.
struct MemoryStats {
  std::size_t bytes_in_use = 0;       ///< bytes currently allocated through the shim on this device
  std::size_t peak_bytes_in_use = 0;  ///< high-water mark since start or reset_peak_memory()
  std::size_t live_allocations = 0;   ///< allocations currently alive
  std::size_t total_allocations = 0;  ///< allocations made since start
  std::size_t pool_reserved_bytes = 0;///< bytes the device's pool holds from the driver (in use + cached)
  /// Bytes models freed during calls that the Modules' call slots keep for
  /// their next calls (not in bytes_in_use; part of pool_reserved_bytes).
  std::size_t cached_bytes = 0;
  /// Allocations served from those kept blocks (counted in total_allocations too).
  std::size_t cache_hits = 0;
};

/// Statistics of the shim allocator for CUDA device `device`. Never throws:
/// all zeros for a device never used or an ordinal out of range
/// (pool_reserved_bytes stays 0 when the pool cannot be queried).
AOTI_CUDA_API MemoryStats device_memory_stats(int device = 0);
/// Resets peak_bytes_in_use to the current bytes_in_use (no-op for an
/// ordinal out of range). Never throws.
AOTI_CUDA_API void reset_peak_memory(int device = 0);
/// Releases cached memory of the device's current pool above `keep_bytes`
/// back to the driver. Synchronizes the whole device first (so pending frees
/// have returned to the pool): do not call it on a latency-critical path.
/// Throws Error: kInvalidArgument for an ordinal out of range, kNoDevice
/// without a usable GPU, kCuda when a CUDA call fails.
AOTI_CUDA_API void trim_device_memory(int device = 0, std::size_t keep_bytes = 0);

}  // namespace aoti_cuda
