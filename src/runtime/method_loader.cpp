// Loading methods: library -> container -> weights. See method_loader.hpp.
#include "runtime/method_loader.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "common/text.hpp"
#include "runtime/cuda_hooks.hpp"
#include "runtime/tuning.hpp"
#include "runtime/weight_upload.hpp"
#include "runtime/weights_io.hpp"
#include "shim/handle_capture.hpp"
#include "shim/ops/gemm.hpp"

namespace aoti_cuda::runtime {

using common::check_cuda;
using common::Clock;
using common::DeviceGuard;
using common::ms_since;

std::vector<const MethodSpec*> select_methods(const Program& program, const std::vector<std::string>& names) {
  std::vector<const MethodSpec*> selected;
  const std::string& label = program.pte_path();
  if (!names.empty()) {
    for (const std::string& name : names) {
      const MethodSpec& ms = program.method(name);  // kNotFound with the valid names
      if (!ms.runnable) {
        throw Error(ErrorCode::kUnsupported, "method '" + name + "' of " + label + " cannot run: " + ms.not_runnable_reason);
      }
      if (std::find(selected.begin(), selected.end(), &ms) == selected.end()) selected.push_back(&ms);
    }
    return selected;
  }
  std::vector<std::string> reasons;
  for (const MethodSpec& ms : program.methods()) {
    if (ms.runnable) selected.push_back(&ms);
    else reasons.push_back("'" + ms.name + "': " + ms.not_runnable_reason);
  }
  if (selected.empty()) {
    throw Error(ErrorCode::kUnsupported, "no method of " + label + " can run" +
                                             (reasons.empty() ? std::string(" (the program has no methods)")
                                                              : ": " + common::join(reasons, "; ")));
  }
  return selected;
}

TargetDevice open_device(Device device, const std::string& label, LoadTimings& timings) {
  TargetDevice target;
  target.device = device;
  if (!device.is_cuda()) return target;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) throw common::cuda_error(err, "cudaGetDeviceCount (loading " + label + ")");
  if (count <= device.index) {
    throw Error(ErrorCode::kNoDevice, "loading " + label + " on " + device.str() + ": this machine has " +
                                          std::to_string(count) + " CUDA device(s)");
  }
  target.gpu_sm = common::sm_version(device.index);
  // Create the device's primary context now, so its one-time cost (100+ ms
  // in a fresh process) is reported as its own phase instead of hiding in
  // the first container's creation.
  const auto t_init = Clock::now();
  {
    DeviceGuard guard(device.index);
    check_cuda(AOTI_CUDA_FAULTABLE(cudaFree(nullptr)), "cudaFree(nullptr) (creating the CUDA context)");
  }
  timings.device_init_ms = ms_since(t_init);
  return target;
}

std::vector<std::unique_ptr<Method>> MethodLoader::load(const std::vector<const MethodSpec*>& selected,
                                                        ConstantSharing& sharing) {
  std::size_t total = 0, largest_blob = 0;
  for (const MethodSpec* ms : selected) {
    total += ms->delegates.size();
    for (const DelegateSpec& ds : ms->delegates) {
      largest_blob = std::max({largest_blob, ds.weights.size, fqn_weight_bytes(ds)});
    }
  }
  // The pinned staging of the weights upload is page-locked while the model
  // libraries load, not after (weight_upload.hpp).
  if (target_.device.is_cuda() && largest_blob >= upload_thresholds().pipeline_from &&
      !options_.tuning.page_lock_weights.value_or(false)) {
    // null: each upload allocates its own
    staging_ = StagingBlocks::for_blob(target_.ordinal(), largest_blob, upload_options(options_.tuning));
  }
  std::size_t done = 0;
  std::vector<std::unique_ptr<Method>> methods;
  for (const MethodSpec* ms : selected) methods.push_back(load_method(*ms, done, total));
  // Weights are installed after every container exists, so that methods whose
  // constants are all held by another can adopt them.
  std::vector<std::pair<Delegate*, const MethodSpec*>> pending;
  std::vector<const Delegate*> all;
  for (const auto& m : methods) {
    for (const auto& d : m->delegates) {
      ConstantSharing::read_table(*d);
      pending.emplace_back(d.get(), m->spec);
      all.push_back(d.get());
    }
  }
  sharing.check_requests(all);
  std::stable_sort(pending.begin(), pending.end(),
                   [](const auto& a, const auto& b) { return ConstantSharing::install_before(*a.first, *b.first); });
  FqnWeightInstaller fqn(target_, options_.deduplicate_constants, stats_, staging_.get());
  for (std::size_t i = 0; i < pending.size(); ++i) {
    install_weights(*pending[i].first, sharing, fqn);
    progress_("weights", pending[i].second->name, i + 1, pending.size());
  }
  staging_.reset();
  // A program's weights are never written by a kernel: the fused linear operator may then read them while the
  // previous kernel finishes (shim/ops/dependent_launch.hpp).
  stats_.read_only_constants = mark_program_constants(all);
  // Comparisons may have touched blobs installed earlier again.
  for (const auto& p : pending) {
    release_blob_pages(p.first->spec->weights);
    for (const FqnWeightSpec& w : p.first->spec->fqn_weights) release_blob_pages(w.storage);
  }
  stats_.deduplicated_bytes = sharing.deduplicated_bytes();
  stats_.deduplicated_constants = sharing.deduplicated_constants();
  stats_.shared_state_constants = sharing.shared_state_constants();
  stats_.compare_ms = sharing.compare_ms();
  if (stats_.upload_ms > 0) stats_.upload_gb_per_s = static_cast<double>(stats_.weight_bytes) / (stats_.upload_ms * 1e6);
  // Libraries that multiply through cuBLAS: open it (and make a handle) in the background, so
  // that a first call made a little later finds it ready (one made at once waits for the open in
  // progress, no longer than opening it itself). Not during the load: its dlopen and handle
  // creation serialize with the model libraries' dlopen and the weights upload
  // (docs/design-measurements.md). Not at all when no call is expected to need it (see
  // open_cublas_early).
  shim::gemm::CublasUse use = shim::gemm::CublasUse::kNone;
  std::vector<const MethodSpec*> specs;
  for (const std::unique_ptr<Method>& m : methods) {
    specs.push_back(m->spec);
    for (const std::unique_ptr<Delegate>& d : m->delegates) use = std::max(use, d->library->cublas_use());
  }
  if (open_cublas_early(use, specs, options_.tuning.int4_dequant_min_m.value_or(0))) {
    shim::gemm::open_in_background(target_.device.is_cuda() ? target_.ordinal() : -1);
  }
  return methods;
}

int64_t max_input_rows(const MethodSpec& method) {
  int64_t most = 0;
  for (const ValueSpec& in : method.inputs) {
    if (in.kind != ValueKind::kTensor) continue;
    const TensorSpec& t = in.tensor;
    const bool floating = t.dtype == DType::kFloat32 || t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16 ||
                          t.dtype == DType::kFloat64;
    const std::size_t dims = floating && !t.sizes.empty() ? t.sizes.size() - 1 : t.sizes.size();
    int64_t rows = 1;
    for (std::size_t i = 0; i < dims; ++i) {
      const int64_t s = std::max<int64_t>(t.sizes[i], 0);
      rows = s != 0 && rows > std::numeric_limits<int64_t>::max() / s ? std::numeric_limits<int64_t>::max() : rows * s;
    }
    most = std::max(most, rows);
  }
  return most;
}

bool open_cublas_early(shim::gemm::CublasUse use, const std::vector<const MethodSpec*>& methods,
                       int64_t int4_dequant_min_m) {
  if (use == shim::gemm::CublasUse::kAlways) return true;
  if (use != shim::gemm::CublasUse::kManyRows || int4_dequant_min_m <= 0) return false;
  return std::any_of(methods.begin(), methods.end(),
                     [&](const MethodSpec* m) { return max_input_rows(*m) >= int4_dequant_min_m; });
}

std::unique_ptr<Method> MethodLoader::load_method(const MethodSpec& ms, std::size_t& done, std::size_t total) {
  // The reader validated the plan's indices; what it does not refuse is a
  // non-tensor value where the executor needs a tensor.
  for (const ValueSpec& in : ms.inputs) {
    if (in.kind != ValueKind::kTensor) {
      throw Error(ErrorCode::kUnsupported, "method '" + ms.name + "' takes a " + kind_name(in.kind) + " input (value " +
                                               std::to_string(in.value_index) + "); only tensor inputs are supported");
    }
  }
  auto method = std::make_unique<Method>();
  method->spec = &ms;
  for (std::size_t di = 0; di < ms.delegates.size(); ++di) {
    std::unique_ptr<Delegate> d = load_library(ms, di);
    progress_("library", ms.name, done + 1, total);
    create_container(*d);
    progress_("container", ms.name, done + 1, total);
    ++done;
    method->delegates.push_back(std::move(d));
  }
  check_calls(*method);
  method->op_settings = op_settings_of(options_.tuning);
  for (std::size_t i = 0; i < options_.num_models; ++i) {
    auto slot = std::make_unique<Slot>(block_cache_bytes(options_.tuning));
    slot->device = target_.ordinal();
    method->slots.push_back(std::move(slot));
    method->free_slots.push_back(i);
  }
  return method;
}

std::unique_ptr<Delegate> MethodLoader::load_library(const MethodSpec& ms, std::size_t index) {
  const DelegateSpec& ds = ms.delegates[index];
  auto d = std::make_unique<Delegate>();
  d->spec = &ds;
  d->cuda_device = target_.ordinal();
  d->label = "method '" + ms.name + "' delegate " + std::to_string(index) + " (.so '" + ds.so_key + "' in " + ds.so_file + ")";
  const auto t0 = Clock::now();
  d->library = ModelLibrary::load(ds.so, d->label, options_.allowed_so_sha256);
  const HookBinding& hooks = d->library->hooks();
  stats_.libraries.push_back(LibraryHooks{d->label, hooks.bound, hooks.warnings});
  for (const std::string& w : hooks.warnings) log(LogLevel::kWarning, d->label + ": " + w);
  timings_.library_ms += ms_since(t0);
  // Refuse a GPU the embedded kernels cannot run on now, not at the first
  // kernel launch: no SASS for this SM and no PTX old enough to JIT.
  if (target_.device.is_cuda() && target_.gpu_sm > 0) {
    const CudaKernelInfo& k = d->library->kernels();
    if (k.fatbins > 0 && !k.runs_on(target_.gpu_sm)) {
      throw Error(ErrorCode::kUnsupported, d->label + ": the embedded GPU kernels were built for " + k.describe() + "; " +
                                               target_.device.str() + " is sm_" + std::to_string(target_.gpu_sm) +
                                               " and can run none of them (re-export the program on this GPU"
                                               " generation)");
    }
  }
  return d;
}

void MethodLoader::create_container(Delegate& d) {
  const auto t0 = Clock::now();
  const ContainerApi& api = d.library->api();
  const std::string device_str = target_.device.is_cuda() ? "cuda:" + std::to_string(target_.device.index) : "cpu";
  {
    DeviceGuard guard(target_.ordinal());  // CreateWithDevice("cuda:N") calls cudaSetDevice(N)
    aoti_cuda_shim_clear_error();
    TrackModulesScope track(&d.kernel_modules);
    ModelMessageScope said;  // the model's stderr, for the Error
    if (api.create_with_device(&d.container, options_.num_models, device_str.c_str(), nullptr) != 0 ||
        d.container == nullptr) {
      d.container = nullptr;
      throw Error(model_failure_code(), d.label + ": AOTInductorModelContainerCreateWithDevice(num_models=" +
                                         std::to_string(options_.num_models) + ", \"" + device_str +
                                         "\") failed: " + model_failure_detail(api));
    }
  }
  if (api.get_num_inputs(d.container, &d.n_in) != 0 || api.get_num_outputs(d.container, &d.n_out) != 0) {
    throw Error(ErrorCode::kModel, d.label + ": querying the container's input/output counts failed: " +
                                       model_failure_detail(api));
  }
  timings_.container_ms += ms_since(t0);
}

// Every call of a delegate passes as many tensors as its container takes.
void MethodLoader::check_calls(const Method& m) const {
  const MethodSpec& ms = *m.spec;
  for (const PlanStep& step : ms.plan) {
    if (step.kind != PlanStep::Kind::kDelegate) continue;
    const Delegate& d = *m.delegates[static_cast<std::size_t>(step.delegate)];
    const std::vector<int32_t>& args = step.args.empty() ? d.spec->args : step.args;
    if (args.size() != d.n_in + d.n_out) {
      throw Error(ErrorCode::kInvalidProgram, d.label + ": a call passes " + std::to_string(args.size()) +
                                                  " arguments, the model library takes " + std::to_string(d.n_in) +
                                                  " inputs and " + std::to_string(d.n_out) + " outputs");
    }
    for (int32_t a : args) {
      const ValueKind kind = ms.values[static_cast<std::size_t>(a)].kind;
      if (kind != ValueKind::kTensor) {
        throw Error(ErrorCode::kUnsupported, d.label + ": delegate argument value " + std::to_string(a) + " is a " +
                                                 kind_name(kind) + "; only tensor arguments are supported");
      }
    }
  }
}

void MethodLoader::install_weights(Delegate& d, ConstantSharing& sharing, FqnWeightInstaller& fqn) {
  const auto t0 = Clock::now();
  if (d.spec->generation == ExporterGeneration::kFqnWeights) {
    fqn.install(d, sharing);  // no blob: each constant is bound to its stored tensor
    timings_.weights_ms += ms_since(t0);
    return;
  }
  check_blob(d);
  const ByteView blob = d.spec->weights;
  if (!blob.empty()) {
    // Adopted: never uploaded, every constant is an earlier method's copy.
    if (!sharing.try_adopt_all(d)) {
      upload_weights(d);
      sharing.after_upload(d);
    } else if (trace_weights()) {
      log(LogLevel::kDebug, d.label + ": " + std::to_string(blob.size) +
                                " weight bytes not uploaded (every constant has an identical or shared copy)");
    }
    // The device holds the bytes now: the process need not (RSS).
    release_blob_pages(blob);
  } else {
    sharing.after_upload(d);  // no blob: nothing to install, but its state is still known
  }
  timings_.weights_ms += ms_since(t0);
}

// A program without a weights blob for a model that reads one, or a blob
// shorter than the model reads, must not be read past its end.
void MethodLoader::check_blob(const Delegate& d) const {
  const DelegateSpec& ds = *d.spec;
  const ContainerApi& api = d.library->api();
  std::uint64_t expected = 0;
  if (api.get_constants_blob_size == nullptr || api.get_constants_blob_size(d.container, &expected) != 0) return;
  if (ds.weights.empty() && expected > 0) {
    throw Error(ErrorCode::kInvalidProgram, d.label + ": the model library reads " + std::to_string(expected) +
                                                " bytes of weights but the program has no weights blob" +
                                                (ds.weights_key.empty() ? std::string("")
                                                                        : " ('" + ds.weights_key + "' is empty)"));
  }
  if (!ds.weights.empty() && expected > ds.weights.size) {
    throw Error(ErrorCode::kInvalidProgram, d.label + ": the weights blob '" + ds.weights_key + "' in " +
                                                ds.weights_file + " has " + std::to_string(ds.weights.size) +
                                                " bytes but the model library reads " + std::to_string(expected));
  }
}

namespace {

// For AOTI_CUDA_TRACE_WEIGHTS: where a blob's bytes came from, and why not
// from pinned memory when they did not.
std::string upload_path(bool locked, const StagedUploadResult& staged, const PageLock* lock) {
  if (locked) return "page-locked memory";
  if (staged.threads > 0) {
    return "pinned staging (" + std::to_string(staged.threads) + " copy threads, " +
           (staged.read_file ? "read from the file" : "copied from the mapping") + ")";
  }
  const std::string why = !staged.fallback.empty() ? staged.fallback
                          : lock != nullptr       ? lock->reason()
                                                  : "small blob: copied by the model library";
  return "pageable memory (" + why + ")";
}

}  // namespace

void MethodLoader::upload_weights(Delegate& d) {
  const DelegateSpec& ds = *d.spec;
  const ContainerApi& api = d.library->api();
  if (api.update_constants_from_blob == nullptr) {
    throw Error(ErrorCode::kLoad, d.label + ": the program has a weights blob ('" + ds.weights_key + "', " +
                                      std::to_string(ds.weights.size) +
                                      " bytes) but the model library does not export "
                                      "AOTInductorModelUpdateConstantsFromBlob");
  }
  const auto t0 = Clock::now();
  // The library copies constant by constant (synchronous cudaMemcpy from the
  // blob). From the pageable file mapping those copies would run at the
  // driver's staging speed, so by default they are recorded and carried out
  // by the SDK's pinned pipeline once the library returns
  // (runtime/weight_upload.hpp). Page-locking the mapped file in place
  // (cudaHostRegister) instead is opt-in: registering a large file-backed
  // mapping can stall (docs/design-measurements.md), and a load must never hang.
  std::unique_ptr<PageLock> lock;
  const bool large = target_.device.is_cuda() && ds.weights.size >= upload_thresholds().stage_from;
  if (large) {
    prefetch_pages(ds.weights);  // readahead for a cold page cache
    if (options_.tuning.page_lock_weights.value_or(false)) {
      lock = std::make_unique<PageLock>(ds.weights, target_.ordinal());
      if (!lock->locked() && stats_.upload_note.empty()) stats_.upload_note = d.label + ": " + lock->reason();
    }
  }
  const bool locked_in_place = lock && lock->locked();
  std::optional<WeightUploadScope> staging;
  if (large && !locked_in_place) {
    staging.emplace(ds.weights, target_.ordinal(), staging_.get(), upload_options(options_.tuning));
  }
  StagedUploadResult staged;
  aoti_cuda_shim_clear_error();
  {
    DeviceGuard guard(target_.ordinal());
    TrackModulesScope track(&d.kernel_modules);
    ModelMessageScope said;  // the model's stderr, for the Error
    shim::HandleCapture capture(shim::CreatedBy::kFromBlob, &d.constant_handles);
    if (api.update_constants_from_blob(d.container, ds.weights.data) != 0) {
      throw Error(model_failure_code(), d.label + ": installing the weights ('" + ds.weights_key + "' from " +
                                         ds.weights_file + ") with AOTInductorModelUpdateConstantsFromBlob failed: " +
                                         model_failure_detail(api));
    }
    if (staging) {
      try {
        staged = staging->flush();
      } catch (const Error& e) {
        throw Error(e.code(), d.label + ": installing the weights ('" + ds.weights_key + "' from " + ds.weights_file +
                                  "): " + e.what());
      }
      staging.reset();
    }
  }
  if (large && !locked_in_place && staged.bytes == 0) {
    // Nothing was recorded: the library copied its weights some other way
    // than the hooked cudaMemcpy (runtime/cuda_hooks.hpp).
    const std::vector<std::string>& bound = d.library->hooks().bound;
    const bool hooked = std::find(bound.begin(), bound.end(), "cudaMemcpy") != bound.end();
    staged.fallback = hooked ? "the model library made no host-to-device cudaMemcpy from the weights blob"
                             : "the model library does not import cudaMemcpy, so its weights copies could not be staged";
  }
  if (staged.threads == 0 && !staged.fallback.empty() && stats_.upload_note.empty()) {
    stats_.upload_note = d.label + ": " + staged.fallback;
  }
  const std::string path = trace_weights() ? upload_path(locked_in_place, staged, lock.get()) : std::string();
  lock.reset();  // unlocked before the time is taken: it is part of the cost
  const double ms = ms_since(t0);
  stats_.weight_bytes += ds.weights.size;
  stats_.page_locked_bytes += locked_in_place ? ds.weights.size : 0;
  stats_.staged_bytes += staged.threads > 0 ? staged.bytes : 0;
  stats_.upload_ms += ms;
  if (trace_weights()) {
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.2f ms (%.2f GB/s)", ms, static_cast<double>(ds.weights.size) / (ms * 1e6));
    log(LogLevel::kDebug, d.label + ": " + std::to_string(ds.weights.size) + " weight bytes uploaded in " + rate +
                              " from " + path);
  }
}

}  // namespace aoti_cuda::runtime
