#include "common/cuda.hpp"

#include <dlfcn.h>

namespace aoti_cuda::common {

bool is_no_device_error(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorSystemNotReady:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInvalidDevice:
      return true;
    default:
      return false;
  }
}

Error cuda_error(cudaError_t err, const std::string& what) {
  // Reset the per-thread "last error" so the failure does not resurface in an
  // unrelated later call (sticky context errors stay regardless).
  (void)cudaGetLastError();
  std::string text = what + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (is_no_device_error(err)) {
    return Error(ErrorCode::kNoDevice, "no usable CUDA device: " + text);
  }
  if (err == cudaErrorMemoryAllocation) return Error(ErrorCode::kOutOfMemory, text);
  return Error(ErrorCode::kCuda, text);
}

DeviceGuard::DeviceGuard(int device, OnFailure on_failure, Bind bind) {
  if (device < 0) return;
  const bool throwing = on_failure == OnFailure::kThrow;
  cudaError_t err = cudaGetDevice(&previous_);
  if (err != cudaSuccess) {
    if (throwing) throw cuda_error(err, "cudaGetDevice");
    (void)cudaGetLastError();
    return;
  }
  if (previous_ == device && bind == Bind::kIfDifferent) return;
  err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    if (throwing) throw cuda_error(err, "cudaSetDevice(" + std::to_string(device) + ")");
    (void)cudaGetLastError();
    return;
  }
  changed_ = previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (changed_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

int sm_version(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

void* driver_symbol(const char* name) noexcept {
  static void* driver = [] {
    void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == nullptr) h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h;
  }();
  return driver != nullptr ? ::dlsym(driver, name) : nullptr;
}

}  // namespace aoti_cuda::common
