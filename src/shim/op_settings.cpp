// The operator shims' per-call tuning. See op_settings.hpp.
#include "shim/op_settings.hpp"

#include "common/env.hpp"

namespace aoti_cuda::shim {
namespace {

thread_local const OpSettings* t_settings = nullptr;

}  // namespace

bool merge_slices_default() noexcept {
  static const bool on = env_integer_or_warn("AOTI_CUDA_MERGE_SLICES", 0, 1).value_or(1) == 1;
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
