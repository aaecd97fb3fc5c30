// The operator shims' per-call tuning. See op_settings.hpp.
#include "shim/op_settings.hpp"

#include "common/env.hpp"

namespace aoti_cuda::shim {
namespace {

thread_local const OpSettings* t_settings = nullptr;

// A kernel-tuning switch that is off unless `variable` is 1 (an invalid value is reported and reads as 0).
bool switched_on(const char* variable) noexcept { return env_integer_or_warn(variable, 0, 1).value_or(0) == 1; }

}  // namespace

bool merge_launches_next_default() noexcept {
  static const bool on = switched_on("AOTI_CUDA_MERGE_LAUNCHES_NEXT");
  return on;
}

bool merge_slices_default() noexcept {
  static const bool on = switched_on("AOTI_CUDA_MERGE_SLICES");
  return on;
}

const OpSettings& op_settings() noexcept {
  if (t_settings != nullptr) return *t_settings;
  static const OpSettings defaults{};  // made on first use: its defaults read the environment (not at static init)
  return defaults;
}

OpSettingsScope::OpSettingsScope(const OpSettings* settings) noexcept : previous_(t_settings) { t_settings = settings; }

OpSettingsScope::~OpSettingsScope() { t_settings = previous_; }

}  // namespace aoti_cuda::shim
