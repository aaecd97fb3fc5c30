// Private runtime: running one call of a loaded method.
//
// A call leases a slot of the method, makes the device and the run stream
// current (the caller's RunOptions::stream, else the slot's own stream, also
// installed as the shim's current stream so everything the model allocates is
// ordered on it), then walks the plan steps over a value table held in a
// RunState: delegate calls (inputs converted to model-owned handles, host
// inputs staged through the slot's pinned buffer), moves, host<->device copies.
// Outputs are moved where RunOptions::outputs wants them.
#pragma once

#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "runtime/method.hpp"

namespace aoti_cuda::runtime {

/// Runs `m` once with `inputs` on `target` (the Module's device). Thread-safe
/// per method up to its slot count (further callers wait for a slot).
std::vector<Tensor> execute_method(Method& m, const TargetDevice& target, const std::vector<Tensor>& inputs,
                                   const RunOptions& options);

/// Throws kInvalidArgument unless `inputs` match the method's input specs
/// (count, dtype, rank, sizes within dynamic upper bounds, data present).
void validate_inputs(const MethodSpec& ms, const std::vector<Tensor>& inputs);

}  // namespace aoti_cuda::runtime
