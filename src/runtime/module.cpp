// aoti_cuda::Module: loads every runnable method of a Program (model library,
// container, weights) and runs them.
#include "aoti_cuda/module.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "aoti_cuda/shim.h"
#include "common/env.hpp"
#include "runtime/cuda_util.hpp"
#include "shim/handle_capture.hpp"
#include "runtime/driver_modules.hpp"
#include "runtime/library_loader.hpp"
#include "runtime/tensor_util.hpp"
#include "shim/allocator.hpp"

namespace aoti_cuda {
namespace {

using runtime::check_cuda;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back("'" + n + "'");
  return q.empty() ? std::string("(none)") : join(q);
}

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kNone: return "none";
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kInt: return "int";
    case ValueKind::kDouble: return "double";
    case ValueKind::kBool: return "bool";
    case ValueKind::kString: return "string";
    case ValueKind::kList: return "list";
  }
  return "unknown";
}

std::string spec_str(const TensorSpec& s) {
  return std::string(dtype_name(s.dtype)) + runtime::shape_str(s.sizes) + (s.dynamic ? " (dynamic, upper bounds)" : "");
}

std::string tensor_str(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + runtime::shape_str(t.shape()) + " on " + t.device().str();
}

// The reason of the last failed shim call / model entry point on this thread.
std::string model_failure_detail(const runtime::ContainerApi& api) {
  std::string detail;
  const char* shim = aoti_cuda_shim_last_error();
  if (shim != nullptr && *shim != '\0') detail = shim;
  if (api.get_last_error != nullptr) {
    const char* msg = nullptr;
    if (api.get_last_error(&msg) == 0 && msg != nullptr && *msg != '\0') {
      detail += (detail.empty() ? "" : "; ") + std::string("model: ") + msg;
    }
  }
  return detail.empty() ? std::string("no error message was recorded (the model library prints its exception to stderr)")
                        : detail;
}

// Owner of one AtenTensorHandle, shared by the Tensors wrapping it.
std::shared_ptr<void> own_handle(AtenTensorHandle h) {
  return std::shared_ptr<void>(static_cast<void*>(h), [](void* p) {
    (void)aoti_torch_delete_tensor_object(static_cast<AtenTensorHandle>(p));
  });
}

// ---------------------------------------------------------------------------
// The non-folded constants of a container, in table order (the order in
// which installing a weights blob creates their handles). Empty when the
// library cannot describe them.
struct ConstantEntry {
  std::string name, fqn;
  int32_t dtype = -1;
  std::size_t data_size = 0;
};
bool list_constants(const runtime::ContainerApi& api, runtime::ContainerHandle c, std::vector<ConstantEntry>& out) {
  out.clear();
  if (api.get_num_constants == nullptr || api.get_constant_name == nullptr || api.get_constant_original_fqn == nullptr ||
      api.get_constant_from_folded == nullptr || api.get_constant_dtype == nullptr ||
      api.get_constant_data_size == nullptr) {
    return false;
  }
  std::size_t n = 0;
  if (api.get_num_constants(c, &n) != 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    bool folded = false;
    const char* name = nullptr;
    const char* fqn = nullptr;
    ConstantEntry e;
    if (api.get_constant_from_folded(c, i, &folded) != 0) return false;
    if (folded) continue;
    if (api.get_constant_name(c, i, &name) != 0 || name == nullptr || api.get_constant_original_fqn(c, i, &fqn) != 0 ||
        api.get_constant_dtype(c, i, &e.dtype) != 0 || api.get_constant_data_size(c, i, &e.data_size) != 0) {
      return false;
    }
    e.name = name;
    e.fqn = fqn != nullptr ? fqn : "";
    out.push_back(std::move(e));
  }
  return true;
}

struct Delegate {
  const DelegateSpec* spec = nullptr;
  std::string label;
  std::unique_ptr<runtime::ModelLibrary> library;
  runtime::ContainerHandle container = nullptr;
  std::size_t n_in = 0;
  std::size_t n_out = 0;
  int cuda_device = -1;               // -1 for CPU modules
  runtime::ModuleTracker kernel_modules;  // CUDA modules the model's runtime loaded
  // Handles the library created while installing its weights: one per
  // non-folded constant, in constant-table order. Owned by the container.
  std::vector<AtenTensorHandle> constant_handles;
  // Aliases the library made of constants shared from another method
  // (UpdateUserManagedConstantBufferPairs); PyTorch 2.11 never frees them, so
  // they are deleted here once the container is gone.
  std::vector<AtenTensorHandle> shared_aliases;
  // The library's constant table (non-folded entries), read once at load when
  // constants are shared across methods; constants_known says it was readable.
  std::vector<ConstantEntry> constants;
  bool constants_known = false;
  // True when every constant came from earlier methods and the weights blob
  // was never uploaded (see Module::Impl::adopt_all_constants).
  bool constants_adopted = false;

  Delegate() = default;
  Delegate(const Delegate&) = delete;
  Delegate& operator=(const Delegate&) = delete;
  ~Delegate() {
    int prev = -1;
    bool switched = false;
    if (cuda_device >= 0 && cudaGetDevice(&prev) == cudaSuccess) {
      // Always set it: besides selecting the device, cudaSetDevice makes its
      // primary context current on this thread, which cuModuleUnload needs.
      switched = cudaSetDevice(cuda_device) == cudaSuccess && prev != cuda_device;
    }
    // The container's code lives in the library: delete it before dlclose.
    if (container != nullptr && library) (void)library->api().destroy(container);
    container = nullptr;
    for (AtenTensorHandle h : shared_aliases) (void)aoti_torch_delete_tensor_object(h);
    shared_aliases.clear();
    // The AOTI runtime never unloads its kernel modules; do it for it, in the
    // device's primary context.
    if (cuda_device >= 0) kernel_modules.unload_all();
    if (switched) (void)cudaSetDevice(prev);
    if (cuda_device >= 0) (void)cudaGetLastError();
  }
};

// Resources of one in-flight call (a method allows LoadOptions::num_models).
struct Slot {
  int device = -1;               // CUDA ordinal, -1 for CPU modules
  cudaStream_t stream = nullptr;  // the Module's own stream for this slot
  void* pinned = nullptr;         // host staging for inputs
  std::size_t pinned_capacity = 0;
  cudaEvent_t staging_done = nullptr;  // recorded after the last copy out of `pinned`
  bool staging_pending = false;

  Slot() = default;
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() {
    if (device < 0) return;
    int prev = -1;
    const bool got = cudaGetDevice(&prev) == cudaSuccess;
    if (got && prev != device) (void)cudaSetDevice(device);
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    if (staging_done != nullptr) {
      (void)cudaEventSynchronize(staging_done);
      (void)cudaEventDestroy(staging_done);
    }
    if (pinned != nullptr) (void)cudaFreeHost(pinned);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    if (got && prev != device) (void)cudaSetDevice(prev);
    (void)cudaGetLastError();
  }

  cudaStream_t own_stream() {
    if (stream == nullptr) check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return stream;
  }
  // A pinned buffer of at least `bytes`, free of in-flight copies.
  void* staging(std::size_t bytes) {
    if (staging_pending) {
      check_cuda(cudaEventSynchronize(staging_done), "cudaEventSynchronize (input staging)");
      staging_pending = false;
    }
    if (bytes > pinned_capacity) {
      if (pinned != nullptr) (void)cudaFreeHost(pinned);
      pinned = nullptr;
      pinned_capacity = 0;
      const std::size_t want = std::max<std::size_t>(bytes, 1 << 16);
      check_cuda(cudaMallocHost(&pinned, want), "cudaMallocHost (input staging)");
      pinned_capacity = want;
    }
    return pinned;
  }
  void staging_used(cudaStream_t s) {
    if (staging_done == nullptr) {
      check_cuda(cudaEventCreateWithFlags(&staging_done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    check_cuda(cudaEventRecord(staging_done, s), "cudaEventRecord");
    staging_pending = true;
  }
};

struct Method {
  const MethodSpec* spec = nullptr;
  std::vector<std::unique_ptr<Delegate>> delegates;  // parallel to spec->delegates
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<std::size_t> free_slots;
  std::mutex mu;
  std::condition_variable cv;
};

class SlotLease {
 public:
  explicit SlotLease(Method& m) : m_(m) {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait(lock, [&] { return !m.free_slots.empty(); });
    index_ = m.free_slots.back();
    m.free_slots.pop_back();
  }
  ~SlotLease() {
    {
      std::lock_guard<std::mutex> lock(m_.mu);
      m_.free_slots.push_back(index_);
    }
    m_.cv.notify_one();
  }
  Slot& slot() { return *m_.slots[index_]; }

 private:
  Method& m_;
  std::size_t index_ = 0;
};

// Installs `stream` as the shim's current stream of `device` on this thread.
class CurrentStreamScope {
 public:
  CurrentStreamScope(int device, void* stream) : device_(device) {
    if (aoti_cuda_shim_set_current_stream(device, stream, &previous_) != AOTI_TORCH_SUCCESS) {
      throw Error(ErrorCode::kCuda, std::string("setting the shim's current stream failed: ") + aoti_cuda_shim_last_error());
    }
    active_ = true;
  }
  ~CurrentStreamScope() {
    if (active_) (void)aoti_cuda_shim_set_current_stream(device_, previous_, nullptr);
  }
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  int device_;
  void* previous_ = nullptr;
  bool active_ = false;
};

// A value of the method's value table during one call.
struct Value {
  Tensor tensor;
  AtenTensorHandle handle = nullptr;  // the shim handle owned by tensor's owner, when it came from the model
};

}  // namespace

// ---------------------------------------------------------------------------
struct Module::Impl {
  Program program;
  LoadOptions options;
  Device device;
  int gpu_sm = 0;  // e.g. 90 for compute capability 9.0 (CUDA modules)
  LoadTimings timings;
  std::vector<std::unique_ptr<Method>> methods;
  std::size_t shared_constants = 0;  // constants bound to another method's copy
  std::size_t shared_weights_bytes = 0;  // weights blobs not uploaded: every constant was adopted
  // Constants installed from a weights blob so far, by original FQN (first wins).
  struct HeldConstant {
    AtenTensorHandle handle = nullptr;
    int32_t dtype = -1;
    std::size_t data_size = 0;
  };
  std::map<std::string, HeldConstant> held_constants;

  void remember_constants(Delegate& d);
  bool adopt_all_constants(Delegate& d);

  explicit Impl(Program p) : program(std::move(p)) {}

  void share_constants();

  void load(const LoadOptions& opts, double parse_ms, Clock::time_point t_start);
  Method& find(std::string_view name) const;
  std::vector<Tensor> execute(Method& m, const std::vector<Tensor>& inputs, const RunOptions& ro);

  // helpers of execute
  void validate(const Method& m, const std::vector<Tensor>& inputs) const;
  AtenTensorHandle to_model_input(const Value& v, const TensorSpec& spec, Slot& slot, void* stream,
                                  std::size_t& staging_offset, bool& staged, const std::string& what);
  Value wrap_output(AtenTensorHandle h, const std::string& what) const;
  void run_delegate(Method& m, const PlanStep& step, std::vector<Value>& values, Slot& slot, void* stream,
                    std::size_t& staging_offset, bool& staged);
  std::string run_failure_hint(const Delegate& d) const;
};

void Module::Impl::load(const LoadOptions& opts, double parse_ms, Clock::time_point t_start) {
  options = opts;
  device = opts.device;
  timings.parse_ms = parse_ms;
  auto progress = [&](const char* phase, const std::string& method, std::size_t done, std::size_t total) {
    if (options.on_progress) options.on_progress(LoadProgress{phase, method, done, total});
  };
  progress("parse", "", 1, 1);
  if (opts.num_models == 0) throw Error(ErrorCode::kInvalidArgument, "LoadOptions::num_models must be at least 1");
  if (device.is_cuda() && device.index < 0) {
    throw Error(ErrorCode::kInvalidArgument, "LoadOptions::device has a negative CUDA ordinal");
  }

  // Which methods?
  std::vector<const MethodSpec*> selected;
  const std::string label = program.pte_path();
  if (!opts.methods.empty()) {
    for (const std::string& name : opts.methods) {
      const MethodSpec& ms = program.method(name);  // kNotFound with the valid names
      if (!ms.runnable) {
        throw Error(ErrorCode::kUnsupported, "method '" + name + "' of " + label + " cannot run: " + ms.not_runnable_reason);
      }
      if (std::find(selected.begin(), selected.end(), &ms) == selected.end()) selected.push_back(&ms);
    }
  } else {
    std::vector<std::string> reasons;
    for (const MethodSpec& ms : program.methods()) {
      if (ms.runnable) selected.push_back(&ms);
      else reasons.push_back("'" + ms.name + "': " + ms.not_runnable_reason);
    }
    if (selected.empty()) {
      throw Error(ErrorCode::kUnsupported, "no method of " + label + " can run" +
                                               (reasons.empty() ? std::string(" (the program has no methods)")
                                                                : ": " + join(reasons, "; ")));
    }
  }

  // The device.
  if (device.is_cuda()) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) throw runtime::cuda_error(err, "cudaGetDeviceCount (loading " + label + ")");
    if (count <= device.index) {
      throw Error(ErrorCode::kNoDevice, "loading " + label + " on " + device.str() + ": this machine has " +
                                            std::to_string(count) + " CUDA device(s)");
    }
    gpu_sm = runtime::sm_version(device.index);
    // Create the device's primary context now, so its one-time cost (100+ ms
    // in a fresh process) is reported as its own phase instead of hiding in
    // the first container's creation.
    const auto t_init = Clock::now();
    {
      runtime::DeviceGuard guard(device.index);
      check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (creating the CUDA context)");
    }
    timings.device_init_ms = ms_since(t_init);
  }
  const std::string device_str = device.is_cuda() ? "cuda:" + std::to_string(device.index) : "cpu";

  std::size_t total = 0;
  for (const MethodSpec* ms : selected) total += ms->delegates.size();
  std::size_t done = 0;
  struct PendingWeights {
    Delegate* delegate;
    const MethodSpec* method;
  };
  std::vector<PendingWeights> pending_weights;

  for (const MethodSpec* ms : selected) {
    auto method = std::make_unique<Method>();
    method->spec = ms;
    // Plan sanity: the reader validated it, but the executor indexes with it.
    for (const PlanStep& step : ms->plan) {
      for (int32_t a : step.args) {
        if (a < 0 || static_cast<std::size_t>(a) >= ms->values.size()) {
          throw Error(ErrorCode::kInvalidProgram, "method '" + ms->name + "': plan argument " + std::to_string(a) +
                                                      " is outside the value table (" + std::to_string(ms->values.size()) + " values)");
        }
      }
      const bool two_args = step.kind != PlanStep::Kind::kDelegate;
      if (two_args && step.args.size() != 2) {
        throw Error(ErrorCode::kInvalidProgram, "method '" + ms->name + "': a move/copy step has " +
                                                    std::to_string(step.args.size()) + " arguments, expected 2");
      }
      if (step.kind == PlanStep::Kind::kDelegate &&
          (step.delegate < 0 || static_cast<std::size_t>(step.delegate) >= ms->delegates.size())) {
        throw Error(ErrorCode::kInvalidProgram, "method '" + ms->name + "': plan calls delegate " +
                                                    std::to_string(step.delegate) + " of " + std::to_string(ms->delegates.size()));
      }
    }
    for (const ValueSpec& in : ms->inputs) {
      if (in.kind != ValueKind::kTensor) {
        throw Error(ErrorCode::kUnsupported, "method '" + ms->name + "' takes a " + kind_name(in.kind) +
                                                 " input (value " + std::to_string(in.value_index) +
                                                 "); only tensor inputs are supported");
      }
    }
    for (std::size_t di = 0; di < ms->delegates.size(); ++di) {
      const DelegateSpec& ds = ms->delegates[di];
      auto d = std::make_unique<Delegate>();
      d->spec = &ds;
      d->cuda_device = device.is_cuda() ? device.index : -1;
      d->label = "method '" + ms->name + "' delegate " + std::to_string(di) + " (.so '" + ds.so_key + "' in " + ds.so_file + ")";
      for (int32_t a : ds.args) {
        if (a < 0 || static_cast<std::size_t>(a) >= ms->values.size() || ms->values[a].kind != ValueKind::kTensor) {
          throw Error(ErrorCode::kUnsupported, d->label + ": delegate argument value " + std::to_string(a) +
                                                   " is not a tensor; only tensor arguments are supported");
        }
      }

      auto t0 = Clock::now();
      d->library = runtime::ModelLibrary::load(ds.so, d->label, opts.allowed_so_sha256);
      timings.library_ms += ms_since(t0);
      // Refuse a GPU the embedded kernels cannot run on now, not at the first
      // kernel launch: no SASS for this SM and no PTX old enough to JIT.
      if (device.is_cuda() && gpu_sm > 0) {
        const CudaKernelInfo& k = d->library->kernels();
        if (k.fatbins > 0 && !k.runs_on(gpu_sm)) {
          throw Error(ErrorCode::kUnsupported, d->label + ": the embedded GPU kernels were built for " + k.describe() +
                                                   "; " + device.str() + " is sm_" + std::to_string(gpu_sm) +
                                                   " and can run none of them (re-export the program on this GPU"
                                                   " generation)");
        }
      }
      progress("library", ms->name, done + 1, total);
      const runtime::ContainerApi& api = d->library->api();

      t0 = Clock::now();
      {
        std::unique_ptr<runtime::DeviceGuard> guard;  // CreateWithDevice("cuda:N") calls cudaSetDevice(N)
        if (device.is_cuda()) guard = std::make_unique<runtime::DeviceGuard>(device.index);
        aoti_cuda_shim_clear_error();
        runtime::TrackModulesScope track(&d->kernel_modules);
        if (api.create_with_device(&d->container, opts.num_models, device_str.c_str(), nullptr) != 0 ||
            d->container == nullptr) {
          d->container = nullptr;
          throw Error(ErrorCode::kModel, d->label + ": AOTInductorModelContainerCreateWithDevice(num_models=" +
                                             std::to_string(opts.num_models) + ", \"" + device_str +
                                             "\") failed: " + model_failure_detail(api));
        }
      }
      if (api.get_num_inputs(d->container, &d->n_in) != 0 || api.get_num_outputs(d->container, &d->n_out) != 0) {
        throw Error(ErrorCode::kModel, d->label + ": querying the container's input/output counts failed: " +
                                           model_failure_detail(api));
      }
      if (d->n_in + d->n_out != ds.args.size()) {
        throw Error(ErrorCode::kInvalidProgram,
                    d->label + ": the model library has " + std::to_string(d->n_in) + " inputs and " +
                        std::to_string(d->n_out) + " outputs, but the program's delegate call passes " +
                        std::to_string(ds.args.size()) + " arguments");
      }
      timings.container_ms += ms_since(t0);
      progress("container", ms->name, done + 1, total);

      // Weights are installed after every container exists (below), so that
      // methods whose constants are all held by another can adopt them.
      ++done;
      pending_weights.push_back({d.get(), ms});
      method->delegates.push_back(std::move(d));
    }
    for (const PlanStep& step : ms->plan) {
      if (step.kind != PlanStep::Kind::kDelegate) continue;
      const Delegate& d = *method->delegates[static_cast<std::size_t>(step.delegate)];
      const std::vector<int32_t>& args = step.args.empty() ? d.spec->args : step.args;
      if (args.size() != d.n_in + d.n_out) {
        throw Error(ErrorCode::kInvalidProgram, d.label + ": a call passes " + std::to_string(args.size()) +
                                                    " arguments, the model library takes " + std::to_string(d.n_in) +
                                                    " inputs and " + std::to_string(d.n_out) + " outputs");
      }
      for (int32_t a : args) {
        if (ms->values[static_cast<std::size_t>(a)].kind != ValueKind::kTensor) {
          throw Error(ErrorCode::kUnsupported, d.label + ": delegate argument value " + std::to_string(a) +
                                                   " is a " + kind_name(ms->values[static_cast<std::size_t>(a)].kind) +
                                                   "; only tensor arguments are supported");
        }
      }
    }
    for (std::size_t i = 0; i < opts.num_models; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->device = device.is_cuda() ? device.index : -1;
      method->slots.push_back(std::move(slot));
      method->free_slots.push_back(i);
    }
    methods.push_back(std::move(method));
  }
  auto install_weights = [&](Delegate& d) {
    const auto t0 = Clock::now();
    const DelegateSpec& ds = *d.spec;
    const runtime::ContainerApi& api = d.library->api();
    std::uint64_t blob_bytes = 0;
    if (ds.weights.empty() && api.get_constants_blob_size != nullptr &&
        api.get_constants_blob_size(d.container, &blob_bytes) == 0 && blob_bytes > 0) {
      throw Error(ErrorCode::kInvalidProgram, d.label + ": the model library reads " + std::to_string(blob_bytes) +
                                                  " bytes of weights but the program has no weights blob" +
                                                  (ds.weights_key.empty() ? std::string("")
                                                                          : " ('" + ds.weights_key + "' is empty)"));
    }
    if (!ds.weights.empty() && opts.share_constants_across_methods && adopt_all_constants(d)) {
      shared_weights_bytes += ds.weights.size;  // never uploaded: all constants are earlier methods' copies
    } else if (!ds.weights.empty()) {
      if (api.update_constants_from_blob == nullptr) {
        throw Error(ErrorCode::kLoad, d.label + ": the program has a weights blob ('" + ds.weights_key + "', " +
                                          std::to_string(ds.weights.size) +
                                          " bytes) but the model library does not export "
                                          "AOTInductorModelUpdateConstantsFromBlob");
      }
      // The model reads as many bytes as its compiled-in constant table says;
      // a short blob (truncated or mismatched .ptd) must not be read past its end.
      std::uint64_t expected = 0;
      if (api.get_constants_blob_size != nullptr && api.get_constants_blob_size(d.container, &expected) == 0 &&
          expected > ds.weights.size) {
        throw Error(ErrorCode::kInvalidProgram, d.label + ": the weights blob '" + ds.weights_key + "' in " +
                                                    ds.weights_file + " has " + std::to_string(ds.weights.size) +
                                                    " bytes but the model library reads " + std::to_string(expected));
      }
      aoti_cuda_shim_clear_error();
      std::unique_ptr<runtime::DeviceGuard> guard;
      if (device.is_cuda()) guard = std::make_unique<runtime::DeviceGuard>(device.index);
      runtime::TrackModulesScope track(&d.kernel_modules);
      shim::HandleCapture capture(shim::CreatedBy::kFromBlob, &d.constant_handles);
      if (api.update_constants_from_blob(d.container, ds.weights.data) != 0) {
        throw Error(ErrorCode::kModel, d.label + ": installing the weights ('" + ds.weights_key + "' from " +
                                           ds.weights_file + ") with AOTInductorModelUpdateConstantsFromBlob failed: " +
                                           model_failure_detail(api));
      }
      if (opts.share_constants_across_methods) remember_constants(d);
    }
    timings.weights_ms += ms_since(t0);
  };
  // Largest constant tables first: a method whose constants are a subset of
  // an earlier one's can then adopt them instead of uploading its own copy.
  if (opts.share_constants_across_methods) {
    for (const PendingWeights& p : pending_weights) {
      Delegate& d = *p.delegate;
      d.constants_known = list_constants(d.library->api(), d.container, d.constants);
    }
    std::stable_sort(pending_weights.begin(), pending_weights.end(), [](const PendingWeights& a, const PendingWeights& b) {
      return a.delegate->constants.size() > b.delegate->constants.size();
    });
  }
  for (std::size_t i = 0; i < pending_weights.size(); ++i) {
    install_weights(*pending_weights[i].delegate);
    progress("weights", pending_weights[i].method->name, i + 1, pending_weights.size());
  }
  if (opts.share_constants_across_methods) {
    const auto t0 = Clock::now();
    share_constants();
    timings.weights_ms += ms_since(t0);
  }
  timings.total_ms = parse_ms + ms_since(t_start);
}

namespace {

// Same dtype, device, sizes, strides and storage offset: one may stand in for the other.
bool same_layout(AtenTensorHandle a, AtenTensorHandle b) {
  int32_t da = 0, db = 0, ta = 0, tb = 0;
  int64_t na = 0, nb = 0, oa = 0, ob = 0;
  int64_t *sa = nullptr, *sb = nullptr, *st_a = nullptr, *st_b = nullptr;
  if (aoti_torch_get_dtype(a, &da) || aoti_torch_get_dtype(b, &db) || aoti_torch_get_device_type(a, &ta) ||
      aoti_torch_get_device_type(b, &tb) || aoti_torch_get_dim(a, &na) || aoti_torch_get_dim(b, &nb) ||
      aoti_torch_get_storage_offset(a, &oa) || aoti_torch_get_storage_offset(b, &ob) ||
      aoti_torch_get_sizes(a, &sa) || aoti_torch_get_sizes(b, &sb) || aoti_torch_get_strides(a, &st_a) ||
      aoti_torch_get_strides(b, &st_b)) {
    return false;
  }
  if (da != db || ta != tb || na != nb || oa != ob) return false;
  for (int64_t i = 0; i < na; ++i) {
    if (sa[i] != sb[i] || st_a[i] != st_b[i]) return false;
  }
  return true;
}


}  // namespace

void Module::Impl::remember_constants(Delegate& d) {
  const std::vector<ConstantEntry>& entries = d.constants;
  if (!d.constants_known || entries.size() != d.constant_handles.size()) return;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].fqn.empty()) continue;
    held_constants.emplace(entries[k].fqn, HeldConstant{d.constant_handles[k], entries[k].dtype, entries[k].data_size});
  }
}

bool Module::Impl::adopt_all_constants(Delegate& d) {
  // When every constant of this library is already held by an earlier method
  // (same FQN, dtype and byte size), hand those copies over instead of
  // uploading this method's weights: the device memory is spent once.
  const runtime::ContainerApi& api = d.library->api();
  if (held_constants.empty() || api.update_user_managed_constant_buffer_pairs == nullptr) return false;
  if (!d.constants_known || d.constants.empty()) return false;
  std::vector<runtime::ContainerApi::ConstantMapEntry> pairs;
  for (const ConstantEntry& e : d.constants) {
    const auto it = held_constants.find(e.fqn);
    if (e.fqn.empty() || it == held_constants.end() || it->second.dtype != e.dtype ||
        it->second.data_size != e.data_size) {
      if (env_flag("AOTI_CUDA_TRACE_SHARING")) {
        std::fprintf(stderr, "[aoti_cuda] %s: uploads its own weights: constant '%s' (fqn '%s', dtype %d, %zu bytes) %s\n",
                     d.label.c_str(), e.name.c_str(), e.fqn.c_str(), e.dtype, e.data_size,
                     it == held_constants.end() ? "is not held by an earlier method" : "differs from the held copy");
      }
      return false;
    }
    pairs.push_back({e.name.c_str(), it->second.handle});
  }
  std::unique_ptr<runtime::DeviceGuard> guard;
  if (device.is_cuda()) guard = std::make_unique<runtime::DeviceGuard>(device.index);
  aoti_cuda_shim_clear_error();
  std::vector<AtenTensorHandle> aliases;
  bool ok;
  {
    shim::HandleCapture capture(shim::CreatedBy::kAlias, &aliases);
    ok = api.update_user_managed_constant_buffer_pairs(d.container, pairs.data(), pairs.size(), /*use_inactive=*/false,
                                                       /*validate_full_update=*/true) == 0;
  }
  if (!ok) {
    // The library refused: release what it made and upload its own weights instead.
    for (AtenTensorHandle h : aliases) (void)aoti_torch_delete_tensor_object(h);
    aoti_cuda_shim_clear_error();
    return false;
  }
  d.shared_aliases.insert(d.shared_aliases.end(), aliases.begin(), aliases.end());
  d.constants_adopted = true;
  shared_constants += pairs.size();
  return true;
}

void Module::Impl::share_constants() {
  // Every method's library holds its own copy of the module's parameters and
  // buffers. Bind each constant whose original FQN another delegate installed
  // first (held_constants, with the same layout) to that copy, so that state
  // one method writes (e.g. a KV cache filled by prefill) is what the others
  // read, as in the eager module.
  for (const auto& method : methods) {
    for (const auto& dp : method->delegates) {
      Delegate& d = *dp;
      if (d.constants_adopted) continue;  // already bound to earlier copies at load
      const runtime::ContainerApi& api = d.library->api();
      const std::vector<ConstantEntry>& entries = d.constants;
      // The handles must pair up one-to-one with the constants, else the
      // layout is unknown and this delegate keeps its own copies.
      if (api.update_user_managed_constant_buffer_pairs == nullptr || !d.constants_known ||
          entries.size() != d.constant_handles.size()) {
        continue;
      }
      std::vector<runtime::ContainerApi::ConstantMapEntry> pairs;
      for (std::size_t k = 0; k < entries.size(); ++k) {
        const auto it = held_constants.find(entries[k].fqn);  // empty FQNs are never held
        if (it == held_constants.end() || it->second.handle == d.constant_handles[k]) continue;
        if (same_layout(it->second.handle, d.constant_handles[k])) {
          pairs.push_back({entries[k].name.c_str(), it->second.handle});
        }
      }
      if (pairs.empty()) continue;
      std::unique_ptr<runtime::DeviceGuard> guard;
      if (device.is_cuda()) guard = std::make_unique<runtime::DeviceGuard>(device.index);
      aoti_cuda_shim_clear_error();
      shim::HandleCapture capture(shim::CreatedBy::kAlias, &d.shared_aliases);
      if (api.update_user_managed_constant_buffer_pairs(d.container, pairs.data(), pairs.size(),
                                                        /*use_inactive=*/false, /*validate_full_update=*/false) != 0) {
        throw Error(ErrorCode::kModel, d.label + ": sharing " + std::to_string(pairs.size()) +
                                           " constant(s) with an earlier method failed: " + model_failure_detail(api) +
                                           " (load with LoadOptions::share_constants_across_methods = false to keep "
                                           "per-method copies)");
      }
      shared_constants += pairs.size();
    }
  }
}

Method& Module::Impl::find(std::string_view name) const {
  for (const auto& m : methods) {
    if (m->spec->name == name) return *m;
  }
  std::vector<std::string> names;
  for (const auto& m : methods) names.push_back(m->spec->name);
  std::string extra;
  for (const MethodSpec& ms : program.methods()) {
    if (ms.name == name) extra = " (the program has it, but it was not loaded" +
                                 std::string(ms.runnable ? "" : ": " + ms.not_runnable_reason) + ")";
  }
  throw Error(ErrorCode::kNotFound, "no method '" + std::string(name) + "' in " + program.pte_path() + extra +
                                        "; loaded methods: " + quoted_names(names));
}

void Module::Impl::validate(const Method& m, const std::vector<Tensor>& inputs) const {
  const MethodSpec& ms = *m.spec;
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

// A new handle on the module's device for the delegate (Run steals it).
AtenTensorHandle Module::Impl::to_model_input(const Value& v, const TensorSpec& spec, Slot& slot, void* stream,
                                              std::size_t& staging_offset, bool& staged, const std::string& what) {
  const Tensor& t = v.tensor;
  if (!t.defined()) throw Error(ErrorCode::kInternal, what + ": the value was never produced");
  const int32_t dtype = static_cast<int32_t>(t.dtype());
  const int32_t dev_type = device.is_cuda() ? aoti_torch_device_type_cuda() : aoti_torch_device_type_cpu();
  const int32_t dev_index = device.is_cuda() ? device.index : 0;
  const std::vector<int64_t> want_strides = runtime::strides_for_dim_order(t.shape(), spec.dim_order);
  const int64_t ndim = t.dim();
  AtenTensorHandle h = nullptr;
  auto shim_fail = [&](const char* fn) {
    return Error(ErrorCode::kModel, what + ": " + fn + " failed: " + aoti_cuda_shim_last_error());
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
      const std::size_t offset = (staging_offset + 255) / 256 * 256;
      char* pinned = static_cast<char*>(slot.pinned);
      if (pinned == nullptr || offset + n > slot.pinned_capacity) {
        // Not budgeted up front (a host value made mid-plan): copy synchronously.
        Tensor target = Tensor::from_blob(dst, t.shape(), t.dtype(), device, want_strides);
        target.copy_from(t, stream);
        return h;
      }
      Tensor staging = Tensor::from_blob(pinned + offset, t.shape(), t.dtype(), Device::cpu());
      staging.copy_from(t);  // host -> host, re-strides if needed
      check_cuda(cudaMemcpyAsync(dst, pinned + offset, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
                 "cudaMemcpyAsync (input upload)");
      staging_offset = offset + n;
      staged = true;
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

Value Module::Impl::wrap_output(AtenTensorHandle h, const std::string& what) const {
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

std::string Module::Impl::run_failure_hint(const Delegate& d) const {
  if (!device.is_cuda() || gpu_sm <= 0) return "";
  const cudaError_t err = cudaGetLastError();
  const bool image_error = err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx ||
                           err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidKernelImage;
  const CudaKernelInfo& k = d.library->kernels();
  const bool mismatch = k.fatbins > 0 && !k.runs_on(gpu_sm);
  if (!image_error && !mismatch) return "";
  return "; the embedded kernels were built for another GPU architecture (this GPU is sm_" + std::to_string(gpu_sm) +
         ", the library holds " + k.describe() + ")";
}

void Module::Impl::run_delegate(Method& m, const PlanStep& step, std::vector<Value>& values, Slot& slot, void* stream,
                                std::size_t& staging_offset, bool& staged) {
  Delegate& d = *m.delegates[static_cast<std::size_t>(step.delegate)];
  // This call's arguments (a delegate may be called more than once).
  const std::vector<int32_t>& args = step.args.empty() ? d.spec->args : step.args;
  std::vector<AtenTensorHandle> ins(d.n_in, nullptr), outs(d.n_out, nullptr);
  auto release_inputs = [&] {
    for (AtenTensorHandle& h : ins) {
      if (h != nullptr) (void)aoti_torch_delete_tensor_object(h);
      h = nullptr;
    }
  };
  try {
    for (std::size_t i = 0; i < d.n_in; ++i) {
      const int32_t vi = args[i];
      ins[i] = to_model_input(values[static_cast<std::size_t>(vi)], m.spec->values[static_cast<std::size_t>(vi)].tensor,
                              slot, stream, staging_offset, staged, d.label + " input " + std::to_string(i));
    }
  } catch (...) {
    release_inputs();
    if (staged) {
      // Copies already queued still read the pinned buffer: the next call must wait for them.
      try {
        slot.staging_used(static_cast<cudaStream_t>(stream));
      } catch (...) {
        (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
      }
    }
    throw;
  }
  if (staged) {
    slot.staging_used(static_cast<cudaStream_t>(stream));
  }
  aoti_cuda_shim_clear_error();
  const auto& api = d.library->api();
  int32_t rc = 0;
  {
    runtime::TrackModulesScope track(&d.kernel_modules);  // kernels load on their first launch
    rc = api.run(d.container, ins.data(), ins.size(), outs.data(), outs.size(), stream, nullptr);
  }
  if (rc != 0) {
    const std::string detail = model_failure_detail(api);
    release_inputs();  // those not stolen before the failure
    std::vector<AtenTensorHandle> seen;
    for (AtenTensorHandle h : outs) {
      if (h != nullptr && std::find(seen.begin(), seen.end(), h) == seen.end()) {
        seen.push_back(h);
        (void)aoti_torch_delete_tensor_object(h);
      }
    }
    throw Error(ErrorCode::kModel, d.label + ": AOTInductorModelContainerRun failed: " + detail + run_failure_hint(d));
  }
  // Success: every input was stolen. Take the outputs (a handle may fill several slots).
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
    values[static_cast<std::size_t>(args[d.n_in + j])] = produced[j];
  }
}

std::vector<Tensor> Module::Impl::execute(Method& m, const std::vector<Tensor>& inputs, const RunOptions& ro) {
  validate(m, inputs);
  const MethodSpec& ms = *m.spec;
  SlotLease lease(m);
  Slot& slot = lease.slot();

  std::unique_ptr<runtime::DeviceGuard> guard;
  std::unique_ptr<CurrentStreamScope> stream_scope;
  void* stream = nullptr;
  const bool own_stream = ro.stream == nullptr;
  std::size_t staging_bytes = 0;
  if (device.is_cuda()) {
    guard = std::make_unique<runtime::DeviceGuard>(device.index);
    stream = own_stream ? static_cast<void*>(slot.own_stream()) : ro.stream;
    stream_scope = std::make_unique<CurrentStreamScope>(device.index, stream);
    for (const Tensor& t : inputs) {
      if (t.device().is_cpu()) staging_bytes += (t.nbytes() + 255) / 256 * 256;
    }
    if (staging_bytes > 0) (void)slot.staging(staging_bytes);
  }

  std::vector<Value> values(ms.values.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    values[static_cast<std::size_t>(ms.inputs[i].value_index)].tensor = inputs[i];
  }
  std::size_t staging_offset = 0;
  bool staged = false;
  for (const PlanStep& step : ms.plan) {
    switch (step.kind) {
      case PlanStep::Kind::kDelegate:
        run_delegate(m, step, values, slot, stream, staging_offset, staged);
        break;
      case PlanStep::Kind::kMove:
        values[static_cast<std::size_t>(step.args[1])] = values[static_cast<std::size_t>(step.args[0])];
        break;
      case PlanStep::Kind::kHostToDevice:
      case PlanStep::Kind::kDeviceToHost: {
        const Value& src = values[static_cast<std::size_t>(step.args[0])];
        if (!src.tensor.defined()) {
          throw Error(ErrorCode::kInternal, "method '" + ms.name + "': copy step reads value " +
                                                std::to_string(step.args[0]) + " before it is produced");
        }
        const Device target = step.kind == PlanStep::Kind::kHostToDevice ? device : Device::cpu();
        if (src.tensor.device() == target) {
          values[static_cast<std::size_t>(step.args[1])] = src;
        } else {
          Value moved;
          moved.tensor = src.tensor.to(target, stream);
          values[static_cast<std::size_t>(step.args[1])] = std::move(moved);
        }
        break;
      }
    }
  }

  // Outputs, where the caller wants them.
  bool want_device = false;
  if (device.is_cuda()) {
    if (ro.outputs == OutputLocation::kDevice) want_device = true;
    else if (ro.outputs == OutputLocation::kSameAsInputs) want_device = !inputs.empty() && inputs[0].device().is_cuda();
  }
  std::vector<Tensor> result;
  result.reserve(ms.outputs.size());
  for (std::size_t i = 0; i < ms.outputs.size(); ++i) {
    const Tensor& t = values[static_cast<std::size_t>(ms.outputs[i].value_index)].tensor;
    if (!t.defined()) {
      throw Error(ErrorCode::kInternal, "method '" + ms.name + "': output " + std::to_string(i) + " (value " +
                                            std::to_string(ms.outputs[i].value_index) + ") was never produced");
    }
    if (!device.is_cuda() || t.device().is_cuda() == want_device) {
      result.push_back(t);
    } else {
      result.push_back(t.to(want_device ? device : Device::cpu(), stream));
    }
  }
  if (device.is_cuda() && own_stream) {
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), ("running method '" + ms.name + "'").c_str());
    // The shim frees a model-made tensor (cudaFreeAsync) on the stream it was
    // allocated on: here the slot's stream, which dies with the Module while
    // returned outputs may live on. The run is complete, so release them on
    // the legacy default stream instead, which outlives every Module.
    for (const ValueSpec& out : ms.outputs) {
      const AtenTensorHandle h = values[static_cast<std::size_t>(out.value_index)].handle;
      if (h != nullptr) (void)shim::set_storage_free_stream(h, nullptr);
    }
  }
  return result;
}

// ---------------------------------------------------------------------------
Module::Module(const std::string& pte_path, const LoadOptions& options) {
  const auto t0 = Clock::now();
  ProgramOptions po;
  po.data_files = options.data_files;
  Program program = Program::open(pte_path, po);
  const double parse_ms = ms_since(t0);
  auto impl = std::make_unique<Impl>(std::move(program));
  impl->load(options, parse_ms, Clock::now());
  impl_ = std::move(impl);
}

Module::Module(Program program, const LoadOptions& options) {
  auto impl = std::make_unique<Impl>(std::move(program));
  impl->load(options, 0.0, Clock::now());
  impl_ = std::move(impl);
}

Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

namespace {
// (a template so that the private Module::Impl is never named here)
template <typename Ptr>
auto& checked(const Ptr& impl) {
  if (!impl) throw Error(ErrorCode::kInvalidArgument, "use of a moved-from aoti_cuda::Module");
  return *impl;
}
}  // namespace

std::vector<std::string> Module::method_names() const {
  std::vector<std::string> names;
  for (const auto& m : checked(impl_).methods) names.push_back(m->spec->name);
  return names;
}

MethodMeta Module::method_meta(std::string_view method) const {
  const Method& m = checked(impl_).find(method);
  MethodMeta meta;
  meta.name = m.spec->name;
  for (const ValueSpec& v : m.spec->inputs) meta.inputs.push_back(v.tensor);
  for (const ValueSpec& v : m.spec->outputs) meta.outputs.push_back(v.tensor);
  meta.num_delegates = m.delegates.size();
  return meta;
}

std::vector<Tensor> Module::execute(std::string_view method, const std::vector<Tensor>& inputs, const RunOptions& options) {
  auto& impl = checked(impl_);
  return impl.execute(impl.find(method), inputs, options);
}

const Program& Module::program() const { return checked(impl_).program; }

LoadTimings Module::load_timings() const { return checked(impl_).timings; }

std::size_t Module::shared_constants() const { return checked(impl_).shared_constants; }

std::size_t Module::shared_weights_bytes() const { return checked(impl_).shared_weights_bytes; }

}  // namespace aoti_cuda
