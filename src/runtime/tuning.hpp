// Private runtime: TuningOptions (module.hpp), resolved and handed to the
// parts of the SDK they tune.
//
// resolve_tuning() (tuning.cpp) is the one place that reads the tuning
// fields' environment variables (through common/env.hpp) and checks both the
// fields and the variables; Module loads call it once, before anything else,
// and keep the result (Module::tuning()). Every other part reads the
// resolved values it is handed: the weights upload (upload_options), the
// call slots' block caches (block_cache_bytes), CUDA graph copy nodes
// (MethodGraphs::small_copy_kernels) and the operator shims, which read
// theirs through the per-call OpSettingsScope (shim/op_settings.hpp).
#pragma once

#include <cstddef>

#include "aoti_cuda/module.hpp"
#include "runtime/weight_upload.hpp"
#include "shim/op_settings.hpp"

namespace aoti_cuda::runtime {

/// The weights upload's threads and staging memory of resolved tuning.
StagedUploadOptions upload_options(const TuningOptions& resolved);
/// The operator shims' settings of resolved tuning.
shim::OpSettings op_settings_of(const TuningOptions& resolved);
/// A call slot's block cache capacity in bytes, of resolved tuning.
std::size_t block_cache_bytes(const TuningOptions& resolved);

}  // namespace aoti_cuda::runtime
