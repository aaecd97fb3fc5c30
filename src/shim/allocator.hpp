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

/// Moves the stream on which the handle's storage will be freed (e.g. before the
/// stream it was allocated on is destroyed; the caller orders the two streams,
/// e.g. with an event). No-op for non-CUDA or borrowed storage.
AOTITorchError set_storage_free_stream(AtenTensorHandle handle, void* stream) noexcept;

}  // namespace shim
}  // namespace aoti_cuda
