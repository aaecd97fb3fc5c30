// The capture state the event hooks (cuda_hooks.cpp) consult: see capture_hooks.hpp.
#include "runtime/capture_hooks.hpp"

#include <cuda_runtime_api.h>

namespace aoti_cuda::runtime {
namespace {

thread_local bool t_capturing = false;
thread_local int t_skipped_records = 0;

}  // namespace

GraphCaptureScope::GraphCaptureScope() noexcept : previous_(t_capturing), records_at_start_(t_skipped_records) {
  t_capturing = true;
}

GraphCaptureScope::~GraphCaptureScope() { t_capturing = previous_; }

int GraphCaptureScope::skipped_records() const noexcept { return t_skipped_records - records_at_start_; }

bool GraphCaptureScope::skip_event_record() noexcept {
  if (!t_capturing) return false;
  ++t_skipped_records;
  return true;
}

RelaxedCaptureMode::RelaxedCaptureMode() noexcept : active_(t_capturing) {
  if (!active_) return;
  auto mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  mode_ = static_cast<int>(mode);
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (!active_) return;
  auto mode = static_cast<cudaStreamCaptureMode>(mode_);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace aoti_cuda::runtime
