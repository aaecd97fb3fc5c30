// `aoti_cuda inspect`: describes a program without running anything: methods
// and their I/O signatures, plans, delegates, exporter generation, named-data
// blobs, facts about each embedded .so (read from its ELF headers, never
// loaded), and whether this SDK can run each method (and if not, why).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "cli.hpp"

namespace {

const char* kInspectHelp =
    "usage: aoti_cuda inspect MODEL.pte [--data FILE.ptd ...] [--json]\n"
    "\n"
    "Validates MODEL.pte (and aoti_cuda_blob.ptd beside it, or the --data files) and\n"
    "describes its methods, plans, CUDA delegates, blobs and embedded model libraries\n"
    "(ELF facts, imports, GPU architectures, SHA-256 for LoadOptions::allowed_so_sha256).\n"
    "Nothing is loaded or executed. Exit status 1 when the files fail validation.\n"
    "\n"
    "options:\n"
    "  --data FILE.ptd   data file (repeatable; default: aoti_cuda_blob.ptd beside the .pte)\n"
    "  --json            print one JSON document instead of text\n"
    "  -h, --help        this help\n";

std::string shape_str(const aoti_cuda::ValueSpec& v) {
  switch (v.kind) {
    case aoti_cuda::ValueKind::kTensor: {
      std::string s = aoti_cuda::dtype_name(static_cast<int>(v.tensor.dtype));
      s += "[";
      for (std::size_t i = 0; i < v.tensor.sizes.size(); ++i) {
        s += (i ? "," : "") + std::string(v.tensor.dynamic ? "<=" : "") + std::to_string(v.tensor.sizes[i]);
      }
      s += "]";
      bool contiguous = true;
      for (std::size_t i = 0; i < v.tensor.dim_order.size(); ++i) contiguous &= v.tensor.dim_order[i] == i;
      if (!contiguous) {
        s += " dim_order(";
        for (std::size_t i = 0; i < v.tensor.dim_order.size(); ++i) s += (i ? "," : "") + std::to_string(v.tensor.dim_order[i]);
        s += ")";
      }
      if (v.tensor.dynamic) s += " (dynamic)";
      return s;
    }
    case aoti_cuda::ValueKind::kNone: return "None";
    case aoti_cuda::ValueKind::kInt: return "int";
    case aoti_cuda::ValueKind::kDouble: return "double";
    case aoti_cuda::ValueKind::kBool: return "bool";
    case aoti_cuda::ValueKind::kString: return "string";
    case aoti_cuda::ValueKind::kList: return "list";
  }
  return "?";
}

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
  }
  return "?";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string args_str(const std::vector<int32_t>& a) {
  std::string s;
  for (auto x : a) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

/// Facts about one embedded .so; `error` set when it is not a readable ELF file.
struct SoFacts {
  std::string sha256;
  aoti_cuda::ElfInfo elf;
  std::string error;
  aoti_cuda::CudaKernelInfo kernels;
  std::vector<std::string> shims, cuda, others;
};

SoFacts so_facts(aoti_cuda::ByteView so) {
  SoFacts f;
  if (so.data == nullptr) return f;
  f.sha256 = aoti_cuda::sha256_hex(so);
  f.kernels = aoti_cuda::inspect_cuda_kernels(so);
  try {
    f.elf = aoti_cuda::inspect_elf(so);
    for (const auto& s : f.elf.undefined_symbols) {
      if (s.rfind("aoti_torch_", 0) == 0) {
        f.shims.push_back(s);
      } else if (s.rfind("cu", 0) == 0) {  // cudart (cuda*) and driver (cu*) entry points
        f.cuda.push_back(s);
      } else {
        f.others.push_back(s);
      }
    }
  } catch (const aoti_cuda::Error& e) {
    f.error = e.what();
  }
  return f;
}

nlohmann::json value_json(const aoti_cuda::ValueSpec& v) {
  nlohmann::json j;
  j["value_index"] = v.value_index;
  j["type"] = shape_str(v);
  if (v.kind == aoti_cuda::ValueKind::kTensor) {
    j["dtype"] = aoti_cuda::dtype_name(static_cast<int>(v.tensor.dtype));
    j["sizes"] = v.tensor.sizes;
    j["dim_order"] = v.tensor.dim_order;
    j["dynamic"] = v.tensor.dynamic;
  }
  return j;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  std::string model;
  aoti_cuda::ProgramOptions opts;
  opts.require_data = false;  // report missing blobs per method instead of failing
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kInspectHelp, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--data") {
      opts.data_files.push_back(aoti_cuda_cli::option_value("inspect", i, argc, argv));
    } else if (const int rc = aoti_cuda_cli::take_program_arg("inspect", a, model, kInspectHelp)) {
      return rc;
    }
  }
  if (model.empty()) {
    std::fputs(kInspectHelp, stderr);
    return 2;
  }

  const aoti_cuda::Program program = aoti_cuda::Program::open(model, opts);
  nlohmann::json doc;
  doc["program"] = program.pte_path();
  doc["data_files"] = program.data_paths();
  doc["named_data"] = nlohmann::json::array();
  for (const auto& e : program.named_data_entries()) {
    doc["named_data"].push_back({{"key", e.key}, {"size", e.size}, {"file", e.file}});
  }
  doc["methods"] = nlohmann::json::array();
  bool all_runnable = true;
  for (const auto& m : program.methods()) {
    all_runnable &= m.runnable;
    nlohmann::json jm;
    jm["name"] = m.name;
    jm["runnable"] = m.runnable;
    if (!m.runnable) jm["not_runnable_reason"] = m.not_runnable_reason;
    jm["inputs"] = nlohmann::json::array();
    for (const auto& v : m.inputs) jm["inputs"].push_back(value_json(v));
    jm["outputs"] = nlohmann::json::array();
    for (const auto& v : m.outputs) jm["outputs"].push_back(value_json(v));
    jm["num_values"] = m.values.size();
    jm["plan"] = nlohmann::json::array();
    for (const auto& s : m.plan) {
      nlohmann::json js{{"kind", step_kind(s.kind)}, {"args", s.args}};
      if (s.kind == aoti_cuda::PlanStep::Kind::kDelegate) js["delegate"] = s.delegate;
      jm["plan"].push_back(js);
    }
    jm["delegates"] = nlohmann::json::array();
    for (const auto& d : m.delegates) {
      const SoFacts f = so_facts(d.so);
      nlohmann::json jd{{"delegate_index", d.delegate_index},
                        {"backend_id", d.backend_id},
                        {"method_name_spec", d.method_name_spec},
                        {"exporter_generation", generation_id(d.generation)},
                        {"args", d.args},
                        {"so", {{"key", d.so_key}, {"size", d.so.size}, {"file", d.so_file}, {"found", d.so.data != nullptr}}},
                        {"weights", {{"key", d.weights_key}, {"size", d.weights.size}, {"file", d.weights_file},
                                     {"found", !d.weights_file.empty()}}}};
      if (d.so.data != nullptr) {
        nlohmann::json je;
        je["sha256"] = f.sha256;
        je["cuda_kernels"] = {{"fatbins", f.kernels.fatbins},
                              {"sass_archs", f.kernels.sass_archs},
                              {"ptx_archs", f.kernels.ptx_archs},
                              {"describe", f.kernels.describe()}};
        if (!f.error.empty()) {
          je["error"] = f.error;
        } else {
          je["elf_class"] = f.elf.elf_class;
          je["machine"] = f.elf.machine_name;
          je["shared_object"] = f.elf.is_shared_object;
          je["soname"] = f.elf.soname;
          je["needed"] = f.elf.needed;
          je["aoti_torch_imports"] = f.shims;
          je["cuda_imports"] = f.cuda;
          je["other_imports"] = f.others;
          je["exports"] = f.elf.defined_symbols;
        }
        jd["so"]["elf"] = je;
      }
      jm["delegates"].push_back(jd);
    }
    doc["methods"].push_back(jm);
  }
  doc["runnable"] = all_runnable;

  if (json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }

  std::printf("program: %s\n", program.pte_path().c_str());
  std::printf("data files: %s\n", program.data_paths().empty() ? "(none)" : join(program.data_paths(), ", ").c_str());
  std::printf("named data (%zu):\n", program.named_data_entries().size());
  for (const auto& e : program.named_data_entries()) {
    std::printf("  %-40s %12zu bytes  in %s\n", ("\"" + e.key + "\"").c_str(), e.size, e.file.c_str());
  }
  for (const auto& m : program.methods()) {
    std::printf("\nmethod \"%s\": %s\n", m.name.c_str(), m.runnable ? "runnable" : "NOT runnable");
    if (!m.runnable) std::printf("  why: %s\n", m.not_runnable_reason.c_str());
    std::vector<std::string> ins, outs;
    for (const auto& v : m.inputs) ins.push_back(shape_str(v));
    for (const auto& v : m.outputs) outs.push_back(shape_str(v));
    std::printf("  inputs:  (%s)\n", join(ins, ", ").c_str());
    std::printf("  outputs: (%s)\n", join(outs, ", ").c_str());
    std::printf("  plan (%zu steps, %zu values):", m.plan.size(), m.values.size());
    for (const auto& s : m.plan) {
      std::printf(" %s", step_kind(s.kind));
      if (s.kind == aoti_cuda::PlanStep::Kind::kDelegate) std::printf("#%d", s.delegate);
      std::printf("(%s)", args_str(s.args).c_str());
    }
    std::printf("\n");
    for (std::size_t di = 0; di < m.delegates.size(); ++di) {
      const auto& d = m.delegates[di];
      std::printf("  delegate #%zu: %s (plan delegate %d), method_name \"%s\", args (%s)\n", di, d.backend_id.c_str(),
                  d.delegate_index, d.method_name_spec.c_str(), args_str(d.args).c_str());
      std::printf("    exporter: %s\n", aoti_cuda::to_string(d.generation));
      if (d.so.data != nullptr) {
        std::printf("    .so:     \"%s\" %zu bytes in %s\n", d.so_key.c_str(), d.so.size, d.so_file.c_str());
      } else {
        std::printf("    .so:     \"%s\" NOT FOUND\n", d.so_key.c_str());
      }
      if (d.weights_key.empty()) {
        std::printf("    weights: none (embedded in the .so by this exporter)\n");
      } else if (!d.weights_file.empty()) {
        std::printf("    weights: \"%s\" %zu bytes in %s\n", d.weights_key.c_str(), d.weights.size, d.weights_file.c_str());
      } else if (program.data_paths().empty()) {
        std::printf("    weights: MISSING (\"%s\" belongs in a .ptd data file and none was found)\n", d.weights_key.c_str());
      } else {
        std::printf("    weights: none (\"%s\" is not in the data files; the .so may embed them)\n", d.weights_key.c_str());
      }
      if (d.so.data == nullptr) continue;
      const SoFacts f = so_facts(d.so);
      std::printf("    sha256:  %s\n", f.sha256.c_str());
      std::printf("    kernels: %s in %zu fat binar%s\n", f.kernels.describe().c_str(), f.kernels.fatbins,
                  f.kernels.fatbins == 1 ? "y" : "ies");
      if (!f.error.empty()) {
        std::printf("    ELF:     unreadable: %s\n", f.error.c_str());
        continue;
      }
      std::printf("    ELF:     ELF%d %s %s%s%s\n", f.elf.elf_class, f.elf.machine_name.c_str(),
                  f.elf.is_shared_object ? "shared object" : "NOT a shared object",
                  f.elf.soname.empty() ? "" : ", soname ", f.elf.soname.c_str());
      std::printf("    needs:   %s\n", f.elf.needed.empty() ? "(nothing)" : join(f.elf.needed, " ").c_str());
      std::printf("    imports %zu aoti_torch_* shims: %s\n", f.shims.size(), join(f.shims, " ").c_str());
      std::printf("    imports %zu CUDA runtime/driver functions: %s\n", f.cuda.size(), join(f.cuda, " ").c_str());
      std::printf("    other imports: %zu (C/C++ runtime; --json lists them)\n", f.others.size());
      std::printf("    exports: %s\n", f.elf.defined_symbols.empty() ? "(no AOTInductor* entry points!)"
                                                                     : join(f.elf.defined_symbols, " ").c_str());
    }
  }
  std::printf("\nrunnable: %s\n", all_runnable ? "yes (all methods)" : "no (see the methods above)");
  return 0;
}
