// What et_runner's commands share (et_runner.cpp: fixtures and run; et_generate.cpp: generate): failures,
// ExecuTorch and CUDA checks, timing, memory readings. A benchmark peer only, built by build.sh.
#pragma once

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace etpeer {

using Clock = std::chrono::steady_clock;
using executorch::aten::ScalarType;
using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using json = nlohmann::json;

inline double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_et(Error e, const std::string& what) {
  if (e != Error::Ok) throw Failure(what + ": ExecuTorch error 0x" + [&] {
    char b[16];
    std::snprintf(b, sizeof b, "%x", static_cast<unsigned>(e));
    return std::string(b);
  }());
}
template <typename T>
T take(executorch::runtime::Result<T>&& r, const std::string& what) {
  check_et(r.error(), what);
  return std::move(r.get());
}
inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(std::string(what) + ": " + cudaGetErrorString(e));
}

inline long rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}
inline double gpu_used_mib() {
  size_t free_b = 0, total_b = 0;
  check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return static_cast<double>(total_b - free_b) / 1048576.0;
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  return v[static_cast<size_t>(std::lround(rank))];
}

// A count option's value: an integer in [lo, 1,000,000].
inline bool parse_count(const char* text, int lo, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

/// `et_runner generate ...` (et_generate.cpp).
int cmd_generate(int argc, char** argv);

}  // namespace etpeer
