// `aoti_cuda inspect`: describes a program without running anything, and says
// whether it can run HERE: the reader's checks (format, plan, blobs) plus, for
// every embedded model library, aoti_cuda::check_library (ELF integrity,
// needed libraries and symbol versions vs this machine, imports and operator
// shims vs this build, kernel architectures vs the GPU, weights blob size).
// One JSON document is built; the text form is rendered from it
// (inspect_text.cpp), so both always say the same.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoti_cuda/library_check.hpp"
#include "cli.hpp"
#include "inspect_text.hpp"

namespace aoti_cuda_cli {
namespace {

struct InspectArgs {
  std::string model;
  std::vector<std::string> data;
  int device = 0;
  bool json = false;
};

const char* step_kind(aoti_cuda::PlanStep::Kind k) {
  switch (k) {
    case aoti_cuda::PlanStep::Kind::kDelegate: return "delegate";
    case aoti_cuda::PlanStep::Kind::kMove: return "move";
    case aoti_cuda::PlanStep::Kind::kHostToDevice: return "h2d_copy";
    case aoti_cuda::PlanStep::Kind::kDeviceToHost: return "d2h_copy";
  }
  return "?";
}

const char* generation_id(aoti_cuda::ExporterGeneration g) {
  switch (g) {
    case aoti_cuda::ExporterGeneration::kSeed: return "seed";
    case aoti_cuda::ExporterGeneration::kMethodKeys: return "method_keys";
    case aoti_cuda::ExporterGeneration::kHashKeys: return "hash_keys";
    case aoti_cuda::ExporterGeneration::kFqnWeights: return "fqn_weights";
  }
  return "?";
}

nlohmann::json value_json(const aoti_cuda::ValueSpec& v) {
  nlohmann::json j{{"value_index", v.value_index}, {"type", value_type(v)}};
  if (v.kind == aoti_cuda::ValueKind::kTensor) {
    j["dtype"] = aoti_cuda::dtype_name(static_cast<int>(v.tensor.dtype));
    j["sizes"] = v.tensor.sizes;
    j["dim_order"] = v.tensor.dim_order;
    j["dynamic"] = v.tensor.dynamic;
  }
  return j;
}

// Where an operator shim comes from: ExecuTorch's own custom ops (its CUDA backend, 1.3 and
// later, exports quantized linears as executorch_cuda::int*_plain_mm) or an ATen fallback op.
const char* op_origin(const std::string& name) {
  if (aoti_cuda::is_aoti_cuda_own_shim(name)) return "aoti_cuda custom op: only aoti_cuda runs it";
  for (const char* op : {"int4_plain_mm", "int5_plain_mm", "int6_plain_mm", "int8_plain_mm"}) {
    if (name == std::string("aoti_torch_cuda_") + op) return "executorch_cuda custom op (ExecuTorch 1.3+)";
  }
  return "aten fallback op";
}

// Library facts (ELF, imports by kind) and the checks against this machine.
nlohmann::json library_json(const aoti_cuda::DelegateSpec& d, const aoti_cuda::LibraryCheckOptions& base) {
  nlohmann::json je;
  je["sha256"] = aoti_cuda::sha256_hex(d.so);
  const aoti_cuda::CudaKernelInfo k = aoti_cuda::inspect_cuda_kernels(d.so);
  je["cuda_kernels"] = {{"fatbins", k.fatbins}, {"sass_archs", k.sass_archs}, {"ptx_archs", k.ptx_archs},
                        {"describe", k.describe()}};
  try {
    const aoti_cuda::ElfInfo elf = aoti_cuda::inspect_elf(d.so);
    std::vector<std::string> shims, cuda, others;
    for (const std::string& s : elf.undefined_symbols) {
      (s.rfind("aoti_torch_", 0) == 0 ? shims : s.rfind("cu", 0) == 0 ? cuda : others).push_back(s);
    }
    je.update({{"elf_class", elf.elf_class}, {"machine", elf.machine_name}, {"shared_object", elf.is_shared_object},
               {"soname", elf.soname}, {"needed", elf.needed}, {"aoti_torch_imports", shims}, {"cuda_imports", cuda},
               {"other_imports", others}, {"exports", elf.defined_symbols}});
  } catch (const aoti_cuda::Error& e) {
    je["error"] = e.what();
  }
  aoti_cuda::LibraryCheckOptions o = base;
  o.has_weights = !d.weights_file.empty();  // per-FQN weights: no blob to compare with the library
  o.weights = d.weights;
  o.weights_label = "'" + d.weights_key + "' in " + d.weights_file;
  o.weights_key = d.weights_key;
  const aoti_cuda::LibraryReport r = aoti_cuda::check_library(d.so, o);
  je["checks"] = nlohmann::json::array();
  for (const auto& c : r.checks) {
    je["checks"].push_back({{"name", c.name}, {"status", aoti_cuda::to_string(c.status)}, {"detail", c.detail}});
  }
  je["op_shims"] = nlohmann::json::array();
  std::vector<std::string> own;
  for (const auto& s : r.op_shims) {
    je["op_shims"].push_back({{"name", s.name}, {"provided", s.provided}, {"origin", op_origin(s.name)},
                              {"aoti_cuda_only", s.aoti_cuda_only}});
    if (s.aoti_cuda_only) own.push_back(s.name);
  }
  // A library that calls one of aoti_cuda's own shims cannot run on another runtime (issue 32: labelled as such).
  je["needs_aoti_cuda_shims"] = own;
  je["missing_imports"] = r.missing_imports;
  je["version_needs"] = nlohmann::json::array();
  for (const auto& v : r.version_needs) je["version_needs"].push_back(v.file + " " + v.version);
  je["runnable_here"] = r.runnable();
  if (!r.runnable()) je["not_runnable_here_reason"] = r.failures();
  return je;
}

// Per-FQN weights (ExecuTorch 1.5): each constant's storage, and whether
// another partition of the file names the same one (`uses`: storage key ->
// how many delegates name it).
nlohmann::json fqn_weights_json(const aoti_cuda::DelegateSpec& d, const std::map<std::string, int>& uses) {
  nlohmann::json list = nlohmann::json::array();
  std::size_t bytes = 0, found = 0, shared = 0;
  std::string file;
  for (const aoti_cuda::FqnWeightSpec& w : d.fqn_weights) {
    const auto it = uses.find(w.storage_key);
    const bool is_shared = it != uses.end() && it->second > 1;
    list.push_back({{"fqn", w.fqn}, {"storage_key", w.storage_key}, {"storage_nbytes", w.storage_nbytes},
                    {"dtype", aoti_cuda::dtype_name(static_cast<int>(w.dtype))},
                    {"device", w.device_type == 0 ? "cpu" : "cuda"}, {"sizes", w.sizes}, {"strides", w.strides},
                    {"storage_offset", w.storage_offset}, {"found", w.storage.data != nullptr},
                    {"file", w.storage_file}, {"shared", is_shared}});
    bytes += w.storage_nbytes;
    found += w.storage.data != nullptr ? 1 : 0;
    shared += is_shared ? 1 : 0;
    if (file.empty()) file = w.storage_file;
  }
  return {{"key", ""}, {"size", bytes}, {"file", file}, {"found", found == d.fqn_weights.size()},
          {"format", d.fqn_format}, {"constants", d.fqn_weights.size()}, {"missing", d.fqn_weights.size() - found},
          {"shared_with_other_delegates", shared}, {"per_fqn", list}};
}

nlohmann::json delegate_json(const aoti_cuda::DelegateSpec& d, const aoti_cuda::LibraryCheckOptions& checks,
                             const std::map<std::string, int>& uses) {
  nlohmann::json jd{{"delegate_index", d.delegate_index},
                    {"backend_id", d.backend_id},
                    {"method_name_spec", d.method_name_spec},
                    {"exporter_generation", generation_id(d.generation)},
                    {"exporter", aoti_cuda::to_string(d.generation)},
                    {"args", d.args},
                    {"so", {{"key", d.so_key}, {"size", d.so.size}, {"file", d.so_file}, {"found", d.so.data != nullptr}}},
                    {"weights", {{"key", d.weights_key}, {"size", d.weights.size}, {"file", d.weights_file},
                                 {"found", !d.weights_file.empty()}}}};
  if (d.generation == aoti_cuda::ExporterGeneration::kFqnWeights) jd["weights"] = fqn_weights_json(d, uses);
  if (d.so.data != nullptr) jd["so"]["elf"] = library_json(d, checks);
  return jd;
}

nlohmann::json method_json(const aoti_cuda::MethodSpec& m, const aoti_cuda::LibraryCheckOptions& checks,
                           const std::map<std::string, int>& uses) {
  nlohmann::json jm{{"name", m.name}, {"runnable", m.runnable}, {"num_values", m.values.size()}};
  if (!m.runnable) jm["not_runnable_reason"] = m.not_runnable_reason;
  jm["inputs"] = nlohmann::json::array();
  for (const auto& v : m.inputs) jm["inputs"].push_back(value_json(v));
  jm["outputs"] = nlohmann::json::array();
  for (const auto& v : m.outputs) jm["outputs"].push_back(value_json(v));
  jm["plan"] = nlohmann::json::array();
  for (const auto& s : m.plan) {
    nlohmann::json js{{"kind", step_kind(s.kind)}, {"args", s.args}};
    if (s.kind == aoti_cuda::PlanStep::Kind::kDelegate) js["delegate"] = s.delegate;
    jm["plan"].push_back(js);
  }
  jm["delegates"] = nlohmann::json::array();
  bool here = m.runnable;
  for (const auto& d : m.delegates) {
    jm["delegates"].push_back(delegate_json(d, checks, uses));
    const auto& so = jm["delegates"].back()["so"];
    here = here && so.contains("elf") && so["elf"].value("runnable_here", false);
  }
  jm["runnable_here"] = here;
  return jm;
}

int run_inspect(const InspectArgs& a) {
  aoti_cuda::ProgramOptions opts;
  opts.data_files = a.data;
  opts.require_data = false;  // report missing blobs per method instead of failing
  const aoti_cuda::Program program = aoti_cuda::Program::open(a.model, opts);
  aoti_cuda::LibraryCheckOptions checks;
  std::string why;
  const int sm = device_sm(a.device, &why);
  if (sm > 0) checks.gpu_sms = {sm};
  checks.no_gpu_reason = why;
  for (const auto& e : program.named_data_entries()) checks.available_keys.push_back(e.key);

  nlohmann::json doc;
  doc["program"] = program.pte_path();
  doc["data_files"] = program.data_paths();
  doc["gpu"] = sm > 0 ? "cuda:" + std::to_string(a.device) + " sm_" + std::to_string(sm) : why;
  doc["named_data"] = nlohmann::json::array();
  for (const auto& e : program.named_data_entries()) {
    doc["named_data"].push_back({{"key", e.key}, {"size", e.size}, {"file", e.file}});
  }
  // Which exporter generation(s) wrote the file, and per-FQN storages named by several delegates.
  std::map<std::string, int> uses;
  std::vector<std::string> generations;
  for (const auto& m : program.methods()) {
    for (const auto& d : m.delegates) {
      const std::string g = aoti_cuda::to_string(d.generation);
      if (std::find(generations.begin(), generations.end(), g) == generations.end()) generations.push_back(g);
      for (const auto& w : d.fqn_weights) ++uses[w.storage_key];
    }
  }
  doc["exporter"] = generations;
  doc["methods"] = nlohmann::json::array();
  bool runnable = true;
  for (const auto& m : program.methods()) {
    doc["methods"].push_back(method_json(m, checks, uses));
    runnable = runnable && doc["methods"].back()["runnable_here"].get<bool>();
  }
  // "runnable": every method passes every check that can be made without
  // executing the libraries; checks that could not be made are listed as such.
  doc["runnable"] = runnable;
  // The imports no library of the file can get from this build, over every method.
  // And aoti_cuda's own operator shims any library calls: such a program runs on aoti_cuda only.
  std::vector<std::string> missing, own;
  auto add_once = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const auto& m : doc["methods"]) {
    for (const auto& d : m["delegates"]) {
      if (!d["so"].contains("elf")) continue;
      for (const auto& s : d["so"]["elf"]["missing_imports"]) add_once(missing, s.get<std::string>());
      for (const auto& s : d["so"]["elf"]["needs_aoti_cuda_shims"]) add_once(own, s.get<std::string>());
    }
  }
  std::sort(missing.begin(), missing.end());
  std::sort(own.begin(), own.end());
  doc["missing_imports"] = missing;
  doc["needs_aoti_cuda_shims"] = own;
  if (a.json) {
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    print_inspect_text(doc);
  }
  return runnable ? kExitOk : kExitNotRunnable;
}

}  // namespace

Runner add_inspect(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("inspect", "describe a program without running it, and whether it can run here");
  cmd->footer(
      "Validates the program and its data files, describes methods, plans, delegates and the embedded model\n"
      "libraries (ELF facts, imports, operator shims, GPU architectures, SHA-256 for\n"
      "LoadOptions::allowed_so_sha256), and checks each library against this machine without loading it.\n"
      "Exit status: 0 runnable here, 1 the files fail validation, 2 usage error, 3 not runnable here.");
  auto a = std::make_shared<InspectArgs>();
  add_model_option(*cmd, a->model);
  add_data_option(*cmd, a->data);
  add_device_option(*cmd, a->device);
  add_json_flag(*cmd, a->json);
  return [a] { return run_inspect(*a); };
}

}  // namespace aoti_cuda_cli
