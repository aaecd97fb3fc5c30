// Running one call of a loaded method. See executor.hpp.
#include "runtime/executor.hpp"

#include <algorithm>
#include <exception>
#include <memory>

#include "common/cuda.hpp"
#include "runtime/driver_modules.hpp"
#include "runtime/profiler.hpp"
#include "runtime/state.hpp"
#include "runtime/tensor_util.hpp"
#include "shim/allocator.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::check_cuda;

// A value of the method's value table during one call.
struct Value {
  Tensor tensor;
  AtenTensorHandle handle = nullptr;  // the shim handle owned by tensor's owner, when it came from the model
};

// Everything one call of a method works with, passed to each plan step.
struct RunState {
  RunState(Method& m, const TargetDevice& t, Slot& s) : method(m), target(t), slot(s) {}

  Method& method;
  const TargetDevice& target;
  Slot& slot;
  void* stream = nullptr;            // the run stream (nullptr on CPU modules)
  Profiler* profiler = nullptr;      // RunOptions::profile's recorder (disabled when not asked for)
  std::vector<Value> values;         // the method's value table
  std::size_t staging_offset = 0;    // next free byte of slot.pinned for host inputs
  bool staged = false;               // copies out of slot.pinned were queued on `stream`

  const Device& device() const { return target.device; }
};

std::string spec_str(const TensorSpec& s) {
  return std::string(dtype_name(s.dtype)) + runtime::shape_str(s.sizes) + (s.dynamic ? " (dynamic, upper bounds)" : "");
}

std::string tensor_str(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + runtime::shape_str(t.shape()) + " on " + t.device().str();
}

// A new handle on the module's device for the delegate (Run steals it).
AtenTensorHandle to_model_input(RunState& run, const Value& v, const TensorSpec& spec, const std::string& what) {
  const Device& device = run.device();
  void* stream = run.stream;
  const Tensor& t = v.tensor;
  if (!t.defined()) throw Error(ErrorCode::kInternal, what + ": the value was never produced");
  const int32_t dtype = static_cast<int32_t>(t.dtype());
  const int32_t dev_type = device.is_cuda() ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
  const int32_t dev_index = device.is_cuda() ? device.index : 0;
  const std::vector<int64_t> want_strides = runtime::strides_for_dim_order(t.shape(), spec.dim_order);
  const int64_t ndim = t.dim();
  AtenTensorHandle h = nullptr;
  auto shim_fail = [&](const char* fn) {
    return Error(model_failure_code(), what + ": " + fn + " failed: " + aoti_cuda_shim_last_error());
  };

  if (t.device() == device && runtime::same_layout(t.shape(), t.strides(), want_strides)) {
    if (v.handle != nullptr) {
      // Shares the refcounted storage: safe even if the model returns it as an output.
      if (aoti_torch_new_tensor_handle(v.handle, &h) != AOTI_TORCH_SUCCESS) throw shim_fail("aoti_torch_new_tensor_handle");
    } else if (aoti_torch_create_tensor_from_blob_v2(t.data(), ndim, t.shape().data(), t.strides().data(), 0, dtype,
                                                     dev_type, dev_index, &h, aoti_torch_layout_strided(), nullptr,
                                                     0) != AOTI_TORCH_SUCCESS) {
      throw shim_fail("aoti_torch_create_tensor_from_blob_v2");
    }
    return h;
  }
  // Copy into a model-owned tensor in the layout the model was compiled for.
  if (aoti_torch_empty_strided(ndim, t.shape().data(), want_strides.data(), dtype, dev_type, dev_index, &h) !=
      AOTI_TORCH_SUCCESS) {
    throw shim_fail("aoti_torch_empty_strided");
  }
  try {
    void* dst = nullptr;
    if (aoti_torch_get_data_ptr(h, &dst) != AOTI_TORCH_SUCCESS) throw shim_fail("aoti_torch_get_data_ptr");
    const std::size_t n = t.nbytes();
    const bool contiguous_target = runtime::same_layout(t.shape(), want_strides, contiguous_strides(t.shape()));
    if (device.is_cuda() && t.device().is_cpu() && contiguous_target && n > 0) {
      // Host -> pinned staging -> async H2D on the run stream.
      const std::size_t offset = (run.staging_offset + 255) / 256 * 256;
      char* pinned = static_cast<char*>(run.slot.pinned);
      if (pinned == nullptr || offset + n > run.slot.pinned_capacity) {
        // Not budgeted up front (a host value made mid-plan): copy synchronously.
        Tensor target = Tensor::from_blob(dst, t.shape(), t.dtype(), device, want_strides);
        target.copy_from(t, stream);
        return h;
      }
      Tensor staging = Tensor::from_blob(pinned + offset, t.shape(), t.dtype(), Device::cpu());
      staging.copy_from(t);  // host -> host, re-strides if needed
      check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst, pinned + offset, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream))),
                 "cudaMemcpyAsync (input upload)");
      run.staging_offset = offset + n;
      run.staged = true;
    } else if (n > 0) {
      Tensor target = Tensor::from_blob(dst, t.shape(), t.dtype(), device, want_strides);
      target.copy_from(t, stream);
    }
  } catch (...) {
    (void)aoti_torch_delete_tensor_object(h);
    throw;
  }
  return h;
}

Value wrap_output(AtenTensorHandle h, const std::string& what) {
  auto owner = own_handle(h);  // from here on the handle is released whatever happens
  void* data = nullptr;
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0, dev_type = 0, dev_index = 0;
  if (aoti_torch_get_data_ptr(h, &data) != AOTI_TORCH_SUCCESS || aoti_torch_get_dim(h, &dim) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_sizes(h, &sizes) != AOTI_TORCH_SUCCESS || aoti_torch_get_strides(h, &strides) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_dtype(h, &dtype) != AOTI_TORCH_SUCCESS || aoti_torch_get_device_type(h, &dev_type) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_index(h, &dev_index) != AOTI_TORCH_SUCCESS) {
    throw Error(ErrorCode::kModel, what + ": reading the output tensor failed: " + aoti_cuda_shim_last_error());
  }
  if (!is_valid_dtype(dtype) || dim < 0 || dim > 64) {
    throw Error(ErrorCode::kModel, what + ": the model returned a tensor with dtype code " + std::to_string(dtype) +
                                       " and " + std::to_string(dim) + " dimensions");
  }
  const Device dev = dev_type == aoti_torch_device_type_cuda() ? Device::cuda(dev_index) : Device::cpu();
  std::vector<int64_t> shape(sizes, sizes + dim), st(strides, strides + dim);
  Value v;
  v.tensor = Tensor::from_blob(data, std::move(shape), static_cast<DType>(dtype), dev, std::move(owner), std::move(st));
  v.handle = h;
  return v;
}

std::string run_failure_hint(const TargetDevice& target, const Delegate& d) {
  const int gpu_sm = target.gpu_sm;
  if (!target.device.is_cuda() || gpu_sm <= 0) return "";
  const cudaError_t err = cudaGetLastError();
  const bool image_error = err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx ||
                           err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidKernelImage;
  const CudaKernelInfo& k = d.library->kernels();
  const bool mismatch = k.fatbins > 0 && !k.runs_on(gpu_sm);
  if (!image_error && !mismatch) return "";
  return "; the embedded kernels were built for another GPU architecture (this GPU is sm_" + std::to_string(gpu_sm) +
         ", the library holds " + k.describe() + ")";
}

// Converts the call's inputs to model-owned handles. On failure the handles
// made so far are released and queued staging copies are accounted for.
void make_inputs(RunState& run, const Delegate& d, const std::vector<int32_t>& args, std::vector<AtenTensorHandle>& ins) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  try {
    for (std::size_t i = 0; i < d.n_in; ++i) {
      const auto vi = static_cast<std::size_t>(args[i]);
      ins[i] = to_model_input(run, run.values[vi], run.method.spec->values[vi].tensor,
                              d.label + " input " + std::to_string(i));
    }
    // Inside the try: if recording the staging event fails, the handles made
    // above must still be released (found by fault injection on the GPU).
    if (run.staged) run.slot.staging_used(stream);
  } catch (...) {
    for (AtenTensorHandle& h : ins) {
      if (h != nullptr) (void)aoti_torch_delete_tensor_object(h);
      h = nullptr;
    }
    if (run.staged) {
      // Copies already queued still read the pinned buffer: the next call must wait for them.
      try {
        run.slot.staging_used(stream);
      } catch (...) {
        (void)cudaStreamSynchronize(stream);
      }
    }
    throw;
  }
}

// Takes ownership of the outputs of a successful Run (a handle may fill several
// output slots) and stores them in the value table.
void take_outputs(RunState& run, const Delegate& d, const std::vector<int32_t>& args,
                  const std::vector<AtenTensorHandle>& outs) {
  std::vector<std::pair<AtenTensorHandle, std::size_t>> taken;  // handle -> output index holding its Value
  std::vector<Value> produced(d.n_out);
  std::exception_ptr failure;
  for (std::size_t j = 0; j < d.n_out; ++j) {
    AtenTensorHandle h = outs[j];
    if (h == nullptr) continue;
    auto it = std::find_if(taken.begin(), taken.end(), [&](const auto& p) { return p.first == h; });
    if (it != taken.end()) {
      produced[j] = produced[it->second];
      continue;
    }
    taken.emplace_back(h, j);
    try {
      produced[j] = wrap_output(h, d.label + " output " + std::to_string(j));
    } catch (...) {
      if (!failure) failure = std::current_exception();  // keep going so every handle gets an owner
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (std::size_t j = 0; j < d.n_out; ++j) {
    if (!produced[j].tensor.defined()) {
      throw Error(ErrorCode::kModel, d.label + ": output " + std::to_string(j) + " was not written by the model");
    }
    run.values[static_cast<std::size_t>(args[d.n_in + j])] = produced[j];
  }
}

void run_delegate(RunState& run, const PlanStep& step) {
  Delegate& d = *run.method.delegates[static_cast<std::size_t>(step.delegate)];
  // This call's arguments (a delegate may be called more than once).
  const std::vector<int32_t>& args = step.args.empty() ? d.spec->args : step.args;
  std::vector<AtenTensorHandle> ins(d.n_in, nullptr), outs(d.n_out, nullptr);
  const std::string which =  // step names only when profiling: no string work on the normal path
      run.profiler->enabled() ? std::to_string(step.delegate) + " (" + run.method.spec->name + ")" : std::string();
  {
    Profiler::Scope p(run.profiler, "stage inputs: delegate ", which);
    make_inputs(run, d, args, ins);
  }
  aoti_cuda_shim_clear_error();
  const auto& api = d.library->api();
  int32_t rc = 0;
  {
    Profiler::Scope p(run.profiler, "run: delegate ", which);
    runtime::TrackModulesScope track(&d.kernel_modules);  // kernels load on their first launch
    rc = api.run(d.container, ins.data(), ins.size(), outs.data(), outs.size(), run.stream, nullptr);
  }
  if (rc != 0) {
    const std::string detail = model_failure_detail(api);
    const ErrorCode code = model_failure_code();
    for (AtenTensorHandle h : ins) {  // those not stolen before the failure
      if (h != nullptr) (void)aoti_torch_delete_tensor_object(h);
    }
    std::vector<AtenTensorHandle> seen;
    for (AtenTensorHandle h : outs) {
      if (h != nullptr && std::find(seen.begin(), seen.end(), h) == seen.end()) {
        seen.push_back(h);
        (void)aoti_torch_delete_tensor_object(h);
      }
    }
    throw Error(code, d.label + ": AOTInductorModelContainerRun failed: " + detail + run_failure_hint(run.target, d));
  }
  // Success: every input was stolen.
  Profiler::Scope p(run.profiler, "outputs of delegate ", which);
  take_outputs(run, d, args, outs);
}


// A copy step (et_copy h2d/d2h): the value moved to the module's device or the host.
void run_copy(RunState& run, const PlanStep& step) {
  const Value& src = run.values[static_cast<std::size_t>(step.args[0])];
  if (!src.tensor.defined()) {
    throw Error(ErrorCode::kInternal, "method '" + run.method.spec->name + "': copy step reads value " +
                                          std::to_string(step.args[0]) + " before it is produced");
  }
  const Device target = step.kind == PlanStep::Kind::kHostToDevice ? run.device() : Device::cpu();
  Value& dst = run.values[static_cast<std::size_t>(step.args[1])];
  if (src.tensor.device() == target) {
    dst = src;
  } else {
    Value moved;
    moved.tensor = src.tensor.to(target, run.stream);
    dst = std::move(moved);
  }
}

void run_plan(RunState& run) {
  for (const PlanStep& step : run.method.spec->plan) {
    switch (step.kind) {
      case PlanStep::Kind::kDelegate:
        run_delegate(run, step);
        break;
      case PlanStep::Kind::kMove:
        run.values[static_cast<std::size_t>(step.args[1])] = run.values[static_cast<std::size_t>(step.args[0])];
        break;
      case PlanStep::Kind::kHostToDevice:
      case PlanStep::Kind::kDeviceToHost: {
        Profiler::Scope p(run.profiler, step.kind == PlanStep::Kind::kHostToDevice ? "h2d copy" : "d2h copy");
        run_copy(run, step);
        break;
      }
    }
  }
}

// The method's outputs, on the device RunOptions::outputs asks for.
std::vector<Tensor> collect_outputs(const RunState& run, const std::vector<Tensor>& inputs, const RunOptions& ro) {
  const MethodSpec& ms = *run.method.spec;
  const bool cuda = run.device().is_cuda();
  bool want_device = false;
  if (cuda) {
    if (ro.outputs == OutputLocation::kDevice) want_device = true;
    else if (ro.outputs == OutputLocation::kSameAsInputs) want_device = !inputs.empty() && inputs[0].device().is_cuda();
  }
  std::vector<Tensor> result;
  result.reserve(ms.outputs.size());
  for (std::size_t i = 0; i < ms.outputs.size(); ++i) {
    const Tensor& t = run.values[static_cast<std::size_t>(ms.outputs[i].value_index)].tensor;
    if (!t.defined()) {
      throw Error(ErrorCode::kInternal, "method '" + ms.name + "': output " + std::to_string(i) + " (value " +
                                            std::to_string(ms.outputs[i].value_index) + ") was never produced");
    }
    if (!cuda || t.device().is_cuda() == want_device) {
      result.push_back(t);
    } else {
      result.push_back(t.to(want_device ? run.device() : Device::cpu(), run.stream));
    }
  }
  return result;
}

// Waits for the slot's own stream, then moves the frees of returned outputs off it.
void finish_on_own_stream(const RunState& run) {
  const MethodSpec& ms = *run.method.spec;
  check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(static_cast<cudaStream_t>(run.stream))), ("running method '" + ms.name + "'").c_str());
  // The shim frees a model-made tensor (cudaFreeAsync) on the stream it was
  // allocated on: here the slot's stream, which dies with the Module while
  // returned outputs may live on. The run is complete, so release them on
  // the legacy default stream instead, which outlives every Module.
  for (const ValueSpec& out : ms.outputs) {
    const AtenTensorHandle h = run.values[static_cast<std::size_t>(out.value_index)].handle;
    if (h != nullptr) (void)shim::set_storage_free_stream(h, nullptr);
  }
}

}  // namespace

void validate_inputs(const MethodSpec& ms, const std::vector<Tensor>& inputs) {
  if (inputs.size() != ms.inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, "method '" + ms.name + "' takes " + std::to_string(ms.inputs.size()) +
                                                 " input(s), got " + std::to_string(inputs.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorSpec& want = ms.inputs[i].tensor;
    const std::string where = "method '" + ms.name + "' input " + std::to_string(i);
    if (!t.defined()) throw Error(ErrorCode::kInvalidArgument, where + ": the tensor is undefined");
    if (t.dtype() != want.dtype) {
      throw Error(ErrorCode::kInvalidArgument, where + ": dtype mismatch: expected " + spec_str(want) + ", got " + tensor_str(t));
    }
    if (t.shape().size() != want.sizes.size()) {
      throw Error(ErrorCode::kInvalidArgument, where + ": rank mismatch: expected " + std::to_string(want.sizes.size()) +
                                                   "-d " + spec_str(want) + ", got " + std::to_string(t.dim()) + "-d " + tensor_str(t));
    }
    for (std::size_t d = 0; d < want.sizes.size(); ++d) {
      const int64_t got = t.shape()[d];
      const bool ok = want.dynamic ? (got >= 0 && got <= want.sizes[d]) : got == want.sizes[d];
      if (!ok) {
        throw Error(ErrorCode::kInvalidArgument,
                    where + ": dimension " + std::to_string(d) + " is " + std::to_string(got) + ", expected " +
                        (want.dynamic ? "at most " : "") + std::to_string(want.sizes[d]) + " (expected " +
                        spec_str(want) + ", got " + tensor_str(t) + ")");
      }
    }
    if (t.numel() > 0 && t.data() == nullptr) throw Error(ErrorCode::kInvalidArgument, where + ": null data");
  }
}

std::vector<Tensor> execute_method(Method& m, const TargetDevice& target, const std::vector<Tensor>& inputs,
                                   const RunOptions& ro) {
  const MethodSpec& ms = *m.spec;
  validate_inputs(ms, inputs);
  SlotLease lease(m);
  RunState run(m, target, lease.slot());
  common::DeviceGuard guard(target.ordinal());
  std::unique_ptr<CurrentStreamScope> stream_scope;
  const bool own_stream = ro.stream == nullptr;
  if (target.device.is_cuda()) {
    run.stream = own_stream ? static_cast<void*>(run.slot.own_stream()) : ro.stream;
    stream_scope = std::make_unique<CurrentStreamScope>(target.device.index, run.stream);
    // Pinned staging for every host input, budgeted up front (256-byte aligned pieces).
    std::size_t staging_bytes = 0;
    for (const Tensor& t : inputs) {
      if (t.device().is_cpu()) staging_bytes += (t.nbytes() + 255) / 256 * 256;
    }
    if (staging_bytes > 0) (void)run.slot.staging(staging_bytes);
  }
  // Mutable state: the selected session's copy in place, this call ordered
  // after the previous stateful one (runtime/state.hpp). Held until return.
  const StateManager::Lease state_lease = StateManager::enter(m, ro.session, run.stream);
  run.values.resize(ms.values.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    run.values[static_cast<std::size_t>(ms.inputs[i].value_index)].tensor = inputs[i];
  }
  Profiler profiler(ro.profile, run.stream, target.device.is_cuda());
  run.profiler = &profiler;
  run_plan(run);
  std::vector<Tensor> result;
  {
    Profiler::Scope p(&profiler, "collect outputs");
    result = collect_outputs(run, inputs, ro);
  }
  profiler.finish();
  if (target.device.is_cuda() && own_stream) finish_on_own_stream(run);
  return result;
}

}  // namespace aoti_cuda::runtime
