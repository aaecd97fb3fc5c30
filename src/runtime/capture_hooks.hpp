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
// The model libraries' imports of these functions are bound to the SDK's
// hooks (runtime/cuda_hooks.hpp). While a GraphCaptureScope is active on the
// calling thread:
//   * event records do nothing and succeed: nothing runs during a capture,
//     so the instance is free again as soon as Run returns (its event keeps
//     the state of the instance's last real run);
//   * event queries / synchronizations run with the thread's capture mode
//     relaxed (they only look at events of earlier, real runs).
// Outside such a scope the hooks forward unchanged to libcudart.
#pragma once

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

  /// For the event-record hooks: true (and counted) when the calling thread
  /// is capturing, so the record must be skipped.
  static bool skip_event_record() noexcept;

 private:
  bool previous_;
  int records_at_start_;
};

/// For the event query hooks: relaxes the calling thread's capture mode
/// while alive, when a GraphCaptureScope is active on it (else does nothing).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept;
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  bool active_;
  int mode_ = 0;
};

}  // namespace aoti_cuda::runtime
