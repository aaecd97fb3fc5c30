// Shim: grad mode, warnings, checks, proxy executor, live-handle counter.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "aoti_cuda/log.hpp"
#include "aoti_cuda/shim.h"
#include "shim/error_state.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

struct WarningLog {
  std::mutex mutex;
  std::string last;
  uint64_t count = 0;
};

WarningLog& warning_log() {
  static WarningLog* log = new WarningLog();  // leaked: warnings may come during static destruction
  return *log;
}

// Grad mode is per thread and starts disabled: this SDK only runs inference,
// and the model's AOTINoGradGuard saves and restores it around Run anyway.
bool& grad_mode() noexcept {
  thread_local bool enabled = false;
  return enabled;
}

std::string where(const char* func, const char* file, uint32_t line) {
  return std::string(func ? func : "?") + " at " + (file ? file : "?") + ":" + std::to_string(line);
}

}  // namespace

std::string last_warning() {
  WarningLog& log = warning_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  return log.last;
}

uint64_t warning_count() noexcept {
  WarningLog& log = warning_log();
  std::lock_guard<std::mutex> lock(log.mutex);
  return log.count;
}

}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

bool aoti_torch_grad_mode_is_enabled(void) { return aoti_cuda::shim::grad_mode(); }

void aoti_torch_grad_mode_set_enabled(bool enabled) { aoti_cuda::shim::grad_mode() = enabled; }

void aoti_torch_warn(const char* func, const char* file, uint32_t line, const char* msg) {
  try {
    std::string text = std::string(msg ? msg : "") + " (" + aoti_cuda::shim::where(func, file, line) + ")";
    {
      aoti_cuda::shim::WarningLog& log = aoti_cuda::shim::warning_log();
      std::lock_guard<std::mutex> lock(log.mutex);
      log.last = text;
      log.count += 1;
    }
    // Through the SDK's log handler (aoti_cuda/log.hpp); the default one
    // honours AOTI_CUDA_QUIET.
    aoti_cuda::log(aoti_cuda::LogLevel::kWarning, text);
  } catch (...) {
    // A warning must never fail the caller.
  }
}

void aoti_torch_check(bool cond, const char* func, const char* file, uint32_t line, const char* msg) {
  if (cond) return;
  // Recorded first so the host can report it even though the model swallows
  // the exception's text; then thrown like libtorch's c10::Error, which the
  // model's entry point catches and turns into a failed call.
  std::string text = std::string("check failed: ") + (msg ? msg : "") + " (" +
                     aoti_cuda::shim::where(func, file, line) + ")";
  aoti_cuda::shim::set_last_error(aoti_cuda::ErrorCode::kModel, "aoti_torch_check", text.c_str());
  throw std::runtime_error(text);
}

AOTITorchError aoti_torch_proxy_executor_call_function(AOTIProxyExecutorHandle proxy_executor, int extern_node_index,
                                                       int num_ints, int64_t* flatten_int_args, int num_tensors,
                                                       AtenTensorHandle* flatten_tensor_args) {
  (void)proxy_executor;
  (void)num_ints;
  (void)flatten_int_args;
  (void)num_tensors;
  (void)flatten_tensor_args;
  return aoti_cuda::shim::shim_call(__func__, [&] {
    throw aoti_cuda::Error(aoti_cuda::ErrorCode::kUnsupported,
                           "extern node " + std::to_string(extern_node_index) +
                               " is an op without a C shim (a custom op or an aten op outside Inductor's fallback "
                               "list); such ops are unsupported because aoti_cuda has no libtorch dispatcher to run them");
  });
}

int64_t aoti_cuda_shim_live_handles(void) { return aoti_cuda::shim::live_handles(); }

}  // extern "C"
