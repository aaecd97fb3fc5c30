// Private: the CUDA (and C library) functions the SDK puts between a model
// library and the libraries it imports them from — the one module that owns
// every interposed function. docs/cuda-hooks.md is the table for readers.
//
// Why hooks at all: the AOTInductor runtime inside a model library calls a
// few CUDA functions whose default behaviour breaks what the SDK promises
// (graph capture, pinned weight uploads, unloading a model's kernels, kernel
// profiles, error messages). Each hook adds that one behaviour and otherwise
// forwards to the function the import would have reached.
//
// How they are bound: NOT through the process's symbol search order (which
// an application or `import torch` may have filled with libcudart/libcuda
// first). After dlopen, the loader rewrites the library's own import slots
// (GOT entries, found from its relocation tables by format::import_slots) to
// point at the hooks, and reads each slot back. The hook names are never
// exported, so nothing else in the process is affected, and a load can never
// end up half-bound: a slot that cannot be written fails the load.
//
// Imports that would bypass the hooks in a way the SDK cannot bind (driver
// entry points fetched at run time) are reported as warnings with their
// consequence (LoadStats::libraries, `aoti_cuda inspect`).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "aoti_cuda/program.hpp"
#include "common/cuda_hook_table.hpp"

namespace aoti_cuda::runtime {

/// The SDK's hook for `import` (what a bound library calls), or nullptr when
/// the table has no such row. For tests and diagnostics.
void* hook_function(const char* import) noexcept;

/// Result of binding one loaded library.
struct HookBinding {
  std::vector<std::string> bound;     ///< hooked imports whose every slot now holds the SDK's hook (sorted)
  std::vector<std::string> warnings;  ///< common::hooks::bypass_warnings of its imports (the loader fills them)
};

/// Rewrites the import slots of the library `handle` (dlopen'ed from `so`)
/// for every hooked import, then reads them back. Throws Error(kLoad) naming
/// the import and the consequence when a slot cannot be written or does not
/// hold the hook afterwards, and Error(kInvalidProgram) for malformed
/// relocation tables. `label` names the library in messages.
HookBinding bind_hooks(void* handle, ByteView so, const std::string& label);

/// Keeps what the model library writes to stderr on the calling thread while
/// alive (it still reaches stderr too), so that a failed container call can
/// say why in its Error. Nestable; the innermost scope collects.
class ModelMessageScope {
 public:
  ModelMessageScope() noexcept;
  ~ModelMessageScope();
  ModelMessageScope(const ModelMessageScope&) = delete;
  ModelMessageScope& operator=(const ModelMessageScope&) = delete;
};

/// The text the model wrote to stderr in the calling thread's most recent
/// ModelMessageScope (trimmed, at most ~2 KB; "" when none).
std::string last_model_message();

}  // namespace aoti_cuda::runtime
