// `aoti_cuda devices`: list CUDA devices, or say why none can be used.
// Exit status 0 when at least one device is usable, 3 otherwise.
#include <cstdio>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace aoti_cuda_cli {
namespace {

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

int run_devices(bool json) {
  int driver = 0, runtime = 0, count = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t err = cudaGetDeviceCount(&count);
  nlohmann::json doc = {{"cuda_runtime", version_text(runtime)}, {"driver", driver ? version_text(driver) : ""},
                        {"devices", nlohmann::json::array()}};
  if (err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")"
                                               : "cudaGetDeviceCount returned 0";
    if (json) {
      doc["usable"] = false;
      doc["reason"] = why;
      std::printf("%s\n", doc.dump(2).c_str());
    } else {
      std::printf("no usable CUDA device: %s; CUDA runtime %s, driver %s\n", why.c_str(), version_text(runtime).c_str(),
                  driver ? version_text(driver).c_str() : "not installed");
    }
    return kExitNotRunnable;
  }
  if (!json) {
    std::printf("CUDA runtime %s, driver %s, %d device(s)\n", version_text(runtime).c_str(), version_text(driver).c_str(),
                count);
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    const double gib = static_cast<double>(p.totalGlobalMem) / (1 << 30);
    doc["devices"].push_back({{"index", i}, {"name", p.name}, {"sm", p.major * 10 + p.minor}, {"memory_gib", gib}});
    if (!json) std::printf("  cuda:%d  %s  sm_%d%d  %.1f GiB\n", i, p.name, p.major, p.minor, gib);
  }
  if (json) {
    doc["usable"] = true;
    std::printf("%s\n", doc.dump(2).c_str());
  }
  return kExitOk;
}

}  // namespace

Runner add_devices(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("devices", "list CUDA devices, or say why none is usable (exit 3)");
  auto json = std::make_shared<bool>(false);
  add_json_flag(*cmd, *json);
  return [json] { return run_devices(*json); };
}

}  // namespace aoti_cuda_cli
