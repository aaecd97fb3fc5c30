#include "runtime/driver_modules.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "common/cuda.hpp"
#include "common/env.hpp"

namespace aoti_cuda::runtime {
namespace {

// Driver types, declared here so that no driver header or library is needed.
using CUresult = int;
using CUmodule = void*;
using CUlibrary = void*;

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

ModuleTracker* ModuleTracker::current() noexcept { return t_tracker; }

void ModuleTracker::record(void* module) {
  std::lock_guard<std::mutex> lock(mu_);
  modules_.push_back(module);
}

void ModuleTracker::record_library(void* library) {
  std::lock_guard<std::mutex> lock(mu_);
  libraries_.push_back(library);
}

std::size_t ModuleTracker::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return modules_.size() + libraries_.size();
}

void ModuleTracker::unload_all() noexcept {
  std::vector<void*> modules, libraries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    modules.swap(modules_);
    libraries.swap(libraries_);
  }
  if (!modules.empty()) {
    using UnloadFn = CUresult (*)(CUmodule);
    static const UnloadFn unload = real<UnloadFn>("cuModuleUnload");
    if (unload != nullptr) {
      for (void* m : modules) (void)unload(m);
    }
  }
  if (!libraries.empty()) {
    using UnloadFn = CUresult (*)(CUlibrary);
    static const UnloadFn unload = real<UnloadFn>("cuLibraryUnload");
    if (unload != nullptr) {
      for (void* l : libraries) (void)unload(l);
    }
  }
}

TrackModulesScope::TrackModulesScope(ModuleTracker* tracker) noexcept : previous_(t_tracker) {
  t_tracker = tracking_enabled() ? tracker : nullptr;
}

TrackModulesScope::~TrackModulesScope() { t_tracker = previous_; }

}  // namespace aoti_cuda::runtime
