// Private: opting a kernel into more than 48 KiB of dynamic shared memory, once per device.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>

namespace aoti_cuda {
namespace shim {

/// Devices whose opt-in is remembered; others set the attribute on every launch.
constexpr int kSharedMemoryDevices = 64;
/// One flag per device, owned by the caller: one table per kernel.
using SharedMemoryOptIns = std::array<std::atomic<bool>, kSharedMemoryDevices>;

/// Lets `kernel` launch with `bytes` of dynamic shared memory on the current device. The
/// attribute belongs to the function in a device's context, and setting it costs host time:
/// `done` records the devices where it is set. Returns the cudaError_t.
template <typename Kernel>
cudaError_t opt_in_shared_memory(Kernel kernel, int bytes, SharedMemoryOptIns& done) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const bool remembered = device >= 0 && device < kSharedMemoryDevices;
  if (remembered && done[static_cast<std::size_t>(device)].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && remembered) done[static_cast<std::size_t>(device)].store(true, std::memory_order_release);
  return err;
}

}  // namespace shim
}  // namespace aoti_cuda
