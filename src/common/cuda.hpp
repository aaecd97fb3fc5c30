// Private low layer (src/common): turning cudart failures into
// aoti_cuda::Error, and the one device guard every layer uses.
// Used by the shim and the runtime; includes nothing of either.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "aoti_cuda/error.hpp"
#include "common/fault_injection.hpp"

/// A CUDA runtime call that the fault injector may replace by a failure
/// (cudaErrorMemoryAllocation, without calling CUDA) in tests; see
/// common/fault_injection.hpp. Used for the checked calls of loads and runs.
#define AOTI_CUDA_FAULTABLE(call)                                                                      \
  (::aoti_cuda::testing::FaultInjector::should_fail(::aoti_cuda::testing::FaultKind::kCudaCall) \
       ? cudaErrorMemoryAllocation                                                                     \
       : (call))

namespace aoti_cuda::common {

/// True for cudart codes that mean "there is no usable GPU/driver here" rather
/// than "this call failed".
bool is_no_device_error(cudaError_t err) noexcept;

/// Builds the Error for a failed cudart call: kNoDevice for missing
/// device/driver, kOutOfMemory for allocation failures, kCuda otherwise. The
/// message names `what` (the operation) and the CUDA error name and text.
/// Also clears cudart's sticky last-error slot for non-sticky errors.
Error cuda_error(cudaError_t err, const std::string& what);

/// Throws cuda_error(err, what) unless err == cudaSuccess.
inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw cuda_error(err, what);
}

/// Makes `device` current for the lifetime of the guard and restores the
/// previous device afterwards. The one policy of the library:
///   * a negative `device` means host work: the guard does nothing (so callers
///     write `DeviceGuard g(cuda ? index : -1)` instead of optional guards);
///   * cudart is only touched when the current device differs, except with
///     Bind::kPrimaryContext, which always calls cudaSetDevice so the device's
///     primary context is current on this thread (cuModuleUnload needs it);
///   * OnFailure::kThrow throws cuda_error; OnFailure::kIgnore (for destructors
///     and other noexcept paths) carries on on whatever device is current and
///     clears cudart's last error.
class DeviceGuard {
 public:
  enum class OnFailure { kThrow, kIgnore };
  enum class Bind { kIfDifferent, kPrimaryContext };

  explicit DeviceGuard(int device, OnFailure on_failure = OnFailure::kThrow, Bind bind = Bind::kIfDifferent);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// Compute capability of `device` as major*10+minor (90 for sm_90), 0 when it cannot be queried.
int sm_version(int device);

/// The CUDA driver's entry point `name` (libcuda.so.1, opened once and never
/// closed; libaoti_cuda does not link the driver), or nullptr.
void* driver_symbol(const char* name) noexcept;

}  // namespace aoti_cuda::common
