#include "support/gpu.hpp"

#include <cuda_runtime_api.h>

namespace aoti_cuda_test {
namespace {
struct Probe {
  bool available = false;
  std::string reason;
  Probe() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
      (void)cudaGetLastError();
    } else if (count == 0) {
      reason = "no CUDA device";
    } else {
      available = true;
    }
  }
};
const Probe& probe() {
  static const Probe p;
  return p;
}
}  // namespace

bool gpu_available() { return probe().available; }
const std::string& gpu_unavailable_reason() { return probe().reason; }

}  // namespace aoti_cuda_test
