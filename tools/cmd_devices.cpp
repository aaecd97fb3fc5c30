// `aoti_cuda devices`: list CUDA devices, or say why none can be used.
// Exit status 0 when at least one device is usable.
#include <cstdio>

#include <cuda_runtime_api.h>

#include "cli.hpp"

int cmd_devices(int, char**) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no usable CUDA device: %s (%s); CUDA runtime %d.%d, driver %s\n",
                err != cudaSuccess ? cudaGetErrorName(err) : "cudaGetDeviceCount returned 0",
                err != cudaSuccess ? cudaGetErrorString(err) : "no devices", runtime / 1000, (runtime % 1000) / 10,
                driver ? (std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10)).c_str()
                       : "not installed");
    return 1;
  }
  std::printf("CUDA runtime %d.%d, driver %d.%d, %d device(s)\n", runtime / 1000, (runtime % 1000) / 10,
              driver / 1000, (driver % 1000) / 10, count);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    std::printf("  cuda:%d  %s  sm_%d%d  %.1f GiB\n", i, p.name, p.major, p.minor,
                static_cast<double>(p.totalGlobalMem) / (1 << 30));
  }
  return 0;
}
