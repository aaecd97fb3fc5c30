// Private: reclaiming the CUDA modules a model library loads.
//
// The AOTInductor runtime inside a model .so loads its kernels with
// cuModuleLoadData (or cuModuleLoad) on their first launch and never unloads
// them, so every container would leak its kernel images in device memory
// (docs/shim-abi.md, "Kernel modules"). The model library's imports of the
// module and library loaders are bound to the SDK's hooks
// (runtime/cuda_hooks.hpp): while a ModuleTracker is active on the calling
// thread (around the container calls the runtime makes), every module or
// library loaded is recorded, and the Module unloads them after deleting the
// container. Outside a tracked call the hooks forward unchanged to the driver.
//
// AOTI_CUDA_NO_MODULE_TRACKING=1 turns the recording off (forwarding stays).
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

  /// The calling thread's tracker (set by TrackModulesScope), or nullptr.
  static ModuleTracker* current() noexcept;

  void record(void* module);            ///< a CUmodule
  void record_library(void* library);   ///< a CUlibrary
  /// Modules and libraries recorded.
  std::size_t size() const;
  /// cuModuleUnload / cuLibraryUnload everything recorded (the caller makes
  /// the device's primary context current). Best effort, never throws.
  void unload_all() noexcept;

 private:
  mutable std::mutex mu_;
  std::vector<void*> modules_;
  std::vector<void*> libraries_;
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
