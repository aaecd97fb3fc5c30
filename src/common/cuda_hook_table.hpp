// Private: the table of CUDA (and C library) functions the SDK binds model
// libraries to (runtime/cuda_hooks.hpp implements the hooks and the binding;
// docs/cuda-hooks.md is the readers' copy of this table). Pure data, so that
// the reader's checks (format/library_check.cpp, `aoti_cuda inspect`) can say
// which hooks a library will be bound to without loading it.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace aoti_cuda::common::hooks {

/// What a hook is for (groups the table).
enum class HookPurpose {
  kGraphCapture,    ///< event functions made safe inside a CUDA graph capture
  kWeightUpload,    ///< host-to-device copies of the weights routed through pinned staging
  kKernelModules,   ///< kernel images recorded so that they are unloaded with the Module
  kKernelProfile,   ///< launches timed while a call profiles its kernels (also flush recorded weight copies)
  kModelMessages,   ///< the model's own stderr messages kept for the SDK's Error
};

/// One row of the table.
struct HookSpec {
  const char* import;  ///< the imported name it replaces, e.g. "cudaEventRecord"
  HookPurpose purpose;
  const char* why;     ///< one line for docs and inspect
};

// Indices into the table; the order of kHooks below.
enum HookId : int {
  kEventRecord, kEventRecordPtsz, kEventRecordWithFlags, kEventRecordWithFlagsPtsz, kEventQuery, kEventSynchronize,
  kMemcpy, kMemcpyPtds,
  kModuleLoad, kModuleLoadData, kModuleLoadDataEx, kModuleLoadFatBinary, kLibraryLoadData, kLibraryLoadFromFile,
  kLaunchKernel, kLaunchKernelPtsz, kLaunchKernelEx, kLaunchKernelExPtsz,
  kFwrite, kFputs, kFputc, kPutc,
  kHookCount
};

inline constexpr const char* kCaptureWhy =
    "skipped inside a CUDA graph capture (a captured event would make every later query of the model instance fail)";
inline constexpr const char* kQueryWhy =
    "run with the thread's capture mode relaxed inside a graph capture (it only looks at earlier, real runs)";
inline constexpr const char* kMemcpyWhy =
    "copies from the weights blob during a load are recorded and run through pinned staging; any other copy "
    "first carries them out";
inline constexpr const char* kModuleWhy = "kernel images loaded during the Module's container calls are unloaded with it";
inline constexpr const char* kLaunchWhy =
    "timed while a call profiles its kernels; carries out recorded weight copies before the first launch";
inline constexpr const char* kMessageWhy =
    "what the model writes to stderr during a container call is kept for the SDK's Error (and still printed)";

inline constexpr std::array<HookSpec, kHookCount> kHooks = {{
    {"cudaEventRecord", HookPurpose::kGraphCapture, kCaptureWhy},
    {"cudaEventRecord_ptsz", HookPurpose::kGraphCapture, kCaptureWhy},
    {"cudaEventRecordWithFlags", HookPurpose::kGraphCapture, kCaptureWhy},
    {"cudaEventRecordWithFlags_ptsz", HookPurpose::kGraphCapture, kCaptureWhy},
    {"cudaEventQuery", HookPurpose::kGraphCapture, kQueryWhy},
    {"cudaEventSynchronize", HookPurpose::kGraphCapture, kQueryWhy},
    {"cudaMemcpy", HookPurpose::kWeightUpload, kMemcpyWhy},
    {"cudaMemcpy_ptds", HookPurpose::kWeightUpload, kMemcpyWhy},
    {"cuModuleLoad", HookPurpose::kKernelModules, kModuleWhy},
    {"cuModuleLoadData", HookPurpose::kKernelModules, kModuleWhy},
    {"cuModuleLoadDataEx", HookPurpose::kKernelModules, kModuleWhy},
    {"cuModuleLoadFatBinary", HookPurpose::kKernelModules, kModuleWhy},
    {"cuLibraryLoadData", HookPurpose::kKernelModules, kModuleWhy},
    {"cuLibraryLoadFromFile", HookPurpose::kKernelModules, kModuleWhy},
    {"cuLaunchKernel", HookPurpose::kKernelProfile, kLaunchWhy},
    {"cuLaunchKernel_ptsz", HookPurpose::kKernelProfile, kLaunchWhy},
    {"cuLaunchKernelEx", HookPurpose::kKernelProfile, kLaunchWhy},
    {"cuLaunchKernelEx_ptsz", HookPurpose::kKernelProfile, kLaunchWhy},
    {"fwrite", HookPurpose::kModelMessages, kMessageWhy},
    {"fputs", HookPurpose::kModelMessages, kMessageWhy},
    {"fputc", HookPurpose::kModelMessages, kMessageWhy},
    {"putc", HookPurpose::kModelMessages, kMessageWhy},
}};

// Entry points that hand out function pointers at run time: whatever the
// library calls through them bypasses the hooks.static_assert(kHooks.back().import != nullptr, "a row of kHooks is missing");

struct Bypass {
  const char* import;
  const char* consequence;
};
inline constexpr Bypass kBypasses[] = {
    {"cuGetProcAddress", "driver functions it fetches at run time are not hooked: kernels loaded through them stay "
                         "loaded after the Module is destroyed and are missing from kernel profiles"},
    {"cuGetProcAddress_v2", "driver functions it fetches at run time are not hooked: kernels loaded through them stay "
                            "loaded after the Module is destroyed and are missing from kernel profiles"},
    {"cudaGetDriverEntryPoint", "driver functions it fetches at run time are not hooked: kernels loaded through them "
                                "stay loaded after the Module is destroyed and are missing from kernel profiles"},
    {"cudaGetDriverEntryPointByVersion", "driver functions it fetches at run time are not hooked: kernels loaded "
                                         "through them stay loaded after the Module is destroyed and are missing "
                                         "from kernel profiles"},
    {"cudaLaunchKernel", "kernels it launches through the CUDA runtime API are missing from kernel profiles"},
};

/// The row of `name` (an imported symbol, without "@VERSION"), or -1.
int find_hook(const std::string& name) noexcept;

/// The hooked imports among `undefined_symbols` (sorted, unique).
std::vector<std::string> hooked_imports(const std::vector<std::string>& undefined_symbols);

/// Imports that bypass the hooks (the library could fetch unhooked entry
/// points at run time), each with what that costs; empty when none.
std::vector<std::string> bypass_warnings(const std::vector<std::string>& undefined_symbols);

}  // namespace aoti_cuda::common::hooks
