// Private: reading the library's diagnostic environment switches.
#pragma once

#include <cstdlib>

namespace aoti_cuda {

/// True when environment variable `name` is set to anything but "" or "0"
/// (one rule for every AOTI_CUDA_* switch).
inline bool env_flag(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && !(v[0] == '0' && v[1] == '\0');
}

}  // namespace aoti_cuda
