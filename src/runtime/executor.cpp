// Running one call of a loaded method. See executor.hpp.
#include "runtime/executor.hpp"
#include "runtime/cuda_hooks.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <optional>

#include "common/cuda.hpp"
#include "runtime/driver_modules.hpp"
#include "runtime/graph_cache.hpp"
#include "runtime/outputs.hpp"
#include "runtime/profiler.hpp"
#include "runtime/run_state.hpp"
#include "runtime/state.hpp"
#include "runtime/tensor_util.hpp"
#include "shim/allocator.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::check_cuda;

std::string spec_str(const TensorSpec& s) {
  return std::string(dtype_name(s.dtype)) + runtime::shape_str(s.sizes) + (s.dynamic ? " (dynamic, upper bounds)" : "");
}

std::string tensor_str(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + runtime::shape_str(t.shape()) + " on " + t.device().str();
}

// strides == strides_for_dim_order(shape, dim_order) for every dimension of
// size > 1, without allocating (this runs for every input of every call).
bool has_compiled_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                         const std::vector<std::uint8_t>& dim_order) {
  const std::size_t nd = shape.size();
  if (strides.size() != nd) return false;
  for (int64_t s : shape) {
    if (s == 0) return true;  // empty: any layout is the same
  }
  std::array<bool, 64> seen{};
  bool valid = dim_order.size() == nd && nd <= seen.size();
  for (std::size_t i = 0; valid && i < nd; ++i) {
    if (dim_order[i] >= nd || seen[dim_order[i]]) valid = false;
    else seen[dim_order[i]] = true;
  }
  int64_t expect = 1;
  for (std::size_t i = nd; i-- > 0;) {
    const std::size_t d = valid ? dim_order[i] : i;
    if (shape[d] > 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

std::string input_label(const Delegate& d, std::size_t i) { return d.label + " input " + std::to_string(i); }

}  // namespace

bool stage_upload(RunState& run, const Tensor& t, void* dst) {
  const std::size_t n = t.nbytes();
  const std::size_t offset = staging_piece(run.staging_offset);
  char* pinned = static_cast<char*>(run.slot.pinned);
  if (pinned == nullptr || offset + n > run.slot.pinned_capacity) return false;
  Tensor staging = Tensor::from_blob(pinned + offset, t.shape(), t.dtype(), Device::cpu());
  staging.copy_from(t);  // host -> host, re-strides if needed
  check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst, pinned + offset, n, cudaMemcpyHostToDevice,
                                                static_cast<cudaStream_t>(run.stream))),
             "cudaMemcpyAsync (input upload)");
  run.staging_offset = offset + n;
  run.staged = true;
  return true;
}

namespace {

// A new handle on the module's device for the delegate (Run steals it).
AtenTensorHandle to_model_input(RunState& run, const Value& v, const TensorSpec& spec, const Delegate& d, std::size_t i) {
  const Device& device = run.device();
  const Tensor& t = v.tensor;
  if (!t.defined()) throw Error(ErrorCode::kInternal, input_label(d, i) + ": the value was never produced");
  const int32_t dtype = static_cast<int32_t>(t.dtype());
  const int32_t dev_type = device.is_cuda() ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
  const int32_t dev_index = device.is_cuda() ? device.index : 0;
  const int64_t ndim = t.dim();
  AtenTensorHandle h = nullptr;
  auto shim_fail = [&](const char* fn) {
    return Error(model_failure_code(), input_label(d, i) + ": " + fn + " failed: " + aoti_cuda_shim_last_error());
  };

  if (t.device() == device && has_compiled_layout(t.shape(), t.strides(), spec.dim_order)) {
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
  const std::vector<int64_t> want_strides = runtime::strides_for_dim_order(t.shape(), spec.dim_order);
  if (aoti_torch_empty_strided(ndim, t.shape().data(), want_strides.data(), dtype, dev_type, dev_index, &h) !=
      AOTI_TORCH_SUCCESS) {
    throw shim_fail("aoti_torch_empty_strided");
  }
  try {
    void* dst = nullptr;
    if (aoti_torch_get_data_ptr(h, &dst) != AOTI_TORCH_SUCCESS) throw shim_fail("aoti_torch_get_data_ptr");
    const bool contiguous_target = runtime::row_major(t.shape(), want_strides);
    const bool staged = device.is_cuda() && t.device().is_cpu() && contiguous_target && t.nbytes() > 0 &&
                        stage_upload(run, t, dst);
    if (!staged && t.nbytes() > 0) {
      Tensor target = Tensor::from_blob(dst, t.shape(), t.dtype(), device, want_strides);
      if (!enqueue_device_copy(target, t, run.stream)) target.copy_from(t, run.stream);
    }
  } catch (...) {
    (void)aoti_torch_delete_tensor_object(h);
    throw;
  }
  return h;
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

void delete_handles(std::vector<AtenTensorHandle>& hs) noexcept {
  for (AtenTensorHandle& h : hs) {
    if (h != nullptr) (void)aoti_torch_delete_tensor_object(h);
    h = nullptr;
  }
}

// Converts the call's inputs to model-owned handles (into run.slot.ins). On
// failure the handles made so far are released and queued staging copies are
// accounted for.
void make_inputs(RunState& run, const Delegate& d, const std::vector<int32_t>& args) {
  auto stream = static_cast<cudaStream_t>(run.stream);
  std::vector<AtenTensorHandle>& ins = run.slot.ins;
  ins.assign(d.n_in, nullptr);
  try {
    for (std::size_t i = 0; i < d.n_in; ++i) {
      const auto vi = static_cast<std::size_t>(args[i]);
      ins[i] = to_model_input(run, run.values[vi], run.method.spec->values[vi].tensor, d, i);
    }
    // Inside the try: if recording the staging event fails, the handles made
    // above must still be released (found by fault injection on the GPU).
    if (run.staged) {
      run.slot.staging_used(stream);
      run.staged = false;
    }
  } catch (...) {
    delete_handles(ins);
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
void take_outputs(RunState& run, const Delegate& d, const std::vector<int32_t>& args) {
  const std::vector<AtenTensorHandle>& outs = run.slot.outs;
  std::exception_ptr failure;
  for (std::size_t j = 0; j < d.n_out; ++j) {
    AtenTensorHandle h = outs[j];
    Value& dst = run.values[static_cast<std::size_t>(args[d.n_in + j])];
    clear_value(dst);
    if (h == nullptr) continue;
    std::size_t first = j;
    for (std::size_t k = 0; k < j; ++k) {
      if (outs[k] == h) {
        first = k;
        break;
      }
    }
    if (first != j) {
      dst = run.values[static_cast<std::size_t>(args[d.n_in + first])];
      continue;
    }
    try {
      wrap_output_into(dst, h, d.label, j);
    } catch (...) {
      if (!failure) failure = std::current_exception();  // keep going so every handle gets an owner
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (std::size_t j = 0; j < d.n_out; ++j) {
    if (!run.values[static_cast<std::size_t>(args[d.n_in + j])].tensor.defined()) {
      throw Error(ErrorCode::kModel, d.label + ": output " + std::to_string(j) + " was not written by the model");
    }
  }
}

void run_delegate(RunState& run, const PlanStep& step) {
  Delegate& d = *run.method.delegates[static_cast<std::size_t>(step.delegate)];
  // This call's arguments (a delegate may be called more than once).
  const std::vector<int32_t>& args = step.args.empty() ? d.spec->args : step.args;
  const bool profiling = run.profiler != nullptr && run.profiler->enabled();
  const std::string which =  // step names only when profiling: no string work on the normal path
      profiling ? std::to_string(step.delegate) + " (" + run.method.spec->name + ")" : std::string();
  {
    Profiler::Scope p(run.profiler, "stage inputs: delegate ", which);
    make_inputs(run, d, args);
  }
  std::vector<AtenTensorHandle>& ins = run.slot.ins;
  std::vector<AtenTensorHandle>& outs = run.slot.outs;
  outs.assign(d.n_out, nullptr);
  aoti_cuda_shim_clear_error();
  const auto& api = d.library->api();
  int32_t rc = 0;
  {
    Profiler::Scope p(run.profiler, "run: delegate ", which);
    runtime::TrackModulesScope track(&d.kernel_modules);  // kernels load on their first launch
    runtime::ModelMessageScope said;  // the model's stderr, for the Error
    rc = api.run(d.container, ins.data(), ins.size(), outs.data(), outs.size(), run.stream, nullptr);
  }
  if (rc != 0) {
    const std::string detail = model_failure_detail(api);
    const ErrorCode code = model_failure_code();  // before deleting: it reads the shim's last failure
    delete_handles(ins);  // those not stolen before the failure
    std::vector<AtenTensorHandle> seen;
    for (AtenTensorHandle h : outs) {
      if (h != nullptr && std::find(seen.begin(), seen.end(), h) == seen.end()) {
        seen.push_back(h);
        (void)aoti_torch_delete_tensor_object(h);
      }
    }
    throw Error(code, d.label + ": AOTInductorModelContainerRun failed: " + detail + run_failure_hint(run.target, d));
  }
  std::fill(ins.begin(), ins.end(), nullptr);  // success: every input was stolen
  Profiler::Scope p(run.profiler, "outputs of delegate ", which);
  take_outputs(run, d, args);
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

// Whether the model takes input `i` dense row-major (its dim_order is the identity).
bool compiled_row_major(const TensorSpec& spec, std::size_t ndim) {
  if (spec.dim_order.empty()) return true;
  if (spec.dim_order.size() != ndim) return false;
  for (std::size_t d = 0; d < ndim; ++d) {
    if (spec.dim_order[d] != d) return false;
  }
  return true;
}

// When two or more non-empty host inputs are taken row-major, they go to the
// device in one copy: staged one after another (256-byte aligned) in the
// slot's pinned buffer, copied into one device block, each input then a typed
// view of the block (aoti_torch__alloc_from_pool) in the value table. One
// copy-engine launch for all of them instead of one each (each launch costs
// host time). The block lives as long as any view of it. A single host input
// keeps the per-input path (staged straight into a model-owned tensor): the
// block path measured slower for single-input calls, faster from two inputs on
// (docs/design-measurements.md).
void upload_host_inputs(RunState& run, const std::vector<Tensor>& inputs) {
  const MethodSpec& ms = *run.method.spec;
  auto staged = [&](std::size_t i) {
    const Tensor& t = inputs[i];
    return t.device().is_cpu() && t.nbytes() > 0 && compiled_row_major(ms.inputs[i].tensor, t.shape().size());
  };
  std::size_t total = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!staged(i)) continue;
    total += staging_piece(inputs[i].nbytes());
    ++count;
  }
  if (count < 2 || run.slot.pinned == nullptr || total > run.slot.pinned_capacity) return;
  Profiler::Scope profile(run.profiler, "upload host inputs");
  char* pinned = static_cast<char*>(run.slot.pinned);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!staged(i)) continue;
    const Tensor& t = inputs[i];
    if (t.is_contiguous()) std::memcpy(pinned + offset, t.data(), t.nbytes());
    else Tensor::from_blob(pinned + offset, t.shape(), t.dtype(), Device::cpu()).copy_from(t);  // re-strides
    offset += staging_piece(t.nbytes());
  }
  const Device& device = run.device();
  const auto bytes = static_cast<int64_t>(total);
  AtenTensorHandle block = nullptr;
  if (aoti_torch_empty_strided(1, &bytes, nullptr, aoti_torch_dtype_uint8(), aoti_torch_device_type_cuda(), device.index,
                               &block) != AOTI_TORCH_SUCCESS) {
    throw Error(ErrorCode::kOutOfMemory, "method '" + ms.name + "': device memory for " + std::to_string(total) +
                                             " bytes of host inputs: " + aoti_cuda_shim_last_error());
  }
  const std::shared_ptr<void> block_owner = own_handle(block);  // the views share its storage
  void* dst = nullptr;
  (void)aoti_torch_get_data_ptr(block, &dst);
  auto stream = static_cast<cudaStream_t>(run.stream);
  check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst, pinned, total, cudaMemcpyHostToDevice, stream)),
             "cudaMemcpyAsync (input upload)");
  try {
    run.slot.staging_used(stream);
  } catch (...) {
    (void)cudaStreamSynchronize(stream);  // the copy out of the pinned buffer is done before it is reused
    throw;
  }
  offset = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!staged(i)) continue;
    const Tensor& t = inputs[i];
    AtenTensorHandle view = nullptr;
    if (aoti_torch__alloc_from_pool(block, static_cast<int64_t>(offset), static_cast<int32_t>(t.dtype()), t.dim(),
                                    t.shape().data(), nullptr, &view) != AOTI_TORCH_SUCCESS) {
      throw Error(ErrorCode::kInternal, "method '" + ms.name + "' input " + std::to_string(i) +
                                            ": a view of the uploaded inputs: " + aoti_cuda_shim_last_error());
    }
    std::shared_ptr<void> view_owner = own_handle(view);
    int64_t* strides = nullptr;
    void* data = nullptr;
    (void)aoti_torch_get_strides(view, &strides);
    (void)aoti_torch_get_data_ptr(view, &data);
    Value& v = run.values[static_cast<std::size_t>(ms.inputs[i].value_index)];
    TensorSlot::assign(v.tensor, data, t.dim(), t.shape().data(), strides, t.dtype(), device, std::move(view_owner));
    v.handle = view;
    offset += staging_piece(t.nbytes());
  }
}

[[noreturn]] void throw_input_mismatch(const MethodSpec& ms, std::size_t i, const Tensor& t) {
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
  throw Error(ErrorCode::kInvalidArgument, where + ": null data");
}

bool input_ok(const TensorSpec& want, const Tensor& t) {
  if (!t.defined() || t.dtype() != want.dtype || t.shape().size() != want.sizes.size()) return false;
  for (std::size_t d = 0; d < want.sizes.size(); ++d) {
    const int64_t got = t.shape()[d];
    if (want.dynamic ? (got < 0 || got > want.sizes[d]) : got != want.sizes[d]) return false;
  }
  return !(t.numel() > 0 && t.data() == nullptr);
}

// Waits for the slot's own stream, then moves the frees of returned outputs off it.
void finish_on_own_stream(const RunState& run) {
  const MethodSpec& ms = *run.method.spec;
  const cudaError_t err = AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(static_cast<cudaStream_t>(run.stream)));
  if (err != cudaSuccess) throw common::cuda_error(err, "running method '" + ms.name + "'");
  // The shim frees a model-made tensor (cudaFreeAsync) on the stream it was
  // allocated on: here the slot's stream, which dies with the Module while
  // returned outputs may live on. The run is complete, so release them on
  // the legacy default stream instead, which outlives every Module.
  for (const ValueSpec& out : ms.outputs) {
    const auto vi = static_cast<std::size_t>(out.value_index);
    if (vi >= run.values.size()) continue;
    const AtenTensorHandle h = run.values[vi].handle;
    if (h != nullptr) (void)shim::set_storage_free_stream(h, nullptr);
  }
}

bool graphs_wanted(const Method& m, const TargetDevice& target, const RunOptions& ro) {
  if (ro.use_graph == GraphUse::kOff) return false;
  if (ro.use_graph == GraphUse::kAsLoaded && !m.graphs->requested) return false;
  if (!target.device.is_cuda()) {
    m.graphs->disable(m.spec->name, "CUDA graphs need a CUDA device (the Module is loaded on the CPU)");
    return false;
  }
  return m.graphs->available.load(std::memory_order_relaxed);
}

}  // namespace

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

void validate_inputs(const MethodSpec& ms, const std::vector<Tensor>& inputs) {
  if (inputs.size() != ms.inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, "method '" + ms.name + "' takes " + std::to_string(ms.inputs.size()) +
                                                 " input(s), got " + std::to_string(inputs.size()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!input_ok(ms.inputs[i].tensor, inputs[i])) throw_input_mismatch(ms, i, inputs[i]);
  }
}

std::vector<Tensor> execute_method(Method& m, const TargetDevice& target, const std::vector<Tensor>& inputs,
                                   const RunOptions& ro, const std::vector<Tensor>* bound) {
  const MethodSpec& ms = *m.spec;
  validate_inputs(ms, inputs);
  if (bound != nullptr) validate_bound_outputs(ms, target, *bound);
  SlotLease lease(m);
  RunState run(m, target, lease.slot());
  ValuesReset reset(run.values);
  common::DeviceGuard guard(target.ordinal());
  std::optional<CurrentStreamScope> stream_scope;
  const bool cuda = target.device.is_cuda();
  const bool own_stream = ro.stream == nullptr;
  bool want_device = false;
  if (cuda) {
    run.stream = own_stream ? static_cast<void*>(run.slot.own_stream()) : ro.stream;
    if (!own_stream) run.slot.used_caller_stream(ro.stream);
    stream_scope.emplace(target.device.index, run.stream);
    want_device = ro.outputs == OutputLocation::kDevice ||
                  (ro.outputs == OutputLocation::kSameAsInputs && !inputs.empty() && inputs[0].device().is_cuda());
  }
  // Intermediates the model frees stay with the slot for its next call.
  const shim::BlockCacheScope block_cache(cuda ? &run.slot.block_cache : nullptr, target.device.index, run.stream);
  // The operator shims the model calls read the Module's tuning (shim/op_settings.hpp).
  const shim::OpSettingsScope op_settings(&m.op_settings);
  // Mutable state: the selected session's copy in place, this call ordered
  // after the previous stateful one (runtime/state.hpp). Held until return.
  // State buffers keep their addresses, so captured graphs stay valid.
  const StateManager::Lease state_lease = StateManager::enter(m, ro.session, run.stream);
  Profiler profiler(ro.profile, run.stream, cuda, ro.profile_kernels);
  run.profiler = &profiler;
  // Timing each kernel needs the plain path: a graph replay is one launch.
  const bool graphs = !profiler.times_kernels() && graphs_wanted(m, target, ro);
  std::vector<Tensor> result;
  if (graphs) {
    bool replayed = false;
    {
      Profiler::Scope p(&profiler, "graph: inputs, replay, outputs");
      replayed = run_with_graph(run, inputs, want_device, bound, result);
    }
    if (replayed) {
      profiler.finish();
      if (own_stream) finish_on_own_stream(run);
      return result;
    }
  }
  run.values.resize(ms.values.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    run.values[static_cast<std::size_t>(ms.inputs[i].value_index)].tensor = inputs[i];
  }
  if (cuda) {
    // Pinned staging for every host input, budgeted up front.
    const std::size_t staging_bytes = host_input_staging(inputs);
    if (staging_bytes > 0) {
      (void)run.slot.staging(staging_bytes);
      upload_host_inputs(run, inputs);
    }
  }
  run_plan(run);
  {
    Profiler::Scope p(&profiler, "collect outputs");
    const ProducedOutputs produced{&run.values, &ms.outputs};
    if (bound != nullptr) write_bound_outputs(run, produced, *bound);
    else result = deliver_outputs(run, produced, want_device, /*copy_device=*/false);
  }
  profiler.finish();
  if (cuda && own_stream) finish_on_own_stream(run);
  if (graphs) note_plain_run(run, inputs);
  return result;
}

}  // namespace aoti_cuda::runtime
