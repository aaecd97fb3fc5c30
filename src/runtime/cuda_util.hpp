// Private helpers of the runtime: turning cudart failures into aoti_cuda::Error
// and small RAII wrappers. Nothing here is exported.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda::runtime {

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
/// previous device afterwards (only touches cudart when they differ).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// Compute capability of `device` as major*10+minor (90 for sm_90), 0 when it cannot be queried.
int sm_version(int device);

}  // namespace aoti_cuda::runtime
