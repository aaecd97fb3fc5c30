// Part of libtriton_aoti_cuda.so, included by backend.cpp only (the backend is
// one translation unit: these parts share its private namespace). The per-model state: the parsed config and one LoadedModule (a Module and its
// sequences' Sessions) per device.
#pragma once

#include "triton_util.hpp"

namespace aoti_triton {
namespace {

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


}  // namespace
}  // namespace aoti_triton
