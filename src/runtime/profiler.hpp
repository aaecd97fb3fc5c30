// Private runtime: the per-call profiler behind RunOptions::profile. A scope
// per plan step records a CUDA event pair on the run stream and the host wall
// time; finish() waits for the last event and fills the RunProfile. With no
// RunProfile requested every call is a no-op (the executor pays one branch).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "common/kernel_timer.hpp"
#include "common/text.hpp"

namespace aoti_cuda::runtime {

class Profiler {
 public:
  /// `out` null: disabled. `stream` is the run stream (ignored when !cuda).
  /// `kernels` (with out and cuda): times every kernel launched from this
  /// thread while the profiler lives (common/kernel_timer.hpp).
  Profiler(RunProfile* out, void* stream, bool cuda, bool kernels = false);
  ~Profiler();  ///< destroys the events (never throws)
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  bool enabled() const noexcept { return out_ != nullptr; }
  /// Starts a step; end_step() closes the most recent one.
  void begin_step(std::string what);
  void end_step();
  /// Whether kernel launches are being timed.
  bool times_kernels() const noexcept { return kernel_timer_ != nullptr; }
  /// Waits for the recorded events and writes the profile. Throws Error(kCuda).
  void finish();

  /// Profiles one step for the lifetime of the scope (no-op when disabled).
  class Scope {
   public:
    Scope(Profiler* p, const char* what, const std::string& detail = "") : p_(p && p->enabled() ? p : nullptr) {
      if (p_) p_->begin_step(detail.empty() ? std::string(what) : std::string(what) + detail);
    }
    ~Scope() {
      if (p_) p_->end_step();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Profiler* p_;
  };

 private:
  struct Step {
    std::string what;
    common::Clock::time_point t0;
    double host_ms = 0;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  RunProfile* out_;
  cudaStream_t stream_;
  bool cuda_;
  common::Clock::time_point t_call_;
  std::vector<Step> steps_;
  std::unique_ptr<common::KernelTimer> kernel_timer_;
  std::optional<common::KernelTimer::Scope> kernel_scope_;
};

}  // namespace aoti_cuda::runtime
