// Private low layer: small string and timing helpers shared by every folder.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace aoti_cuda::common {

using Clock = std::chrono::steady_clock;

/// Milliseconds elapsed since `t0`.
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// items joined with `sep` ("" for none).
inline std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace aoti_cuda::common
