// libtriton_aoti_cuda.so: a Triton Inference Server backend that serves
// ExecuTorch CUDA programs (model.pte + aoti_cuda_blob.ptd) through aoti_cuda.
// docs/triton.md describes the model directory, the parameters and the
// behaviour; this file is the implementation.
//
// Object model (each owned by the one above it):
//   ModelState     one per Triton model version: the parsed config and the
//                  loaded programs, one LoadedModule per device.
//   LoadedModule   one aoti_cuda::Module on one device, shared by every
//                  instance Triton places on that device (the weights exist
//                  once per device), with its sequences' Sessions.
//   InstanceState  one per Triton model instance: its device, its CUDA
//                  stream, its scratch outputs, a reference to the
//                  LoadedModule of its device.
// Triton calls the instance functions of one instance from one thread at a
// time (execution policy BLOCKING), several instances concurrently; the
// Module allows that (LoadOptions::num_models calls per method at once).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/log.hpp"
#include "triton_c_api.h"

namespace aoti_triton {
namespace {

using json = nlohmann::json;
using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Tensor;
using Clock = std::chrono::steady_clock;

// ---- errors -----------------------------------------------------------------

// What the backend throws internally; every entry point turns it (and
// aoti_cuda::Error, and anything else) into one TRITONSERVER_Error.
struct BackendError {
  TRITONSERVER_Error_Code code;
  std::string message;
};

[[noreturn]] void fail(TRITONSERVER_Error_Code code, std::string message) {
  throw BackendError{code, std::move(message)};
}
[[noreturn]] void invalid(std::string message) { fail(TRITONSERVER_ERROR_INVALID_ARG, std::move(message)); }

// A failed call into the server: its message, prefixed with what we were doing.
void check(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  BackendError e{TRITONSERVER_ErrorCode(err), std::string(what) + ": " + TRITONSERVER_ErrorMessage(err)};
  TRITONSERVER_ErrorDelete(err);
  throw e;
}

TRITONSERVER_Error_Code triton_code(aoti_cuda::ErrorCode code) {
  switch (code) {
    case aoti_cuda::ErrorCode::kInvalidArgument: return TRITONSERVER_ERROR_INVALID_ARG;
    case aoti_cuda::ErrorCode::kNotFound: return TRITONSERVER_ERROR_NOT_FOUND;
    case aoti_cuda::ErrorCode::kUnsupported: return TRITONSERVER_ERROR_UNSUPPORTED;
    case aoti_cuda::ErrorCode::kNoDevice: return TRITONSERVER_ERROR_UNAVAILABLE;
    default: return TRITONSERVER_ERROR_INTERNAL;
  }
}

// Runs `body`, returning nullptr or the error it raised as a TRITONSERVER_Error.
template <typename F>
TRITONSERVER_Error* guarded(const char* where, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const BackendError& e) {
    return TRITONSERVER_ErrorNew(e.code, e.message.c_str());
  } catch (const aoti_cuda::Error& e) {
    const std::string msg = std::string("aoti_cuda (") + to_string(e.code()) + "): " + e.what();
    return TRITONSERVER_ErrorNew(triton_code(e.code()), msg.c_str());
  } catch (const std::exception& e) {
    const std::string msg = std::string(where) + ": " + e.what();
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg.c_str());
  } catch (...) {
    const std::string msg = std::string(where) + ": unknown exception";
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg.c_str());
  }
}

void log(TRITONSERVER_LogLevel level, const std::string& message) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, "aoti_cuda", 0, message.c_str())) {
    TRITONSERVER_ErrorDelete(e);
  }
}

void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    fail(TRITONSERVER_ERROR_INTERNAL, std::string(what) + " failed: " + cudaGetErrorString(rc));
  }
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// ---- data types ----------------------------------------------------------------

struct TypeName {
  DType dtype;
  TRITONSERVER_DataType triton;
  const char* config;  // model config spelling
  const char* wire;    // protocol spelling, used in messages
};
constexpr TypeName kTypes[] = {
    {DType::kFloat32, TRITONSERVER_TYPE_FP32, "TYPE_FP32", "FP32"},
    {DType::kFloat16, TRITONSERVER_TYPE_FP16, "TYPE_FP16", "FP16"},
    {DType::kBFloat16, TRITONSERVER_TYPE_BF16, "TYPE_BF16", "BF16"},
    {DType::kFloat64, TRITONSERVER_TYPE_FP64, "TYPE_FP64", "FP64"},
    {DType::kInt64, TRITONSERVER_TYPE_INT64, "TYPE_INT64", "INT64"},
    {DType::kInt32, TRITONSERVER_TYPE_INT32, "TYPE_INT32", "INT32"},
    {DType::kInt16, TRITONSERVER_TYPE_INT16, "TYPE_INT16", "INT16"},
    {DType::kInt8, TRITONSERVER_TYPE_INT8, "TYPE_INT8", "INT8"},
    {DType::kUInt8, TRITONSERVER_TYPE_UINT8, "TYPE_UINT8", "UINT8"},
    {DType::kUInt16, TRITONSERVER_TYPE_UINT16, "TYPE_UINT16", "UINT16"},
    {DType::kBool, TRITONSERVER_TYPE_BOOL, "TYPE_BOOL", "BOOL"},
};

const TypeName* find_type(DType d) {
  for (const auto& t : kTypes)
    if (t.dtype == d) return &t;
  return nullptr;
}
const char* wire_name(TRITONSERVER_DataType d) {
  for (const auto& t : kTypes)
    if (t.triton == d) return t.wire;
  return d == TRITONSERVER_TYPE_BYTES ? "BYTES" : "an unsupported type";
}
const TypeName& type_of(DType d, const std::string& what) {
  const TypeName* t = find_type(d);
  if (t == nullptr) fail(TRITONSERVER_ERROR_UNSUPPORTED, what + " has dtype " + aoti_cuda::dtype_name(d) +
                                                           ", which Triton cannot carry");
  return *t;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// ---- config helpers -------------------------------------------------------------

// Triton's JSON form of the config prints 64-bit integers as strings or numbers.
int64_t json_int(const json& v, const std::string& what) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(s, &used);
    } catch (...) {
      used = 0;
    }
    if (used == s.size() && !s.empty()) return x;
  }
  invalid("config.pbtxt: " + what + " is not an integer: " + v.dump());
}

bool parse_bool(const std::string& s, const std::string& what) {
  if (s == "true" || s == "1" || s == "on" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "off" || s == "no") return false;
  invalid("config.pbtxt: parameter " + what + " must be true or false, got '" + s + "'");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',' || c == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// The parameters of config.pbtxt this backend reads (docs/triton.md).
struct Params {
  std::vector<std::string> methods;     // "methods": empty = every runnable method
  bool cuda_graphs = false;             // "cuda_graphs"
  aoti_cuda::StateSharing share_state;  // "share_state": "all" or FQNs
  std::size_t num_models = 0;           // "num_models": 0 = instances on the device
  std::string pte = "model.pte";        // "pte": the program's file name in the version folder
};

Params parse_params(const json& config) {
  Params p;
  auto it = config.find("parameters");
  if (it == config.end() || !it->is_object()) return p;
  for (auto& [key, value] : it->items()) {
    std::string v;
    if (value.is_object() && value.contains("string_value")) v = value["string_value"].get<std::string>();
    else if (value.is_string()) v = value.get<std::string>();
    else invalid("config.pbtxt: parameter " + key + " has no string_value");
    if (key == "methods" || key == "method") {
      p.methods = split_list(v);
    } else if (key == "cuda_graphs") {
      p.cuda_graphs = parse_bool(v, key);
    } else if (key == "share_state") {
      if (v == "all") p.share_state = aoti_cuda::StateSharing::all();
      else if (v == "none" || v.empty()) p.share_state = {};
      else p.share_state.fqns = split_list(v);
    } else if (key == "num_models") {
      const int64_t n = json_int(json(v), "parameter num_models");
      if (n < 1 || n > 1024) invalid("config.pbtxt: parameter num_models must be 1..1024, got " + v);
      p.num_models = static_cast<std::size_t>(n);
    } else if (key == "pte") {
      if (v.empty() || v.find('/') != std::string::npos) invalid("config.pbtxt: parameter pte must be a file name, got '" + v + "'");
      p.pte = v;
    } else {
      invalid("config.pbtxt: unknown parameter '" + key +
              "' (the aoti_cuda backend reads methods, cuda_graphs, share_state, num_models, pte)");
    }
  }
  return p;
}

json read_config(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* msg = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1, &msg), "reading the model configuration");
  const char* base = nullptr;
  std::size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(msg, &base, &size);
  json config;
  if (err == nullptr) config = json::parse(base, base + size, nullptr, false);
  TRITONSERVER_MessageDelete(msg);
  check(err, "serializing the model configuration");
  if (config.is_discarded() || !config.is_object()) fail(TRITONSERVER_ERROR_INTERNAL, "the model configuration is not JSON");
  return config;
}

// ---- methods and their Triton tensor names ------------------------------------------

// One served method: its signature and the Triton names of its tensors.
struct MethodInfo {
  std::string name;
  aoti_cuda::MethodMeta meta;
  std::vector<std::string> inputs, outputs;  // Triton names, parallel to meta.inputs / meta.outputs
  bool static_outputs = true;                // every output has a fixed shape: bound outputs (execute_into)
};

// The library's argument names, or input_<i> / output_<i> where it gives none
// (or gives one twice).
std::vector<std::string> tensor_names(const std::vector<std::string>& given, std::size_t n, const char* prefix) {
  std::vector<std::string> names(n);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = i < given.size() ? given[i] : "";
    if (s.empty() || seen.count(s)) s = prefix + std::to_string(i);
    seen.insert(s);
    names[i] = s;
  }
  return names;
}

std::vector<int64_t> config_dims(const aoti_cuda::TensorSpec& spec, const std::vector<aoti_cuda::DynamicDim>& dyn) {
  std::vector<int64_t> dims = spec.sizes;
  for (const auto& d : dyn)
    if (d.dim < dims.size()) dims[d.dim] = -1;
  return dims;
}

// One tensor of the Triton model: a name of one or more methods' inputs or outputs.
struct IoEntry {
  DType dtype;
  std::vector<int64_t> dims;  // -1 where it varies (within a method, or between methods)
  std::set<std::string> methods;
};

// The Triton model's inputs and outputs: the union over the served methods.
// A name two methods share must have the same dtype and rank in both.
void collect_io(const std::vector<MethodInfo>& methods, std::map<std::string, IoEntry>& inputs,
                std::map<std::string, IoEntry>& outputs) {
  auto add = [](std::map<std::string, IoEntry>& into, const std::string& name, const aoti_cuda::TensorSpec& spec,
                const std::vector<aoti_cuda::DynamicDim>& dyn, const std::string& method) {
    std::vector<int64_t> dims = config_dims(spec, dyn);
    auto it = into.find(name);
    if (it == into.end()) {
      into[name] = IoEntry{spec.dtype, dims, {method}};
      return;
    }
    IoEntry& e = it->second;
    if (e.dtype != spec.dtype || e.dims.size() != dims.size()) {
      invalid("tensor '" + name + "' of method '" + method + "' (" + aoti_cuda::dtype_name(spec.dtype) + " " +
              dims_text(dims) + ") differs in dtype or rank from the same name in method '" + *e.methods.begin() +
              "': serve these methods as separate models (parameter methods) or write their inputs and outputs "
              "in config.pbtxt");
    }
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (e.dims[i] != dims[i]) e.dims[i] = -1;
    e.methods.insert(method);
  };
  for (const MethodInfo& m : methods) {
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      add(inputs, m.inputs[i], m.meta.inputs[i], m.meta.dynamic_dims[i], m.name);
    }
    for (std::size_t i = 0; i < m.outputs.size(); ++i) {
      std::vector<aoti_cuda::DynamicDim> dyn;
      if (m.meta.outputs[i].dynamic) {  // an output's varying dimensions are not known: all vary
        for (std::size_t d = 0; d < m.meta.outputs[i].sizes.size(); ++d) dyn.push_back({d, m.meta.outputs[i].sizes[d]});
      }
      add(outputs, m.outputs[i], m.meta.outputs[i], dyn, m.name);
    }
  }
}

// ---- a Module on one device, with its sequences -------------------------------------

class LoadedModule {
 public:
  LoadedModule(const std::string& pte, const aoti_cuda::LoadOptions& options) : module_(pte, options) {
    stateful_ = module_.state_bytes() > 0;
    default_method_ = module_.default_method();
    for (const std::string& name : module_.method_names()) {
      MethodInfo m;
      m.name = name;
      m.meta = module_.method_meta(name);
      m.inputs = tensor_names(m.meta.input_names, m.meta.inputs.size(), "input_");
      m.outputs = tensor_names(m.meta.output_names, m.meta.outputs.size(), "output_");
      for (const auto& o : m.meta.outputs) m.static_outputs = m.static_outputs && !o.dynamic;
      for (std::size_t i = 0; i < m.meta.inputs.size(); ++i) type_of(m.meta.inputs[i].dtype, "input '" + m.inputs[i] + "' of method '" + name + "'");
      for (std::size_t i = 0; i < m.meta.outputs.size(); ++i) type_of(m.meta.outputs[i].dtype, "output '" + m.outputs[i] + "' of method '" + name + "'");
      methods_.push_back(std::move(m));
    }
  }
  ~LoadedModule() {
    // Sessions before the Module (a Session must not outlive it).
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.clear();
  }

  aoti_cuda::Module& module() { return module_; }
  const std::vector<MethodInfo>& methods() const { return methods_; }
  const std::string& default_method() const { return default_method_; }
  bool stateful() const { return stateful_; }

  const MethodInfo* find(const std::string& name) const {
    for (const auto& m : methods_)
      if (m.name == name) return &m;
    return nullptr;
  }
  std::string method_list() const {
    std::string s;
    for (const auto& m : methods_) s += (s.empty() ? "" : ", ") + m.name;
    return s;
  }

  // The Session of sequence `id`: START makes it (or resets the one it had);
  // otherwise it must exist. Sessions idle for longer than `idle_release`
  // are released first (Triton ends a sequence idle longer than its
  // max_sequence_idle_microseconds without telling the backend).
  std::shared_ptr<aoti_cuda::Session> session(const std::string& id, bool start, void* stream,
                                              std::chrono::microseconds idle_release) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->first != id && now - it->second.last_used > idle_release) {
        log(TRITONSERVER_LOG_INFO, "aoti_cuda: released the state of sequence " + it->first + " (idle longer than " +
                                       std::to_string(idle_release.count() / 1000) + " ms)");
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    auto it = sessions_.find(id);
    if (start) {
      if (it == sessions_.end()) {
        it = sessions_.emplace(id, Entry{std::make_shared<aoti_cuda::Session>(module_.create_session()), now}).first;
      } else {
        it->second.session->reset(stream);
      }
    } else if (it == sessions_.end()) {
      invalid("sequence " + id + " has no state here: its first request must carry the START flag (a sequence idle "
              "longer than the model's max_sequence_idle_microseconds is released)");
    }
    it->second.last_used = now;
    return it->second.session;
  }
  void end_sequence(const std::string& id) {
    std::shared_ptr<aoti_cuda::Session> released;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sessions_.find(id);
      if (it == sessions_.end()) return;
      released = std::move(it->second.session);
      sessions_.erase(it);
    }
    // Destroyed here, outside the lock: ~Session waits for work using it.
  }
  std::size_t live_sessions() {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
  }

 private:
  struct Entry {
    std::shared_ptr<aoti_cuda::Session> session;
    Clock::time_point last_used;
  };
  aoti_cuda::Module module_;  // first member: destroyed last
  std::vector<MethodInfo> methods_;
  std::string default_method_;
  bool stateful_ = false;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> sessions_;
};

// ---- model state --------------------------------------------------------------------

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

class ModelState {
 public:
  explicit ModelState(TRITONBACKEND_Model* model) : triton_(model) {
    const char* name = nullptr;
    check(TRITONBACKEND_ModelName(model, &name), "TRITONBACKEND_ModelName");
    name_ = name;
    check(TRITONBACKEND_ModelVersion(model, &version_), "TRITONBACKEND_ModelVersion");
    TRITONBACKEND_ArtifactType type;
    const char* location = nullptr;
    check(TRITONBACKEND_ModelRepository(model, &type, &location), "TRITONBACKEND_ModelRepository");
    if (type != TRITONBACKEND_ARTIFACT_FILESYSTEM) fail(TRITONSERVER_ERROR_UNSUPPORTED, "model " + name_ + ": the repository is not on a file system");
    config_ = read_config(model);
    params_ = parse_params(config_);
    pte_ = std::string(location) + "/" + std::to_string(version_) + "/" + params_.pte;
    // max_batch_size > 0: Triton's batch dimension is the program's first
    // dimension, so every input and output must have a dynamic first dimension
    // bounded by at least max_batch_size (checked in validate_config).
    if (config_.contains("max_batch_size")) max_batch_ = json_int(config_["max_batch_size"], "max_batch_size");
    if (max_batch_ < 0) invalid("model " + name_ + ": max_batch_size must be >= 0, got " + std::to_string(max_batch_));
    if (auto sb = config_.find("sequence_batching"); sb != config_.end()) {
      sequences_ = true;
      int64_t us = 0;
      if (sb->contains("max_sequence_idle_microseconds")) us = json_int((*sb)["max_sequence_idle_microseconds"], "max_sequence_idle_microseconds");
      if (us <= 0) us = 1000000;  // Triton's default
      // Twice Triton's own timeout: Triton ends the sequence first, so a request
      // it accepted never finds its state gone.
      idle_release_ = std::chrono::microseconds(2 * us);
    }

    bool auto_complete = false;
    check(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete), "TRITONBACKEND_ModelAutoCompleteConfig");
    const bool has_io = (config_.contains("input") && !config_["input"].empty()) ||
                        (config_.contains("output") && !config_["output"].empty());
    if (!has_io) {
      if (!auto_complete) invalid("model " + name_ + ": config.pbtxt lists no inputs or outputs and auto-complete is disabled");
      // The tensor names come from the model libraries, so a Module is loaded
      // now; the instances on the same device reuse it.
      hold_ = acquire(autocomplete_device(), /*validate=*/false);
      // dynamic_batching without max_batch_size: the largest batch every
      // served method can take (the smallest first-dimension bound).
      if (max_batch_ == 0 && config_.contains("dynamic_batching") && !sequences_) max_batch_ = propose_max_batch(*hold_);
      complete_config(*hold_);
      validate_config(*hold_);
    }
  }

  const std::string& name() const { return name_; }
  bool sequences() const { return sequences_; }
  int64_t max_batch() const { return max_batch_; }
  std::chrono::microseconds idle_release() const { return idle_release_; }

  // The LoadedModule of `device`: loaded by the first instance there, shared by the others.
  std::shared_ptr<LoadedModule> acquire(Device device, bool validate = true) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = device.str();
    if (auto existing = loaded_[key].lock()) return existing;
    aoti_cuda::LoadOptions options;
    options.device = device;
    options.methods = params_.methods;
    options.cuda_graphs = params_.cuda_graphs;
    options.share_state = params_.share_state;
    options.num_models = params_.num_models ? params_.num_models : instances_on(device);
    const auto t0 = Clock::now();
    auto lm = std::make_shared<LoadedModule>(pte_, options);
    if (validate) validate_config(*lm);
    if (lm->stateful() && !sequences_) {
      log(TRITONSERVER_LOG_WARN, "aoti_cuda: model " + name_ + " has mutable state but no sequence_batching: every "
                                 "request reads and writes the same state");
    }
    log(TRITONSERVER_LOG_INFO,
        "aoti_cuda: loaded " + pte_ + " on " + key + " (methods " + lm->method_list() + ", " +
            std::to_string(options.num_models) + " concurrent calls per method, state " +
            std::to_string(lm->module().state_bytes()) + " bytes) in " +
            std::to_string(std::chrono::duration<double, std::milli>(Clock::now() - t0).count()) + " ms");
    loaded_[key] = lm;
    return lm;
  }
  void release_hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_.reset();
  }

 private:
  // Where a Module for auto-completion is loaded: where the first instance
  // group puts its first instance, else GPU 0, else the CPU.
  Device autocomplete_device() const {
    if (auto groups = config_.find("instance_group"); groups != config_.end() && groups->is_array() && !groups->empty()) {
      const json& g = (*groups)[0];
      const std::string kind = g.value("kind", "KIND_AUTO");
      if (kind == "KIND_CPU") return Device::cpu();
      if (g.contains("gpus") && g["gpus"].is_array() && !g["gpus"].empty()) return Device::cuda(static_cast<int>(json_int(g["gpus"][0], "gpus")));
      if (kind == "KIND_GPU") return Device::cuda(0);
    }
    return gpu_count() > 0 ? Device::cuda(0) : Device::cpu();
  }

  // How many instances the config puts on `device` (the default num_models).
  std::size_t instances_on(Device device) {
    json config = config_;
    try {
      config = read_config(triton_);  // normalized by now when instances are created
    } catch (const BackendError&) {
    }
    std::size_t n = 0;
    const int gpus = device.is_cuda() ? gpu_count() : 0;
    if (auto groups = config.find("instance_group"); groups != config.end() && groups->is_array()) {
      for (const json& g : *groups) {
        const std::size_t count = g.contains("count") ? static_cast<std::size_t>(std::max<int64_t>(1, json_int(g["count"], "count"))) : 1;
        std::string kind = g.value("kind", "KIND_AUTO");
        if (kind == "KIND_AUTO") kind = gpus > 0 ? "KIND_GPU" : "KIND_CPU";
        if (device.is_cpu() && kind == "KIND_CPU") n += count;
        if (device.is_cuda() && kind == "KIND_GPU") {
          bool here = true;
          if (g.contains("gpus") && g["gpus"].is_array() && !g["gpus"].empty()) {
            here = false;
            for (const json& id : g["gpus"]) here = here || json_int(id, "gpus") == device.index;
          }
          if (here) n += count;
        }
      }
    }
    return std::max<std::size_t>(1, n);
  }

  // Fills inputs and outputs (names, types, dims with -1 where they vary) from
  // the methods' signatures; inputs only some methods take are optional.
  void complete_config(const LoadedModule& lm) {
    std::map<std::string, IoEntry> inputs, outputs;
    collect_io(lm.methods(), inputs, outputs);
    json in = json::array(), out = json::array();
    for (const auto& [name, e] : inputs) {
      json t = {{"name", name}, {"data_type", find_type(e.dtype)->config}, {"dims", e.dims}};
      if (e.methods.size() < lm.methods().size()) t["optional"] = true;
      in.push_back(t);
    }
    for (const auto& [name, e] : outputs) out.push_back({{"name", name}, {"data_type", find_type(e.dtype)->config}, {"dims", e.dims}});
    if (max_batch_ > 0) {
      // Triton's convention: with max_batch_size > 0 the batch dimension is
      // implicit, left out of dims (check_batchable made sure every tensor has one).
      check_batchable(lm, max_batch_);
      for (json* t : {&in, &out})
        for (json& e : *t) e["dims"].erase(e["dims"].begin());
    }
    config_["input"] = in;
    config_["output"] = out;
    config_["max_batch_size"] = max_batch_;
    const std::string text = config_.dump();
    TRITONSERVER_Message* msg = nullptr;
    check(TRITONSERVER_MessageNewFromSerializedJson(&msg, text.data(), text.size()), "building the completed configuration");
    TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(triton_, 1, msg);
    TRITONSERVER_MessageDelete(msg);
    check(err, "TRITONBACKEND_ModelSetConfig");
    log(TRITONSERVER_LOG_INFO, "aoti_cuda: model " + name_ + ": configuration completed from the program: " + in.dump() + " -> " + out.dump());
  }

  // A written config must name every tensor of every served method, with its dtype.
  void validate_config(const LoadedModule& lm) const {
    auto check_list = [&](const char* key, const std::vector<std::string>& names, const std::vector<aoti_cuda::TensorSpec>& specs,
                          const std::string& method) {
      const json list = config_.value(key, json::array());
      for (std::size_t i = 0; i < names.size(); ++i) {
        const json* found = nullptr;
        for (const json& t : list)
          if (t.value("name", "") == names[i]) found = &t;
        const TypeName& type = type_of(specs[i].dtype, std::string(key) + " '" + names[i] + "'");
        if (found == nullptr) {
          invalid("model " + name_ + ": config.pbtxt has no " + key + " '" + names[i] + "' (" + key + " " +
                  std::to_string(i) + " of method '" + method + "', " + type.config + " " + dims_text(specs[i].sizes) +
                  "); add it, or leave input and output out of config.pbtxt to have them filled in");
        }
        const std::string dt = found->value("data_type", "");
        if (dt != type.config) {
          invalid("model " + name_ + ": config.pbtxt gives " + key + " '" + names[i] + "' data_type " + dt +
                  ", but method '" + method + "' takes " + type.config);
        }
      }
    };
    for (const MethodInfo& m : lm.methods()) {
      check_list("input", m.inputs, m.meta.inputs, m.name);
      check_list("output", m.outputs, m.meta.outputs, m.name);
    }
    if (max_batch_ > 0) check_batchable(lm, max_batch_);
  }

  // The first-dimension bound of every input and output of `m` (its largest
  // batch), or a message naming the first tensor without a dynamic first dimension.
  static int64_t batch_bound(const MethodInfo& m, std::string* why) {
    int64_t bound = INT64_MAX;
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      const auto& dyn = m.meta.dynamic_dims[i];
      auto d0 = std::find_if(dyn.begin(), dyn.end(), [](const aoti_cuda::DynamicDim& d) { return d.dim == 0; });
      if (d0 == dyn.end()) {
        *why = "input '" + m.inputs[i] + "' of method '" + m.name + "' has shape " + dims_text(m.meta.inputs[i].sizes) +
               " with no dynamic first dimension";
        return -1;
      }
      bound = std::min(bound, d0->max);
    }
    for (std::size_t j = 0; j < m.outputs.size(); ++j) {
      const auto& spec = m.meta.outputs[j];
      if (!spec.dynamic || spec.sizes.empty()) {
        *why = "output '" + m.outputs[j] + "' of method '" + m.name + "' has the fixed shape " + dims_text(spec.sizes);
        return -1;
      }
      bound = std::min(bound, spec.sizes[0]);
    }
    return bound;
  }

  void check_batchable(const LoadedModule& lm, int64_t n) const {
    for (const MethodInfo& m : lm.methods()) {
      std::string why;
      if (batch_bound(m, &why) < 0) {
        invalid("model " + name_ + ": max_batch_size " + std::to_string(n) + " needs a dynamic first dimension (the batch) "
                "in every input and output, but " + why + "; set max_batch_size: 0 to run each request on its own");
      }
      for (std::size_t i = 0; i < m.inputs.size(); ++i)
        for (const auto& d : m.meta.dynamic_dims[i])
          if (d.dim == 0 && d.max < n) {
            invalid("model " + name_ + ": max_batch_size " + std::to_string(n) + " exceeds the bound of input '" +
                    m.inputs[i] + "' of method '" + m.name + "': its first dimension goes up to " + std::to_string(d.max));
          }
      for (std::size_t j = 0; j < m.outputs.size(); ++j)
        if (m.meta.outputs[j].sizes[0] < n) {
          invalid("model " + name_ + ": max_batch_size " + std::to_string(n) + " exceeds the bound of output '" +
                  m.outputs[j] + "' of method '" + m.name + "': its first dimension goes up to " +
                  std::to_string(m.meta.outputs[j].sizes[0]));
        }
    }
  }

  int64_t propose_max_batch(const LoadedModule& lm) const {
    int64_t n = INT64_MAX;
    for (const MethodInfo& m : lm.methods()) {
      std::string why;
      const int64_t b = batch_bound(m, &why);
      if (b < 0) invalid("model " + name_ + ": dynamic_batching needs a dynamic first dimension (the batch) in every input and output, but " + why);
      n = std::min(n, b);
    }
    if (n < 1) invalid("model " + name_ + ": dynamic_batching: the first dimensions are bounded by 0");
    log(TRITONSERVER_LOG_INFO, "aoti_cuda: model " + name_ + ": max_batch_size set to " + std::to_string(n) + " (the smallest first-dimension bound)");
    return n;
  }

  TRITONBACKEND_Model* triton_;
  std::string name_;
  uint64_t version_ = 0;
  json config_;
  Params params_;
  std::string pte_;
  bool sequences_ = false;
  int64_t max_batch_ = 0;
  std::chrono::microseconds idle_release_{0};
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<LoadedModule>> loaded_;
  std::shared_ptr<LoadedModule> hold_;  // the auto-completion's Module, until an instance takes it
};

// ---- instance -----------------------------------------------------------------------

class InstanceState {
 public:
  InstanceState(TRITONBACKEND_ModelInstance* instance, ModelState& model) : triton_(instance), model_(model) {
    const char* name = nullptr;
    check(TRITONBACKEND_ModelInstanceName(instance, &name), "TRITONBACKEND_ModelInstanceName");
    name_ = name;
    TRITONSERVER_InstanceGroupKind kind;
    check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "TRITONBACKEND_ModelInstanceKind");
    int32_t id = 0;
    check(TRITONBACKEND_ModelInstanceDeviceId(instance, &id), "TRITONBACKEND_ModelInstanceDeviceId");
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
      device_ = Device::cuda(id);
    } else if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) {
      device_ = Device::cpu();  // CPU model libraries only (tests); a CUDA program refuses to load here
    } else {
      fail(TRITONSERVER_ERROR_UNSUPPORTED, "instance " + name_ + ": the aoti_cuda backend supports KIND_GPU and KIND_CPU instance groups");
    }
    lm_ = model.acquire(device_);
    model.release_hold();
    if (device_.is_cuda()) {
      cuda_check(cudaSetDevice(device_.index), "cudaSetDevice");
      cudaStream_t s = nullptr;
      cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      stream_ = s;
    }
    log(TRITONSERVER_LOG_INFO, "aoti_cuda: instance " + name_ + " on " + device_.str());
  }
  ~InstanceState() {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
      scratch_.clear();
      lm_.reset();  // the Module may free outputs on this stream: destroy it first when it is ours alone
      cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    }
  }

  void execute(TRITONBACKEND_Request** requests, uint32_t count) {
    // Sequences keep one call per request: each request has its own state.
    if (model_.max_batch() > 0 && !model_.sequences()) {
      execute_batched(requests, count);
      return;
    }
    for (uint32_t r = 0; r < count; ++r) {
      TRITONBACKEND_Request* request = requests[r];
      const uint64_t exec_start = now_ns();
      uint64_t compute_start = exec_start, compute_end = exec_start;
      TRITONBACKEND_Response* response = nullptr;
      TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
      if (err == nullptr) {
        err = guarded("aoti_cuda backend", [&] { run_request(request, response, compute_start, compute_end); });
        TRITONSERVER_Error* send = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
        if (send != nullptr) {
          log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: sending a response failed: ") + TRITONSERVER_ErrorMessage(send));
          TRITONSERVER_ErrorDelete(send);
        }
      } else {
        log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: cannot create a response: ") + TRITONSERVER_ErrorMessage(err));
      }
      const bool ok = err == nullptr;
      if (err != nullptr) TRITONSERVER_ErrorDelete(err);  // ResponseSend does not take it over
      const uint64_t exec_end = now_ns();
      if (ok) compute_end = std::max(compute_end, compute_start);
      report(TRITONBACKEND_ModelInstanceReportStatistics(triton_, request, ok, exec_start, compute_start, compute_end, exec_end));
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(triton_, 1, exec_start, compute_start, compute_end, exec_end));
      report(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
  }

 private:
  // ---- dynamic batching (max_batch_size > 0, no sequences) ----
  //
  // Each request is checked on its own (a bad one gets its own error and is
  // left out), the good ones are grouped by method and by the non-batch dims
  // of their inputs, each group's inputs are concatenated along dim 0 and run
  // in ONE call, and the outputs' rows are split back in request order.

  struct Pending {
    TRITONBACKEND_Request* request = nullptr;
    TRITONBACKEND_Response* response = nullptr;  // null when Triton could not make one
    TRITONSERVER_Error* err = nullptr;           // this request's failure, sent with its response
    const MethodInfo* method = nullptr;
    int64_t rows = 0;                            // its batch size: the inputs' first dimension
    std::vector<std::vector<int64_t>> shapes;    // per input
    std::vector<TRITONBACKEND_Input*> handles;   // per input
    std::vector<uint32_t> buffers;               // per input
    std::set<std::string> requested;
    uint64_t compute_start = 0, compute_end = 0;
  };

  // Request ID for log lines and errors ("" when the client gave none).
  static std::string request_label(TRITONBACKEND_Request* request) {
    const char* id = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestId(request, &id)) {
      TRITONSERVER_ErrorDelete(e);
      return "";
    }
    return id != nullptr && *id ? std::string("request '") + id + "': " : "";
  }

  void prepare(Pending& p) {
    p.method = find_method(method_name(p.request));
    const MethodInfo& m = *p.method;
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      TRITONBACKEND_Input* h = nullptr;
      uint32_t n = 0;
      p.shapes.push_back(check_input(p.request, m, i, &h, &n));
      p.handles.push_back(h);
      p.buffers.push_back(n);
      // check_batchable made every input's first dimension dynamic, so rank >= 1.
      if (i == 0) {
        p.rows = p.shapes[0][0];
      } else if (p.shapes[i][0] != p.rows) {
        invalid("input '" + m.inputs[i] + "' of method '" + m.name + "' has " + std::to_string(p.shapes[i][0]) +
                " rows but input '" + m.inputs[0] + "' has " + std::to_string(p.rows) +
                ": with max_batch_size > 0 every input's first dimension is the request's batch size");
      }
    }
    uint32_t n_out = 0;
    check(TRITONBACKEND_RequestOutputCount(p.request, &n_out), "TRITONBACKEND_RequestOutputCount");
    for (uint32_t o = 0; o < n_out; ++o) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(p.request, o, &name), "TRITONBACKEND_RequestOutputName");
      p.requested.insert(name);
    }
  }

  // Requests that may share one call: same method, same non-batch dims.
  static bool compatible(const Pending& a, const Pending& b) {
    if (a.method != b.method) return false;
    for (std::size_t i = 0; i < a.shapes.size(); ++i)
      if (!std::equal(a.shapes[i].begin() + 1, a.shapes[i].end(), b.shapes[i].begin() + 1, b.shapes[i].end())) return false;
    return true;
  }

  // The most rows one call of `m` takes: its smallest first-dimension bound.
  static int64_t row_limit(const MethodInfo& m) {
    int64_t n = INT64_MAX;
    for (const auto& dyn : m.meta.dynamic_dims)
      for (const auto& d : dyn)
        if (d.dim == 0) n = std::min(n, d.max);
    for (const auto& o : m.meta.outputs) n = std::min(n, o.sizes[0]);
    return n;
  }

  // Copies `bytes` between host or device pointers; host-to-host never
  // touches CUDA (CPU instances run on machines without a GPU).
  void copy_bytes(void* dst, bool dst_host, const void* src, bool src_host, std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_host && src_host) {
      std::memcpy(dst, src, bytes);
    } else if (stream_ != nullptr) {
      cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)), "cudaMemcpyAsync (output)");
    } else {
      cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy (output)");
    }
  }

  // One call for the requests `group` (indices into `all`, in request order).
  // A failure of the call itself fails every request of the group; a failure
  // while filling one response fails that request only.
  void run_group(std::vector<Pending>& all, const std::vector<std::size_t>& group, int64_t total_rows) {
    const MethodInfo& m = *all[group[0]].method;
    std::vector<std::vector<char>> keep;  // host staging buffers, alive until the call returns
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < m.inputs.size(); ++i) {
      if (group.size() == 1) {  // a request alone: its buffer is passed through
        inputs.push_back(take_input(all[group[0]].request, m, i, keep));
        continue;
      }
      std::vector<int64_t> shape = all[group[0]].shapes[i];
      shape[0] = total_rows;
      keep.emplace_back(bytes_of(shape, m.meta.inputs[i].dtype));
      char* dst = keep.back().data();
      for (std::size_t r : group) {
        const uint64_t bytes = bytes_of(all[r].shapes[i], m.meta.inputs[i].dtype);
        gather_input(all[r].handles[i], all[r].buffers[i], m.inputs[i], dst, bytes);
        dst += bytes;
      }
      inputs.push_back(Tensor::from_blob(keep.back().data(), shape, m.meta.inputs[i].dtype, Device::cpu()));
    }
    aoti_cuda::RunOptions run;
    run.stream = stream_;
    run.outputs = aoti_cuda::OutputLocation::kDevice;
    const uint64_t start = now_ns();
    for (std::size_t r : group) all[r].compute_start = start;
    std::vector<Tensor> outs = lm_->module().execute(m.name, inputs, run);
    for (std::size_t j = 0; j < outs.size() && j < m.outputs.size(); ++j) {
      if (outs[j].shape().empty() || outs[j].shape()[0] != total_rows) {
        fail(TRITONSERVER_ERROR_INTERNAL, "output '" + m.outputs[j] + "' of method '" + m.name + "' has shape " +
                                              dims_text(outs[j].shape()) + " for a batch of " + std::to_string(total_rows) +
                                              " rows: its first dimension is not the batch");
      }
    }
    // Split: request r gets rows [offset, offset + rows) of every output it
    // asked for (execute returns contiguous tensors, so a row is
    // nbytes / rows bytes and a request's rows are one run of bytes).
    const bool out_host = device_.is_cpu();
    int64_t offset = 0;
    for (std::size_t r : group) {
      Pending& p = all[r];
      const int64_t first = offset;
      offset += p.rows;
      if (p.response == nullptr) continue;
      p.err = guarded("aoti_cuda backend", [&] {
        for (std::size_t j = 0; j < m.outputs.size(); ++j) {
          if (!p.requested.count(m.outputs[j])) continue;
          std::vector<int64_t> shape = outs[j].shape();
          shape[0] = p.rows;
          const std::size_t row_bytes = outs[j].nbytes() / static_cast<std::size_t>(total_rows ? total_rows : 1);
          void* copy_to = nullptr;
          TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
          Tensor t = response_output(p.response, m.outputs[j], outs[j].dtype(), shape, &copy_to, &type);
          void* dst = t.defined() ? t.data() : copy_to;
          const bool dst_host = t.defined() ? t.device().is_cpu() : type != TRITONSERVER_MEMORY_GPU;
          copy_bytes(dst, dst_host, static_cast<const char*>(outs[j].data()) + first * row_bytes, out_host,
                     row_bytes * static_cast<std::size_t>(p.rows));
        }
      });
    }
    // Triton reads the response buffers once it has them.
    if (stream_ != nullptr) cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
    const uint64_t end = now_ns();
    for (std::size_t r : group) all[r].compute_end = end;
  }

  void execute_batched(TRITONBACKEND_Request** requests, uint32_t count) {
    const uint64_t exec_start = now_ns();
    std::vector<Pending> all(count);
    for (uint32_t r = 0; r < count; ++r) {
      Pending& p = all[r];
      p.request = requests[r];
      p.compute_start = p.compute_end = exec_start;
      if (TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&p.response, p.request)) {
        log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: cannot create a response: ") + TRITONSERVER_ErrorMessage(e));
        TRITONSERVER_ErrorDelete(e);
        p.response = nullptr;
        continue;
      }
      p.err = guarded("aoti_cuda backend", [&] { prepare(p); });
    }
    // Groups in order of their first request; a request joins the first
    // compatible group with room for its rows.
    struct Group {
      std::vector<std::size_t> members;
      int64_t rows = 0;
    };
    std::vector<Group> groups;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (all[r].response == nullptr || all[r].err != nullptr) continue;
      const int64_t limit = row_limit(*all[r].method);
      Group* g = nullptr;
      for (Group& c : groups) {
        if (compatible(all[c.members[0]], all[r]) && c.rows + all[r].rows <= limit) {
          g = &c;
          break;
        }
      }
      if (g == nullptr) g = &groups.emplace_back();
      g->members.push_back(r);
      g->rows += all[r].rows;
    }
    for (const Group& g : groups) {
      const uint64_t group_start = now_ns();
      if (TRITONSERVER_Error* err = guarded("aoti_cuda backend", [&] { run_group(all, g.members, g.rows); })) {
        // The call (or gathering its inputs) failed: every request of the group
        // gets the message, with the batch it was part of.
        const std::string msg = std::string(TRITONSERVER_ErrorMessage(err)) +
                                (g.members.size() > 1 ? " (in a batch of " + std::to_string(g.members.size()) + " requests, " +
                                                            std::to_string(g.rows) + " rows)"
                                                      : "");
        for (std::size_t r : g.members) {
          if (all[r].err != nullptr) TRITONSERVER_ErrorDelete(all[r].err);
          all[r].err = TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(err), msg.c_str());
          all[r].compute_end = std::max(all[r].compute_end, all[r].compute_start);
        }
        TRITONSERVER_ErrorDelete(err);
      }
      const uint64_t c0 = all[g.members[0]].compute_start, c1 = all[g.members[0]].compute_end;
      report(TRITONBACKEND_ModelInstanceReportBatchStatistics(triton_, static_cast<uint64_t>(g.rows), group_start,
                                                              std::max(c0, group_start), std::max(c1, c0), now_ns()));
    }
    const uint64_t exec_end = now_ns();
    for (Pending& p : all) {
      const bool ok = p.response != nullptr && p.err == nullptr;
      if (p.err != nullptr) {
        log(TRITONSERVER_LOG_VERBOSE, "aoti_cuda: " + request_label(p.request) + TRITONSERVER_ErrorMessage(p.err));
      }
      if (p.response != nullptr) {
        if (TRITONSERVER_Error* send = TRITONBACKEND_ResponseSend(p.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, p.err)) {
          log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: sending a response failed: ") + TRITONSERVER_ErrorMessage(send));
          TRITONSERVER_ErrorDelete(send);
        }
      }
      if (p.err != nullptr) TRITONSERVER_ErrorDelete(p.err);  // ResponseSend does not take it over
      p.err = nullptr;
      report(TRITONBACKEND_ModelInstanceReportStatistics(triton_, p.request, ok, exec_start, p.compute_start,
                                                         std::max(p.compute_end, p.compute_start), exec_end));
      report(TRITONBACKEND_RequestRelease(p.request, TRITONSERVER_REQUEST_RELEASE_ALL));
    }
  }

  static void report(TRITONSERVER_Error* err) {
    if (err == nullptr) return;
    log(TRITONSERVER_LOG_ERROR, std::string("aoti_cuda: ") + TRITONSERVER_ErrorMessage(err));
    TRITONSERVER_ErrorDelete(err);
  }

  std::string sequence_id(TRITONBACKEND_Request* request) {
    uint64_t id = 0;
    TRITONSERVER_Error* err = TRITONBACKEND_RequestCorrelationId(request, &id);
    if (err == nullptr) return std::to_string(id);
    TRITONSERVER_ErrorDelete(err);  // a string correlation ID
    const char* s = nullptr;
    check(TRITONBACKEND_RequestCorrelationIdString(request, &s), "reading the correlation ID");
    return "\"" + std::string(s ? s : "") + "\"";
  }

  // Input i of the request, checked against the method's signature (dtype,
  // rank, bounds, byte count): its shape, its handle and how many buffers hold it.
  std::vector<int64_t> check_input(TRITONBACKEND_Request* request, const MethodInfo& m, std::size_t i,
                                   TRITONBACKEND_Input** handle, uint32_t* n_buffers) {
    const std::string& name = m.inputs[i];
    const aoti_cuda::TensorSpec& spec = m.meta.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONSERVER_Error* e = TRITONBACKEND_RequestInput(request, name.c_str(), &input)) {
      TRITONSERVER_ErrorDelete(e);
      invalid("missing input '" + name + "' (method '" + m.name + "' takes " + std::to_string(m.inputs.size()) + " inputs)");
    }
    TRITONSERVER_DataType dt;
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t bytes = 0;
    check(TRITONBACKEND_InputProperties(input, nullptr, &dt, &shape, &rank, &bytes, &buffers), "TRITONBACKEND_InputProperties");
    const TypeName& want = *find_type(spec.dtype);
    if (dt != want.triton) {
      invalid("input '" + name + "' of method '" + m.name + "' has data type " + wire_name(dt) + ", expected " + want.wire);
    }
    std::vector<int64_t> dims(shape, shape + rank);
    const std::vector<int64_t> expect = config_dims(spec, m.meta.dynamic_dims[i]);
    bool fits = dims.size() == spec.sizes.size();
    for (std::size_t d = 0; fits && d < dims.size(); ++d) {
      fits = expect[d] == -1 ? (dims[d] >= 0 && dims[d] <= spec.sizes[d]) : dims[d] == spec.sizes[d];
    }
    if (!fits) {
      invalid("input '" + name + "' of method '" + m.name + "' has shape " + dims_text(dims) + ", expected " +
              dims_text(expect) + (expect == spec.sizes ? "" : " (-1: up to " + dims_text(spec.sizes) + ")"));
    }
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    const uint64_t need = static_cast<uint64_t>(numel) * aoti_cuda::element_size(spec.dtype);
    if (bytes != need) {
      invalid("input '" + name + "' has " + std::to_string(bytes) + " bytes, its shape " + dims_text(dims) + " needs " + std::to_string(need));
    }
    *handle = input;
    *n_buffers = buffers;
    return dims;
  }

  // One input of the request as a Tensor over Triton's buffer (borrowed, no
  // copy), or over a host copy when Triton split it in several buffers.
  Tensor take_input(TRITONBACKEND_Request* request, const MethodInfo& m, std::size_t i, std::vector<std::vector<char>>& keep) {
    const aoti_cuda::TensorSpec& spec = m.meta.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    uint32_t buffers = 0;
    const std::vector<int64_t> dims = check_input(request, m, i, &input, &buffers);
    const uint64_t need = bytes_of(dims, spec.dtype);
    if (buffers == 1) {
      const void* ptr = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mt_id = 0;
      check(TRITONBACKEND_InputBuffer(input, 0, &ptr, &size, &mt, &mt_id), "TRITONBACKEND_InputBuffer");
      // Already on a device: passed in place (the Module copies only what
      // sits on another device or in another layout).
      const Device where = mt == TRITONSERVER_MEMORY_GPU ? Device::cuda(static_cast<int>(mt_id)) : Device::cpu();
      if (!(device_.is_cpu() && where.is_cuda())) return Tensor::from_blob(ptr, dims, spec.dtype, where);
    }
    // Several buffers (or device memory for a CPU instance): gathered on the host.
    keep.emplace_back(need);
    gather_input(input, buffers, m.inputs[i], keep.back().data(), need);
    return Tensor::from_blob(keep.back().data(), dims, spec.dtype, Device::cpu());
  }

  // Copies the `need` bytes of an input's buffers to host memory at dst.
  static void gather_input(TRITONBACKEND_Input* input, uint32_t buffers, const std::string& name, char* dst, uint64_t need) {
    uint64_t offset = 0;
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* ptr = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mt_id = 0;
      check(TRITONBACKEND_InputBuffer(input, b, &ptr, &size, &mt, &mt_id), "TRITONBACKEND_InputBuffer");
      if (offset + size > need) invalid("input '" + name + "': its buffers hold more bytes than its shape");
      if (mt == TRITONSERVER_MEMORY_GPU) cuda_check(cudaMemcpy(dst + offset, ptr, size, cudaMemcpyDefault), "cudaMemcpy (input)");
      else if (size) std::memcpy(dst + offset, ptr, size);
      offset += size;
    }
    if (offset != need) invalid("input '" + name + "': its buffers hold fewer bytes than its shape");
  }

  static uint64_t bytes_of(const std::vector<int64_t>& dims, DType dtype) {
    uint64_t n = aoti_cuda::element_size(dtype);
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n;
  }

  // A response output of `shape`: Triton's buffer as a Tensor when the Module
  // can write it (host memory, or device memory on this instance's device).
  // Otherwise *copy_to gets Triton's buffer and an undefined Tensor is returned.
  Tensor response_output(TRITONBACKEND_Response* response, const std::string& name, DType dtype,
                         const std::vector<int64_t>& shape, void** copy_to, TRITONSERVER_MemoryType* copy_type) {
    TRITONBACKEND_Output* out = nullptr;
    check(TRITONBACKEND_ResponseOutput(response, &out, name.c_str(), find_type(dtype)->triton, shape.data(),
                                       static_cast<uint32_t>(shape.size())),
          "TRITONBACKEND_ResponseOutput");
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const uint64_t bytes = static_cast<uint64_t>(numel) * aoti_cuda::element_size(dtype);
    void* buffer = nullptr;
    TRITONSERVER_MemoryType mt = device_.is_cuda() ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
    int64_t mt_id = device_.is_cuda() ? device_.index : 0;
    check(TRITONBACKEND_OutputBuffer(out, &buffer, bytes, &mt, &mt_id), "TRITONBACKEND_OutputBuffer");
    *copy_to = nullptr;
    if (mt != TRITONSERVER_MEMORY_GPU) return Tensor::from_blob(buffer, shape, dtype, Device::cpu());
    if (device_.is_cuda() && mt_id == device_.index) return Tensor::from_blob(buffer, shape, dtype, device_);
    *copy_to = buffer;
    *copy_type = mt;
    return Tensor();
  }

  Tensor scratch(const std::string& key, DType dtype, const std::vector<int64_t>& shape) {
    Tensor& t = scratch_[key];
    if (!t.defined()) t = Tensor::empty(shape, dtype, device_);
    return t;
  }

  // Which method: the request parameter "method", else the program's default.
  std::string method_name(TRITONBACKEND_Request* request) {
    std::string method = lm_->default_method();
    uint32_t params = 0;
    check(TRITONBACKEND_RequestParameterCount(request, &params), "TRITONBACKEND_RequestParameterCount");
    for (uint32_t p = 0; p < params; ++p) {
      const char* key = nullptr;
      TRITONSERVER_ParameterType type;
      const void* value = nullptr;
      check(TRITONBACKEND_RequestParameter(request, p, &key, &type, &value), "TRITONBACKEND_RequestParameter");
      if (key != nullptr && std::strcmp(key, "method") == 0) {
        if (type != TRITONSERVER_PARAMETER_STRING) invalid("request parameter 'method' must be a string");
        method = static_cast<const char*>(value);
      }
    }
    return method;
  }
  const MethodInfo* find_method(const std::string& method) {
    const MethodInfo* m = lm_->find(method);
    if (m == nullptr) invalid("unknown method '" + method + "' (request parameter 'method'); model " + model_.name() + " serves: " + lm_->method_list());
    return m;
  }

  void run_request(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, uint64_t& compute_start,
                   uint64_t& compute_end) {
    const std::string method = method_name(request);
    // Sequence flags first: END releases the sequence's state however the
    // request ends (Triton has ended the sequence either way).
    const bool sequence = model_.sequences() && lm_->stateful();
    uint32_t flags = 0;
    std::string seq;
    if (sequence) {
      check(TRITONBACKEND_RequestFlags(request, &flags), "TRITONBACKEND_RequestFlags");
      seq = sequence_id(request);
    }
    struct EndSequence {
      LoadedModule* lm;
      const std::string* id;
      ~EndSequence() {
        if (lm != nullptr) lm->end_sequence(*id);
      }
    } end_guard{sequence && (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) ? lm_.get() : nullptr, &seq};

    const MethodInfo* m = find_method(method);
    std::vector<std::vector<char>> keep;
    std::vector<Tensor> inputs;
    inputs.reserve(m->inputs.size());
    for (std::size_t i = 0; i < m->inputs.size(); ++i) inputs.push_back(take_input(request, *m, i, keep));

    std::set<std::string> requested;
    uint32_t n_out = 0;
    check(TRITONBACKEND_RequestOutputCount(request, &n_out), "TRITONBACKEND_RequestOutputCount");
    for (uint32_t o = 0; o < n_out; ++o) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(request, o, &name), "TRITONBACKEND_RequestOutputName");
      requested.insert(name);
    }

    aoti_cuda::RunOptions run;
    run.stream = stream_;
    std::shared_ptr<aoti_cuda::Session> session;
    if (sequence) {
      session = lm_->session(seq, (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0, stream_, model_.idle_release());
      run.session = session.get();
    }
    struct Copy {
      void* dst;
      Tensor src;
      std::size_t bytes;
    };
    std::vector<Copy> copies;
    compute_start = now_ns();
    if (m->static_outputs) {
      // Bound outputs: the Module writes Triton's response buffers directly.
      std::vector<Tensor> outs;
      for (std::size_t j = 0; j < m->outputs.size(); ++j) {
        const auto& spec = m->meta.outputs[j];
        if (!requested.count(m->outputs[j])) {
          outs.push_back(scratch(m->name + "/" + std::to_string(j), spec.dtype, spec.sizes));
          continue;
        }
        void* copy_to = nullptr;
        TRITONSERVER_MemoryType type;
        Tensor t = response_output(response, m->outputs[j], spec.dtype, spec.sizes, &copy_to, &type);
        if (!t.defined()) {
          t = scratch(m->name + "/" + std::to_string(j), spec.dtype, spec.sizes);
          copies.push_back({copy_to, t, t.nbytes()});
        }
        outs.push_back(t);
      }
      lm_->module().execute_into(m->name, inputs, outs, run);
    } else {
      run.outputs = aoti_cuda::OutputLocation::kDevice;
      std::vector<Tensor> outs = lm_->module().execute(m->name, inputs, run);
      for (std::size_t j = 0; j < m->outputs.size(); ++j) {
        if (!requested.count(m->outputs[j])) continue;
        void* copy_to = nullptr;
        TRITONSERVER_MemoryType type;
        Tensor t = response_output(response, m->outputs[j], outs[j].dtype(), outs[j].shape(), &copy_to, &type);
        if (t.defined()) t.copy_from(outs[j], stream_);
        else copies.push_back({copy_to, outs[j], outs[j].nbytes()});
      }
    }
    if (stream_ != nullptr) {
      for (const Copy& c : copies) {
        cuda_check(cudaMemcpyAsync(c.dst, c.src.data(), c.bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream_)), "cudaMemcpyAsync (output)");
      }
      // Triton reads the response buffers once it has them.
      cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
    } else {
      for (const Copy& c : copies) cuda_check(cudaMemcpy(c.dst, c.src.data(), c.bytes, cudaMemcpyDefault), "cudaMemcpy (output)");
    }
    compute_end = now_ns();
  }

  TRITONBACKEND_ModelInstance* triton_;
  ModelState& model_;
  std::string name_;
  Device device_ = Device::cpu();
  std::shared_ptr<LoadedModule> lm_;
  void* stream_ = nullptr;  // cudaStream_t of this instance (GPU instances)
  std::map<std::string, Tensor> scratch_;  // outputs nobody asked for, reused
};

}  // namespace
}  // namespace aoti_triton

using aoti_triton::guarded;
using aoti_triton::InstanceState;
using aoti_triton::ModelState;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("TRITONBACKEND_Initialize", [&] {
    uint32_t major = 0, minor = 0;
    aoti_triton::check(TRITONBACKEND_ApiVersion(&major, &minor), "TRITONBACKEND_ApiVersion");
    if (major != AOTI_TRITONBACKEND_API_VERSION_MAJOR || minor < AOTI_TRITONBACKEND_API_VERSION_MINOR) {
      aoti_triton::fail(TRITONSERVER_ERROR_UNSUPPORTED,
                        "the aoti_cuda backend needs Triton backend API " + std::to_string(AOTI_TRITONBACKEND_API_VERSION_MAJOR) +
                            "." + std::to_string(AOTI_TRITONBACKEND_API_VERSION_MINOR) + " or a later 1.x; this server has " +
                            std::to_string(major) + "." + std::to_string(minor));
    }
    const char* name = nullptr;
    aoti_triton::check(TRITONBACKEND_BackendName(backend, &name), "TRITONBACKEND_BackendName");
    // The SDK's own messages go to the server's log.
    aoti_cuda::set_log_handler([](aoti_cuda::LogLevel level, std::string_view message) {
      const TRITONSERVER_LogLevel l = level == aoti_cuda::LogLevel::kError     ? TRITONSERVER_LOG_ERROR
                                      : level == aoti_cuda::LogLevel::kWarning ? TRITONSERVER_LOG_WARN
                                      : level == aoti_cuda::LogLevel::kInfo    ? TRITONSERVER_LOG_INFO
                                                                               : TRITONSERVER_LOG_VERBOSE;
      aoti_triton::log(l, "aoti_cuda: " + std::string(message));
    });
    aoti_triton::log(TRITONSERVER_LOG_INFO, std::string("aoti_cuda backend ") + aoti_cuda::version() + " (" + name +
                                                "), Triton backend API " + std::to_string(major) + "." + std::to_string(minor));
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  aoti_cuda::set_log_handler(nullptr);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded("TRITONBACKEND_ModelInitialize", [&] {
    auto state = std::make_unique<ModelState>(model);
    aoti_triton::check(TRITONBACKEND_ModelSetState(model, state.get()), "TRITONBACKEND_ModelSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &state)) return e;
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded("TRITONBACKEND_ModelInstanceInitialize", [&] {
    TRITONBACKEND_Model* model = nullptr;
    aoti_triton::check(TRITONBACKEND_ModelInstanceModel(instance, &model), "TRITONBACKEND_ModelInstanceModel");
    void* ms = nullptr;
    aoti_triton::check(TRITONBACKEND_ModelState(model, &ms), "TRITONBACKEND_ModelState");
    auto state = std::make_unique<InstanceState>(instance, *static_cast<ModelState*>(ms));
    aoti_triton::check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()), "TRITONBACKEND_ModelInstanceSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  delete static_cast<InstanceState*>(state);
  return nullptr;
}

// Every request gets a response here, an error response when it fails, and
// is released; so this returns nullptr (an error return would make Triton
// answer requests the backend already answered).
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, const uint32_t request_count) {
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  static_cast<InstanceState*>(state)->execute(requests, request_count);
  return nullptr;
}

}  // extern "C"
