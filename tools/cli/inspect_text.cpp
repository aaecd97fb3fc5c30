// Text rendering of the inspect document: one section per method, one block
// per delegate, then the checks against this machine and the verdict.
#include "inspect_text.hpp"

#include <cstdio>

namespace aoti_cuda_cli {
namespace {

std::string join(const nlohmann::json& a, const char* sep) {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "" : sep) + (x.is_string() ? x.get<std::string>() : x.dump());
  return s;
}

void print_library(const nlohmann::json& e) {
  std::printf("    sha256:  %s\n", e["sha256"].get<std::string>().c_str());
  std::printf("    kernels: %s in %zu fat binar%s\n", e["cuda_kernels"]["describe"].get<std::string>().c_str(),
              e["cuda_kernels"]["fatbins"].get<std::size_t>(), e["cuda_kernels"]["fatbins"] == 1 ? "y" : "ies");
  if (e.contains("error")) {
    std::printf("    ELF:     unreadable: %s\n", e["error"].get<std::string>().c_str());
  } else {
    std::printf("    ELF:     ELF%d %s %s%s%s\n", e["elf_class"].get<int>(), e["machine"].get<std::string>().c_str(),
                e["shared_object"].get<bool>() ? "shared object" : "NOT a shared object",
                e["soname"].get<std::string>().empty() ? "" : ", soname ", e["soname"].get<std::string>().c_str());
    std::printf("    needs:   %s\n", e["needed"].empty() ? "(nothing)" : join(e["needed"], " ").c_str());
    std::printf("    imports %zu aoti_torch_* shims: %s\n", e["aoti_torch_imports"].size(),
                join(e["aoti_torch_imports"], " ").c_str());
    std::printf("    imports %zu CUDA runtime/driver functions: %s\n", e["cuda_imports"].size(),
                join(e["cuda_imports"], " ").c_str());
    std::printf("    other imports: %zu (C/C++ runtime; --json lists them)\n", e["other_imports"].size());
    std::printf("    exports: %s\n",
                e["exports"].empty() ? "(no AOTInductor* entry points!)" : join(e["exports"], " ").c_str());
  }
  if (e["op_shims"].empty()) {
    std::printf("    operator shims: none (every op compiled into the library)\n");
  } else {
    std::printf("    operator shims (%zu):\n", e["op_shims"].size());
    for (const auto& s : e["op_shims"]) {
      std::printf("      %-50s %s (%s)\n", s["name"].get<std::string>().c_str(),
                  s["provided"].get<bool>() ? "provided" : "NOT provided by this build",
                  s["origin"].get<std::string>().c_str());
    }
  }
  if (!e["needs_aoti_cuda_shims"].empty()) {
    std::printf("    needs aoti_cuda's own shims: %s (no other runtime, ExecuTorch's included, can run this library)\n",
                join(e["needs_aoti_cuda_shims"], " ").c_str());
  }
  std::printf("    checks against this machine:\n");
  for (const auto& c : e["checks"]) {
    std::printf("      %-17s %-11s %s\n", c["name"].get<std::string>().c_str(), c["status"].get<std::string>().c_str(),
                c["detail"].get<std::string>().c_str());
  }
}

// ExecuTorch 1.5: one stored tensor per constant, shared across methods by key.
void print_fqn_weights(const nlohmann::json& w) {
  std::printf("    weights: %zu tensors stored per FQN (%s), %zu bytes%s; %zu shared with other partitions\n",
              w["constants"].get<std::size_t>(), w["format"].get<std::string>().c_str(), w["size"].get<std::size_t>(),
              w["file"].get<std::string>().empty() ? "" : (" in " + w["file"].get<std::string>()).c_str(),
              w["shared_with_other_delegates"].get<std::size_t>());
  for (const auto& e : w["per_fqn"]) {
    std::printf("      %-32s %s[%s] strides (%s) offset %lld, %s, %zu bytes%s%s\n",
                e["fqn"].get<std::string>().c_str(), e["dtype"].get<std::string>().c_str(), join(e["sizes"], ",").c_str(),
                join(e["strides"], ",").c_str(), static_cast<long long>(e["storage_offset"].get<std::int64_t>()),
                e["device"].get<std::string>().c_str(), e["storage_nbytes"].get<std::size_t>(),
                e["shared"].get<bool>() ? ", shared" : "", e["found"].get<bool>() ? "" : ", MISSING");
  }
}

void print_delegate(std::size_t di, const nlohmann::json& d, bool have_data_files) {
  std::printf("  delegate #%zu: %s (plan delegate %d), method_name \"%s\", args (%s)\n", di,
              d["backend_id"].get<std::string>().c_str(), d["delegate_index"].get<int>(),
              d["method_name_spec"].get<std::string>().c_str(), join(d["args"], ",").c_str());
  std::printf("    exporter: %s\n", d["exporter"].get<std::string>().c_str());
  const auto& so = d["so"];
  if (so["found"].get<bool>()) {
    std::printf("    .so:     \"%s\" %zu bytes in %s\n", so["key"].get<std::string>().c_str(), so["size"].get<std::size_t>(),
                so["file"].get<std::string>().c_str());
  } else {
    std::printf("    .so:     \"%s\" NOT FOUND\n", so["key"].get<std::string>().c_str());
  }
  const auto& w = d["weights"];
  const std::string key = w["key"];
  if (w.contains("per_fqn")) {
    print_fqn_weights(w);
  } else if (key.empty()) {
    std::printf("    weights: none (embedded in the .so by this exporter)\n");
  } else if (w["found"].get<bool>()) {
    std::printf("    weights: \"%s\" %zu bytes in %s\n", key.c_str(), w["size"].get<std::size_t>(),
                w["file"].get<std::string>().c_str());
  } else if (!have_data_files) {
    std::printf("    weights: MISSING (\"%s\" belongs in a .ptd data file and none was found)\n", key.c_str());
  } else {
    std::printf("    weights: none (\"%s\" is not in the data files; the .so may embed them)\n", key.c_str());
  }
  if (so.contains("elf")) print_library(so["elf"]);
}

}  // namespace

std::string value_type(const aoti_cuda::ValueSpec& v) {
  switch (v.kind) {
    case aoti_cuda::ValueKind::kTensor: {
      const aoti_cuda::TensorSpec& t = v.tensor;
      std::string s = std::string(aoti_cuda::dtype_name(static_cast<int>(t.dtype))) + "[";
      for (std::size_t i = 0; i < t.sizes.size(); ++i) {
        s += (i ? "," : "") + std::string(t.dynamic ? "<=" : "") + std::to_string(t.sizes[i]);
      }
      s += "]";
      bool contiguous = true;
      for (std::size_t i = 0; i < t.dim_order.size(); ++i) contiguous &= t.dim_order[i] == i;
      if (!contiguous) {
        s += " dim_order(";
        for (std::size_t i = 0; i < t.dim_order.size(); ++i) s += (i ? "," : "") + std::to_string(t.dim_order[i]);
        s += ")";
      }
      return t.dynamic ? s + " (dynamic)" : s;
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

void print_inspect_text(const nlohmann::json& doc) {
  std::printf("program: %s\n", doc["program"].get<std::string>().c_str());
  std::printf("exporter: %s\n", doc["exporter"].empty() ? "(no CUDA delegate)" : join(doc["exporter"], "; ").c_str());
  std::printf("imports this build lacks: %s\n",
              doc["missing_imports"].empty() ? "none" : join(doc["missing_imports"], " ").c_str());
  if (!doc["needs_aoti_cuda_shims"].empty()) {
    std::printf("aoti_cuda only: calls aoti_cuda's own shims %s (exported with aoti_cuda's custom operators)\n",
                join(doc["needs_aoti_cuda_shims"], " ").c_str());
  }
  std::printf("data files: %s\n", doc["data_files"].empty() ? "(none)" : join(doc["data_files"], ", ").c_str());
  std::printf("GPU checked against: %s\n", doc["gpu"].get<std::string>().c_str());
  std::printf("named data (%zu):\n", doc["named_data"].size());
  for (const auto& e : doc["named_data"]) {
    std::printf("  %-40s %12zu bytes  in %s\n", ("\"" + e["key"].get<std::string>() + "\"").c_str(),
                e["size"].get<std::size_t>(), e["file"].get<std::string>().c_str());
  }
  for (const auto& m : doc["methods"]) {
    const bool ok = m["runnable"].get<bool>(), here = m["runnable_here"].get<bool>();
    std::printf("\nmethod \"%s\": %s\n", m["name"].get<std::string>().c_str(),
                !ok ? "NOT runnable by aoti_cuda" : here ? "runnable" : "NOT runnable here (see the checks below)");
    if (!ok) std::printf("  why: %s\n", m["not_runnable_reason"].get<std::string>().c_str());
    std::vector<std::string> ins, outs;
    for (const auto& v : m["inputs"]) ins.push_back(v["type"]);
    for (const auto& v : m["outputs"]) outs.push_back(v["type"]);
    std::printf("  inputs:  (%s)\n", join(ins, ", ").c_str());
    std::printf("  outputs: (%s)\n", join(outs, ", ").c_str());
    std::printf("  plan (%zu steps, %zu values):", m["plan"].size(), m["num_values"].get<std::size_t>());
    for (const auto& s : m["plan"]) {
      std::printf(" %s", s["kind"].get<std::string>().c_str());
      if (s.contains("delegate")) std::printf("#%d", s["delegate"].get<int>());
      std::printf("(%s)", join(s["args"], ",").c_str());
    }
    std::printf("\n");
    for (std::size_t di = 0; di < m["delegates"].size(); ++di) {
      print_delegate(di, m["delegates"][di], !doc["data_files"].empty());
    }
  }
  std::printf("\nrunnable: %s\n", doc["runnable"].get<bool>()
                                      ? "yes (every check that can be made without executing the libraries passed)"
                                      : "no (see the methods above)");
}

}  // namespace aoti_cuda_cli
