#include "runtime/driver_modules.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "aoti_cuda/export.h"
#include "common/cuda.hpp"
#include "common/env.hpp"
#include "common/kernel_timer.hpp"

namespace aoti_cuda::runtime {
namespace {

// Driver types, declared here so that no driver header or library is needed.
using CUresult = int;
using CUmodule = void*;
constexpr CUresult kCudaErrorNotInitialized = 3;  // CUDA_ERROR_NOT_INITIALIZED

thread_local ModuleTracker* t_tracker = nullptr;

bool tracking_enabled() {
  static const bool enabled = !env_flag("AOTI_CUDA_NO_MODULE_TRACKING");
  return enabled;
}

template <typename Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(common::driver_symbol(name));
}

}  // namespace

void ModuleTracker::record(void* module) {
  std::lock_guard<std::mutex> lock(mu_);
  modules_.push_back(module);
}

std::size_t ModuleTracker::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return modules_.size();
}

void ModuleTracker::unload_all() noexcept {
  std::vector<void*> modules;
  {
    std::lock_guard<std::mutex> lock(mu_);
    modules.swap(modules_);
  }
  if (modules.empty()) return;
  using UnloadFn = CUresult (*)(CUmodule);
  static const UnloadFn unload = real<UnloadFn>("cuModuleUnload");
  if (unload == nullptr) return;
  for (void* m : modules) (void)unload(m);
}

TrackModulesScope::TrackModulesScope(ModuleTracker* tracker) noexcept : previous_(t_tracker) {
  t_tracker = tracking_enabled() ? tracker : nullptr;
}

TrackModulesScope::~TrackModulesScope() { t_tracker = previous_; }

}  // namespace aoti_cuda::runtime

// Pass-through definitions the model libraries bind to (see the header).
extern "C" {

AOTI_CUDA_SHIM_API int cuModuleLoadData(void** module, const void* image) {
  using Fn = int (*)(void**, const void*);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cuModuleLoadData");
  if (fn == nullptr) return aoti_cuda::runtime::kCudaErrorNotInitialized;
  const int rc = fn(module, image);
  if (rc == 0 && module != nullptr && aoti_cuda::runtime::t_tracker != nullptr) {
    aoti_cuda::runtime::t_tracker->record(*module);
  }
  return rc;
}

AOTI_CUDA_SHIM_API int cuModuleLoad(void** module, const char* fname) {
  using Fn = int (*)(void**, const char*);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cuModuleLoad");
  if (fn == nullptr) return aoti_cuda::runtime::kCudaErrorNotInitialized;
  const int rc = fn(module, fname);
  if (rc == 0 && module != nullptr && aoti_cuda::runtime::t_tracker != nullptr) {
    aoti_cuda::runtime::t_tracker->record(*module);
  }
  return rc;
}

// Kernel launches forward unchanged; only while a call profiles its kernels
// (RunOptions::profile_kernels) is each one bracketed by CUDA events
// (common/kernel_timer.hpp). The check is one thread-local load.
AOTI_CUDA_SHIM_API int cuLaunchKernel(void* f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                                      unsigned block_y, unsigned block_z, unsigned shared_bytes, void* stream,
                                      void** params, void** extra) {
  using Fn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                     void**);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cuLaunchKernel");
  if (fn == nullptr) return aoti_cuda::runtime::kCudaErrorNotInitialized;
  aoti_cuda::common::KernelTimer* timer = aoti_cuda::common::KernelTimer::current();
  if (timer == nullptr) {
    return fn(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream, params, extra);
  }
  aoti_cuda::common::KernelTimer::Launch timed(timer, f, nullptr, stream);
  const int rc = fn(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream, params, extra);
  timed.done(rc == 0);
  return rc;
}

}  // extern "C"
