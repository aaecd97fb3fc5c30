// Private: what the AOTInductor runtime does with CUDA events, made safe for
// CUDA graph capture.
//
// The container's Run records a per-model-instance "run finished" event on
// the Run's stream (cudaEventRecord) and, before reusing an instance, asks
// whether its last run finished (cudaEventQuery, or cudaEventSynchronize).
// Under capture that breaks twice: an event recorded in a capturing stream is
// a "captured event" that cudaEventQuery refuses (cudaErrorCapturedEvent) from
// then on, so every later Run of that container would fail; and a thread-local
// capture treats cudaEventQuery/Synchronize themselves as unsafe calls.
// libaoti_cuda therefore exports pass-through definitions of these three
// functions, which the model libraries bind to from the global scope (like
// the shim and the module tracker in driver_modules.hpp). While a
// GraphCaptureScope is active on the calling thread:
//   * cudaEventRecord does nothing and succeeds: nothing runs during a
//     capture, so the instance is free again as soon as Run returns (its
//     event keeps the state of the instance's last real run);
//   * cudaEventQuery / cudaEventSynchronize run with the thread's capture
//     mode relaxed (they only look at events of earlier, real runs).
// Outside such a scope the functions forward unchanged to libcudart.
#pragma once

#include <string>

namespace aoti_cuda::runtime {

/// Marks the calling thread as capturing a graph of a model Run (see above).
class GraphCaptureScope {
 public:
  GraphCaptureScope() noexcept;
  ~GraphCaptureScope();
  GraphCaptureScope(const GraphCaptureScope&) = delete;
  GraphCaptureScope& operator=(const GraphCaptureScope&) = delete;
  /// Event records skipped in this scope so far.
  int skipped_records() const noexcept;

 private:
  bool previous_;
  int records_at_start_;
};

/// "" when model libraries bind cudaEventRecord/Query/Synchronize to the
/// definitions above (graphs can be captured safely); otherwise why not (e.g.
/// libcudart comes before libaoti_cuda in the process's global symbol scope).
std::string capture_hooks_problem();

}  // namespace aoti_cuda::runtime
