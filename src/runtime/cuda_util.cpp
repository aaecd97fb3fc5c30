#include "runtime/cuda_util.hpp"

namespace aoti_cuda::runtime {

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

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
    changed_ = true;
  }
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

}  // namespace aoti_cuda::runtime
