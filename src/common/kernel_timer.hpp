// Private: per-kernel GPU times of one call (RunOptions::profile_kernels).
//
// While a KernelTimer is current on a thread, every kernel launched from that
// thread through libaoti_cuda's pass-through cuLaunchKernel (the model
// libraries' Triton kernels; runtime/driver_modules.cpp) or by one of the
// shim's own ops (KernelTimer::Launch around its launch) gets a CUDA event
// recorded on its stream before and after it. finish() waits for the events
// and sums the time per kernel name. Two event records per launch cost the
// host a few microseconds each, so this is for finding where GPU time goes,
// not for timing a call.
//
// Thread-safety: a timer belongs to the thread that made it current.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace aoti_cuda::common {

/// GPU time of the launches of one kernel name.
struct KernelTime {
  std::string name;
  int launches = 0;
  double gpu_ms = 0;
};

class KernelTimer {
 public:
  KernelTimer() = default;
  ~KernelTimer();  ///< destroys the events (never throws)
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  /// The calling thread's current timer, or nullptr (the fast path of every hook).
  static KernelTimer* current() noexcept;

  /// Makes `timer` current on the calling thread for the scope's lifetime.
  class Scope {
   public:
    explicit Scope(KernelTimer* timer) noexcept;
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    KernelTimer* previous_;
  };

  /// Times one launch on `stream` for its lifetime: construct it just before
  /// the launch, call done(launched) just after. `function` is a driver
  /// CUfunction (named with cuFuncGetName at finish()), or null with `label`
  /// naming the kernel. No-op when `timer` is null. Never throws: a launch
  /// whose events cannot be recorded is left out.
  class Launch {
   public:
    Launch(KernelTimer* timer, const void* function, const char* label, void* stream) noexcept;
    void done(bool launched) noexcept;
    ~Launch();  ///< done(false) if done() was not called (the launch threw)

   private:
    KernelTimer* timer_;
    cudaStream_t stream_ = nullptr;
    std::size_t index_ = 0;  // of this launch's record
    bool open_ = false;
  };

  /// Waits for every recorded event and returns the time per kernel name,
  /// largest total first. Throws Error(kCuda) when waiting fails.
  std::vector<KernelTime> finish();

 private:
  struct Record {
    const void* function = nullptr;
    const char* label = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  std::vector<Record> records_;
};

/// The name of a driver CUfunction (cuFuncGetName, CUDA 12.3+), or
/// "kernel 0x..." when the driver cannot say.
std::string kernel_function_name(const void* function);

}  // namespace aoti_cuda::common
