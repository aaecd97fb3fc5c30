// aoti_cuda shim — when the operator kernels launch with programmatic dependent launch (see
// dependent_launch.hpp).
#include "shim/ops/dependent_launch.hpp"

#include <atomic>

#include "shim/op_settings.hpp"

namespace aoti_cuda {
namespace shim {
namespace pdl {
namespace {

// Per device ordinal: 0 not asked yet, 1 older than sm_90, 2 sm_90 or newer. A device's compute
// capability never changes, so a race only asks the driver twice.
constexpr int kDevices = 64;
std::atomic<int> g_capable[kDevices];

}  // namespace

bool sm90_or_newer() noexcept {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave no error behind for the caller's next check
    return false;
  }
  if (device < 0 || device >= kDevices) return false;
  int known = g_capable[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    known = major >= 9 ? 2 : 1;
    g_capable[device].store(known, std::memory_order_relaxed);
  }
  return known == 2;
}

bool allowed() noexcept { return op_settings().dependent_launch && sm90_or_newer(); }

}  // namespace pdl
}  // namespace shim
}  // namespace aoti_cuda
