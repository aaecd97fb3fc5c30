// check_library: can this process run a model library? Everything decidable
// without mapping the library's bytes as code (see library_check.hpp).
#include "aoti_cuda/library_check.hpp"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "aoti_cuda/error.hpp"
#include "common/cublas_shims.hpp"
#include "common/cuda_hook_table.hpp"
#include "common/env.hpp"
#include "common/text.hpp"
#include "format/elf_sections.hpp"
#include "format/mapped_file.hpp"

namespace aoti_cuda {
namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// aoti_torch_cuda_* / aoti_torch_cpu_* names are ATen operator shims (the C
// shim code generator's naming), except these few runtime helpers of shim.h.
bool is_op_shim(const std::string& s) {
  if (!starts_with(s, "aoti_torch_cuda_") && !starts_with(s, "aoti_torch_cpu_")) return false;
  return !starts_with(s, "aoti_torch_cuda_caching_allocator_") && s != "aoti_torch_cuda_guard_set_index";
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

void add(LibraryReport& r, const char* name, CheckStatus st, std::string detail) {
  r.checks.push_back({name, st, std::move(detail)});
}

// Path of the library `soname` as the dynamic loader would find it, or ""
// when it cannot be found. The name comes from untrusted bytes, so nothing is
// ever loaded: a library this process already has is taken from the loader's
// list (RTLD_NOLOAD), otherwise the loader's search directories are probed
// with stat(). Names with a '/' are not searched (a real model library never
// carries one).
std::string locate_library(const std::string& soname) {
  if (soname.empty() || soname.find('/') != std::string::npos) return "";
  if (void* h = ::dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    std::string path;
    link_map* lm = nullptr;
    if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name != nullptr) path = lm->l_name;
    ::dlclose(h);
    if (!path.empty()) return path;
  }
  (void)::dlerror();
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LD_LIBRARY_PATH")) {
    std::string list = env;
    for (std::size_t a = 0, b; a <= list.size(); a = b + 1) {
      b = list.find(':', a);
      if (b == std::string::npos) b = list.size();
      if (b > a) dirs.push_back(list.substr(a, b - a));
    }
  }
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
                        "/usr/local/cuda/lib64", "/usr/local/cuda/compat", "/usr/lib/wsl/lib"}) {
    dirs.emplace_back(d);
  }
  for (const std::string& d : dirs) {
    struct stat st {};
    const std::string path = d + "/" + soname;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return "";
}

void check_needed(const ElfInfo& elf, LibraryReport& r) {
  std::vector<std::string> missing;
  for (const std::string& n : elf.needed) {
    if (locate_library(n).empty()) missing.push_back(n + (starts_with(n, "libcuda.so") ? " (the NVIDIA driver)" : ""));
  }
  if (missing.empty()) {
    add(r, "needed_libraries", CheckStatus::kPass, elf.needed.empty() ? "none" : join(elf.needed, " "));
  } else {
    add(r, "needed_libraries", CheckStatus::kFail, "not found on this machine: " + join(missing));
  }
}

// The versions `file` defines, as this process's loader finds it; nullopt
// when it cannot be found.
std::optional<std::vector<std::string>> defined_versions(const std::string& file) {
  const std::string path = locate_library(file);
  if (path.empty()) return std::nullopt;
  try {
    const format::MappedFile f(path);
    return format::elf_version_definitions({f.data(), f.size()});
  } catch (const Error&) {
    return std::vector<std::string>{};  // unreadable: every need from it counts as unmet
  }
}

LibraryCheck versions_check(const std::vector<VersionNeed>& needs) {
  std::map<std::string, std::optional<std::vector<std::string>>> defined;  // file -> versions it defines here
  std::vector<std::string> unmet, unknown;
  for (const VersionNeed& v : needs) {
    if (!defined.count(v.file)) defined[v.file] = defined_versions(v.file);
    const auto& d = defined[v.file];
    if (!d) {
      unknown.push_back(v.file + " " + v.version);
    } else if (std::find(d->begin(), d->end(), v.version) == d->end()) {
      unmet.push_back(v.version + " from " + v.file);
    }
  }
  const std::string glibc = std::string("this machine has glibc ") + gnu_get_libc_version();
  if (!unmet.empty()) {
    return {"symbol_versions", CheckStatus::kFail,
            "needs " + join(unmet) + "; " + glibc + " (the library was built on a machine with a newer C/C++ runtime)"};
  }
  if (!unknown.empty()) return {"symbol_versions", CheckStatus::kNotChecked, "libraries not found: " + join(unknown)};
  return {"symbol_versions", CheckStatus::kPass, std::to_string(needs.size()) + " version needs met; " + glibc};
}

// The loader's rule: shim, aoti_cuda and CUDA runtime imports must resolve in
// the process's global scope; operator shims must come from libaoti_cuda.
// Which imports the loader will bind to the SDK's CUDA hooks
// (runtime/cuda_hooks.hpp), and which could bypass them.
void check_cuda_hooks(const ElfInfo& elf, LibraryReport& r) {
  const std::vector<std::string> hooked = common::hooks::hooked_imports(elf.undefined_symbols);
  std::string detail = hooked.empty() ? std::string("imports none of the CUDA functions the SDK hooks")
                                      : "bound at load to the SDK's hooks: " + common::join(hooked);
  for (const std::string& w : common::hooks::bypass_warnings(elf.undefined_symbols)) detail += "; warning: " + w;
  add(r, "cuda_hooks", CheckStatus::kPass, std::move(detail));
}

void check_imports(const ElfInfo& elf, LibraryReport& r) {
  Dl_info self{};
  void* own = nullptr;
  if (::dladdr(reinterpret_cast<void*>(&check_library), &self) != 0 && self.dli_fname != nullptr) {
    own = ::dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }
  std::vector<std::string> missing;
  for (const std::string& s : elf.undefined_symbols) {
    if (is_op_shim(s)) {
      const bool provided = own != nullptr && ::dlsym(own, s.c_str()) != nullptr;
      r.op_shims.push_back({s, provided, is_aoti_cuda_own_shim(s)});
      if (!provided) missing.push_back(s);
    } else if (starts_with(s, "aoti_torch_") || starts_with(s, "aoti_cuda_") || starts_with(s, "cuda")) {
      if (::dlsym(RTLD_DEFAULT, s.c_str()) == nullptr) missing.push_back(s);
    }
  }
  if (own != nullptr) ::dlclose(own);
  (void)::dlerror();
  std::sort(missing.begin(), missing.end());
  r.missing_imports = missing;
  if (missing.empty()) {
    add(r, "imports", CheckStatus::kPass, "every shim and CUDA runtime import is provided");
  } else {
    add(r, "imports", CheckStatus::kFail,
        std::to_string(missing.size()) + " import(s) this build does not provide: " + join(missing, " "));
  }
}

// The extern GEMM shims run on cuBLAS, which libaoti_cuda opens on first use: a library that
// imports one cannot run its multiplies where cuBLAS cannot be found. (The int4 matmul also uses
// cuBLAS when present, but runs without it.) Only probed, never loaded.
void check_cublas(const ElfInfo& elf, LibraryReport& r) {
  std::vector<std::string> gemms;
  for (const std::string& s : elf.undefined_symbols) {
    if (common::is_extern_gemm_shim(s)) gemms.push_back(s);
  }
  if (gemms.empty()) return;
  const std::string uses = "its GEMMs (" + join(gemms, " ") + ") run on cuBLAS";
  if (const std::optional<std::string> explicit_path = env_text("AOTI_CUDA_CUBLAS")) {
    struct stat st {};
    const bool found = ::stat(explicit_path->c_str(), &st) == 0 && S_ISREG(st.st_mode);
    add(r, "cublas", found ? CheckStatus::kPass : CheckStatus::kFail,
        uses + (found ? ": " : ", but AOTI_CUDA_CUBLAS names a file that does not exist: ") + *explicit_path);
    return;
  }
  const std::string path = locate_library(AOTI_CUDA_CUBLAS_SONAME);
  if (!path.empty()) {
    add(r, "cublas", CheckStatus::kPass, uses + ": " + path);
  } else {
    add(r, "cublas", CheckStatus::kFail,
        uses + ", but " AOTI_CUDA_CUBLAS_SONAME " was not found on this machine (install the CUDA toolkit's cuBLAS, "
               "or set AOTI_CUDA_CUBLAS to its path)");
  }
}

void check_gpu(ByteView so, const LibraryCheckOptions& o, LibraryReport& r) {
  const CudaKernelInfo k = inspect_cuda_kernels(so);
  if (o.gpu_sms.empty()) {
    add(r, "gpu_architecture", CheckStatus::kNotChecked, o.no_gpu_reason + "; kernels: " + k.describe());
    return;
  }
  std::vector<std::string> bad;
  for (int sm : o.gpu_sms) {
    if (!k.runs_on(sm)) bad.push_back("sm_" + std::to_string(sm));
  }
  if (bad.empty()) {
    add(r, "gpu_architecture", CheckStatus::kPass, "kernels " + k.describe() + " run on the GPUs present");
  } else {
    add(r, "gpu_architecture", CheckStatus::kFail, "kernels " + k.describe() + " cannot run on " + join(bad));
  }
}

void check_weights(ByteView so, const LibraryCheckOptions& o, LibraryReport& r) {
  const std::optional<std::uint64_t> want = elf_external_weights_size(so);
  if (!o.has_weights) {
    if (want.has_value() && *want > 0 && !o.weights_key.empty()) {
      add(r, "weights", CheckStatus::kFail,
          "the library needs a " + std::to_string(*want) + "-byte weights blob under the key '" + o.weights_key +
              "', which no data file holds (they hold: " +
              (o.available_keys.empty() ? std::string("no keys") : common::join(o.available_keys)) +
              "; a data file from another export?)");
    } else {
      add(r, "weights", CheckStatus::kNotChecked, "no weights blob given");
    }
    return;
  }
  if (!want) {
    add(r, "weights", CheckStatus::kNotChecked,
        "the library records no weights size; loading it checks the blob against its constant table");
  } else if (*want != o.weights.size) {
    add(r, "weights", CheckStatus::kFail,
        "the library was compiled for a " + std::to_string(*want) + "-byte weights blob; " + o.weights_label + " has " +
            std::to_string(o.weights.size) + " bytes (a data file from another export?)");
  } else {
    add(r, "weights", CheckStatus::kPass, std::to_string(*want) + " bytes, the size the library was compiled for");
  }
}

}  // namespace

// Inductor names a custom operator's C shim aoti_torch_<device>_<operator name>; aoti_cuda's operators
// are all named aoti_cuda_* (tools/export/llm/decode_attention_op.py), so their shims share this prefix.
bool is_aoti_cuda_own_shim(const std::string& name) { return starts_with(name, "aoti_torch_cuda_aoti_cuda_"); }

const char* to_string(CheckStatus s) noexcept {
  switch (s) {
    case CheckStatus::kPass: return "pass";
    case CheckStatus::kFail: return "FAIL";
    case CheckStatus::kNotChecked: return "not checked";
  }
  return "?";
}

bool LibraryReport::runnable() const noexcept {
  return std::none_of(checks.begin(), checks.end(), [](const LibraryCheck& c) { return c.status == CheckStatus::kFail; });
}

std::string LibraryReport::failures() const {
  std::vector<std::string> f;
  for (const LibraryCheck& c : checks) {
    if (c.status == CheckStatus::kFail) f.push_back(c.name + ": " + c.detail);
  }
  return join(f, "; ");
}

LibraryCheck check_symbol_versions(ByteView so) {
  try {
    return versions_check(elf_version_needs(so));
  } catch (const Error& e) {
    return {"symbol_versions", CheckStatus::kFail, e.what()};
  }
}

LibraryReport check_library(ByteView so, const LibraryCheckOptions& options) {
  LibraryReport r;
  ElfInfo elf;
  try {
    elf = inspect_elf(so);
    if (!elf.is_shared_object) throw Error(ErrorCode::kInvalidProgram, "not a shared object (e_type " + std::to_string(elf.type) + ")");
    add(r, "elf", CheckStatus::kPass, "ELF" + std::to_string(elf.elf_class) + " " + elf.machine_name + " shared object");
  } catch (const Error& e) {
    add(r, "elf", CheckStatus::kFail, e.what());
    return r;
  }
  const std::vector<std::string> damage = elf_integrity_problems(so);
  add(r, "integrity", damage.empty() ? CheckStatus::kPass : CheckStatus::kFail,
      damage.empty() ? "tables, relocations and code pages consistent" : "damaged: " + join(damage, "; "));
  check_needed(elf, r);
  r.checks.push_back(check_symbol_versions(so));
  try {
    r.version_needs = elf_version_needs(so);
  } catch (const Error&) {
  }
  check_imports(elf, r);
  check_cuda_hooks(elf, r);
  check_cublas(elf, r);
  check_gpu(so, options, r);
  check_weights(so, options, r);
  std::sort(r.op_shims.begin(), r.op_shims.end(), [](const OpShimImport& a, const OpShimImport& b) { return a.name < b.name; });
  return r;
}

}  // namespace aoti_cuda
