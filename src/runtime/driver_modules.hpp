// Private: reclaiming the CUDA modules a model library loads.
//
// The AOTInductor runtime inside a model .so loads its kernels with
// cuModuleLoadData (or cuModuleLoad) on their first launch and never unloads
// them, so every container would leak its kernel images in device memory
// (docs/shim-abi.md, "Kernel modules"). The model resolves these driver functions from the
// global scope, like the shim, so libaoti_cuda exports pass-through
// definitions of them: while a ModuleTracker is active on the calling thread
// (around the container calls the runtime makes), every module loaded is
// recorded, and the Module unloads them after deleting the container.
// Outside a tracked call the functions forward unchanged to libcuda.so.1
// (opened lazily; libaoti_cuda does not link the driver).
//
// AOTI_CUDA_NO_MODULE_TRACKING=1 turns the recording off (forwarding stays).
//
// cuLaunchKernel is passed through the same way, so that a call that
// profiles its kernels (common/kernel_timer.hpp) can time each launch.
#pragma once

#include <mutex>
#include <vector>

namespace aoti_cuda::runtime {

/// Modules loaded during tracked calls of one delegate (thread-safe).
class ModuleTracker {
 public:
  ModuleTracker() = default;
  ModuleTracker(const ModuleTracker&) = delete;
  ModuleTracker& operator=(const ModuleTracker&) = delete;

  void record(void* module);
  std::size_t size() const;
  /// cuModuleUnload every recorded module (the caller makes the device's
  /// primary context current). Best effort, never throws.
  void unload_all() noexcept;

 private:
  mutable std::mutex mu_;
  std::vector<void*> modules_;
};

/// Makes `tracker` the calling thread's recorder for its lifetime.
class TrackModulesScope {
 public:
  explicit TrackModulesScope(ModuleTracker* tracker) noexcept;
  ~TrackModulesScope();
  TrackModulesScope(const TrackModulesScope&) = delete;
  TrackModulesScope& operator=(const TrackModulesScope&) = delete;

 private:
  ModuleTracker* previous_;
};

}  // namespace aoti_cuda::runtime
