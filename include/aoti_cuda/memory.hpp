// aoti_cuda — device memory used by the shim's allocator.
//
// Intermediate and output tensors of a model run are allocated stream-ordered
// (cudaMallocAsync on the run's stream) from each device's memory pool. The
// pool keeps freed memory cached for the next run; trim_device_memory() gives
// it back to the driver. These functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "aoti_cuda/export.h"

namespace aoti_cuda {

struct MemoryStats {
  std::size_t bytes_in_use = 0;       ///< bytes currently allocated through the shim on this device
  std::size_t peak_bytes_in_use = 0;  ///< high-water mark since start or reset_peak_memory()
  std::size_t live_allocations = 0;   ///< allocations currently alive
  std::size_t total_allocations = 0;  ///< allocations made since start
  std::size_t pool_reserved_bytes = 0;///< bytes the device's pool holds from the driver (in use + cached)
};

/// Statistics of the shim allocator for a CUDA device (zeros if never used).
AOTI_CUDA_API MemoryStats device_memory_stats(int device = 0);
/// Resets peak_bytes_in_use to the current bytes_in_use.
AOTI_CUDA_API void reset_peak_memory(int device = 0);
/// Releases cached pool memory above `keep_bytes` back to the driver
/// (synchronizes the device first). Throws aoti_cuda::Error on CUDA failure.
AOTI_CUDA_API void trim_device_memory(int device = 0, std::size_t keep_bytes = 0);

}  // namespace aoti_cuda
