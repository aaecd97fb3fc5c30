// Private runtime: delivering a call's outputs — new tensors where
// RunOptions::outputs wants them, or the caller's bound tensors
// (Module::execute_into). Device->host downloads of one call go through the
// slot's pinned output buffer: all copies queued, one synchronization, then
// host memcpy.
#pragma once

#include <vector>

#include "runtime/run_state.hpp"

namespace aoti_cuda::runtime {

/// Throws kInvalidArgument (naming the output) unless `bound` has one defined,
/// contiguous tensor per output of the method's dtype and rank, with the
/// static sizes of non-dynamic outputs, on the host or the Module's device
/// (host only for CPU modules).
void validate_bound_outputs(const MethodSpec& ms, const TargetDevice& target, const std::vector<Tensor>& bound);

/// The outputs for execute(): on the device when `want_device`, else on the
/// host (CPU modules: where the model produced them). With `copy_device`
/// (the produced tensors are a graph's fixed buffers), device results are
/// copied into new model-owned tensors, kept in run.values at the outputs'
/// value indexes. Host results are complete on return.
std::vector<Tensor> deliver_outputs(RunState& run, const ProducedOutputs& produced, bool want_device, bool copy_device);

/// A new model-owned device tensor shaped like `like` for output `index`,
/// kept in run.values at the output's value index (like deliver_outputs'
/// copies); its contents are for the caller to write.
Tensor fresh_device_output(RunState& run, const Tensor& like, std::size_t index);

/// Copies the produced outputs into `bound` (validated before the run; the
/// shapes are checked here), queued on the run stream; host ones complete on return.
void write_bound_outputs(RunState& run, const ProducedOutputs& produced, const std::vector<Tensor>& bound);

}  // namespace aoti_cuda::runtime
