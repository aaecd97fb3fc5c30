// The operator shims' per-call tuning. See op_settings.hpp.
#include "shim/op_settings.hpp"

namespace aoti_cuda::shim {
namespace {

const OpSettings kDefaults{};
thread_local const OpSettings* t_settings = nullptr;

}  // namespace

const OpSettings& op_settings() noexcept { return t_settings != nullptr ? *t_settings : kDefaults; }

OpSettingsScope::OpSettingsScope(const OpSettings* settings) noexcept : previous_(t_settings) { t_settings = settings; }

OpSettingsScope::~OpSettingsScope() { t_settings = previous_; }

}  // namespace aoti_cuda::shim
