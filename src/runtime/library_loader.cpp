#include "runtime/library_loader.hpp"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/library_check.hpp"
#include "aoti_cuda/log.hpp"
#include "common/env.hpp"
#include "common/fault_injection.hpp"
#include "common/text.hpp"
#include "format/elf.hpp"
#include "runtime/cuda_hooks.hpp"
#include "runtime/sha256.hpp"
#include "shim/ops/gemm.hpp"

namespace aoti_cuda::runtime {
namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kHostMachine = 62;
constexpr const char* kHostMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr std::uint16_t kHostMachine = 183;
constexpr const char* kHostMachineName = "aarch64";
#else
#error "aoti_cuda supports x86-64 and aarch64 Linux"
#endif

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// Test hook (common/fault_injection.hpp): fail this system call of a load.
bool loader_fault() noexcept { return testing::FaultInjector::should_fail(testing::FaultKind::kLoaderCall); }

// Writes all of [data, data+size) to fd; false (errno set) on failure.
bool write_all(int fd, const std::uint8_t* data, std::size_t size) {
  if (loader_fault()) {
    errno = EIO;
    return false;
  }
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool patch_unique_bindings(int fd, const std::vector<std::size_t>& offsets, const ByteView& so) {
  for (std::size_t off : offsets) {
    const std::uint8_t info = static_cast<std::uint8_t>((1u << 4) | (so.data[off] & 0x0f));  // STB_GLOBAL
    if (::pwrite(fd, &info, 1, static_cast<off_t>(off)) != 1) return false;
  }
  return true;
}

// Our dlopen, dlclose and dlsym calls happen under this mutex. glibc
// serializes them anyway (its internal dl_load_lock), so it costs nothing, but
// that lock is invisible to ThreadSanitizer: without this one, the dynamic
// loader's own bookkeeping (calloc'ed in one thread's dlopen, freed in another
// thread's dlclose) is reported as a data race when Modules load concurrently.
std::mutex& dl_mutex() {
  static std::mutex m;
  return m;
}

template <typename Fn>
void bind(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
}

// A file holding the .so bytes that dlopen can read; closed/unlinked by the destructor.
struct SoFile {
  int fd = -1;
  std::string path;
  bool unlink_path = false;
  ~SoFile() {
    if (fd >= 0) ::close(fd);
    if (unlink_path) ::unlink(path.c_str());
  }
};

// The path "/proc/self/fd/N" must not name a library glibc still has loaded
// (glibc matches dlopen names as strings, and a library whose earlier memfd
// had the same number could still be mapped). Move the fd to a higher number
// until its path is unused.
bool choose_fresh_fd_path(SoFile& f) {
  for (int attempt = 0; attempt < 256; ++attempt) {
    f.path = "/proc/self/fd/" + std::to_string(f.fd);
    {
      std::lock_guard<std::mutex> dl(dl_mutex());
      void* stale = ::dlopen(f.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
      if (stale == nullptr) return true;
      ::dlclose(stale);
    }
    const int moved = ::fcntl(f.fd, F_DUPFD_CLOEXEC, f.fd + 1);
    if (moved < 0) return false;
    ::close(f.fd);
    f.fd = moved;
  }
  return false;
}

// Copies `so` into a file dlopen can read (GNU_UNIQUE bindings are patched
// afterwards: patch_unique_bindings).
void write_so_file(SoFile& f, ByteView so, const std::string& label) {
  // Preferred: an anonymous memory file, nothing touches the file system.
  // AOTI_CUDA_DISABLE_MEMFD=1 forces the temp-file path (tests, odd sandboxes).
  const bool memfd_allowed = !env_flag("AOTI_CUDA_DISABLE_MEMFD");
  f.fd = memfd_allowed && !loader_fault() ? static_cast<int>(::memfd_create("aoti_cuda_model", MFD_CLOEXEC)) : -1;
  if (f.fd >= 0) {
    if (!write_all(f.fd, so.data, so.size)) {
      const int err = errno;
      throw Error(ErrorCode::kIo, "writing the model library of " + label + " to a memfd failed: " + errno_text(err));
    }
    if (choose_fresh_fd_path(f) && ::access(f.path.c_str(), R_OK) == 0) return;
    ::close(f.fd);  // no usable /proc: fall back to a temp file
    f.fd = -1;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  std::string templ = dir + "/aoti_cuda_model_XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  f.fd = loader_fault() ? (errno = EMFILE, -1) : ::mkstemp(buf.data());
  if (f.fd < 0) {
    const int err = errno;
    throw Error(ErrorCode::kIo, "creating a temporary file in " + dir + " for the model library of " + label +
                                    " failed (memfd_create unavailable too): " + errno_text(err));
  }
  f.path = buf.data();
  f.unlink_path = true;
  (void)::fcntl(f.fd, F_SETFD, FD_CLOEXEC);
  if (!write_all(f.fd, so.data, so.size)) {
    const int err = errno;
    throw Error(ErrorCode::kIo, "writing the model library of " + label + " to " + f.path + " failed: " + errno_text(err));
  }
}



// The mangled name of libstdc++'s __gnu_cxx::__freeres(), which frees the
// exception-handling emergency pool (eh_alloc.cc).
constexpr const char* kFreeresSymbol = "_ZN9__gnu_cxx9__freeresEv";

// A model library that links libstdc++ statically (every AOTInductor .so does)
// gets a private copy of libstdc++'s emergency pool for exceptions thrown under
// memory pressure: ~73 KB malloc'ed by a static constructor when the library is
// loaded, and freed by nothing — the pool has no destructor and dlclose does not
// free heap blocks — so each load/unload cycle leaked it. The
// library's own __freeres frees exactly that block. Returns it when the
// library defines it itself (never a shared libstdc++'s: that pool belongs to
// the process), found through the dynamic table or, when hidden, the .symtab.
void (*own_freeres(void* handle, ByteView so))() {
  link_map* self = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &self) != 0 || self == nullptr) return nullptr;
  auto owned_by_self = [self](void* addr) {
    Dl_info info{};
    void* owner = nullptr;
    return addr != nullptr && ::dladdr1(addr, &info, &owner, RTLD_DL_LINKMAP) != 0 && owner == self;
  };
  void* sym = ::dlsym(handle, kFreeresSymbol);
  if (!owned_by_self(sym)) {
    const std::uint64_t value = format::defined_function_value(so, kFreeresSymbol);
    sym = value != 0 ? reinterpret_cast<void*>(self->l_addr + value) : nullptr;
    if (!owned_by_self(sym)) sym = nullptr;
  }
  (void)::dlerror();
  return reinterpret_cast<void (*)()>(sym);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Binds the AOTInductor entry points of a loaded model library; throws
// kLoad naming every required one that is missing.
void bind_entry_points(void* handle, ContainerApi& a, const std::string& label) {
  bind(handle, "AOTInductorModelContainerCreateWithDevice", a.create_with_device);
  bind(handle, "AOTInductorModelContainerDelete", a.destroy);
  bind(handle, "AOTInductorModelContainerGetNumInputs", a.get_num_inputs);
  bind(handle, "AOTInductorModelContainerGetNumOutputs", a.get_num_outputs);
  bind(handle, "AOTInductorModelContainerRun", a.run);
  bind(handle, "AOTInductorModelUpdateConstantsFromBlob", a.update_constants_from_blob);
  bind(handle, "AOTInductorModelContainerGetInputName", a.get_input_name);
  bind(handle, "AOTInductorModelContainerGetOutputName", a.get_output_name);
  bind(handle, "AOTInductorModelContainerGetNumConstants", a.get_num_constants);
  bind(handle, "AOTInductorModelContainerGetConstantsBlobSize", a.get_constants_blob_size);
  bind(handle, "AOTInductorGetLastError", a.get_last_error);
  bind(handle, "AOTInductorModelContainerGetConstantName", a.get_constant_name);
  bind(handle, "AOTInductorModelContainerGetConstantOriginalFQN", a.get_constant_original_fqn);
  bind(handle, "AOTInductorModelContainerGetConstantFromFolded", a.get_constant_from_folded);
  bind(handle, "AOTInductorModelContainerGetConstantDtype", a.get_constant_dtype);
  bind(handle, "AOTInductorModelContainerGetConstantType", a.get_constant_type);
  bind(handle, "AOTInductorModelContainerGetConstantDataSize", a.get_constant_data_size);
  bind(handle, "AOTInductorModelContainerUpdateUserManagedConstantBufferPairs",
       a.update_user_managed_constant_buffer_pairs);
  std::string absent;
  if (!a.create_with_device) absent += " AOTInductorModelContainerCreateWithDevice";
  if (!a.destroy) absent += " AOTInductorModelContainerDelete";
  if (!a.get_num_inputs) absent += " AOTInductorModelContainerGetNumInputs";
  if (!a.get_num_outputs) absent += " AOTInductorModelContainerGetNumOutputs";
  if (!a.run) absent += " AOTInductorModelContainerRun";
  if (!absent.empty()) {
    throw Error(ErrorCode::kLoad, "the model library of " + label +
                                      " lacks required AOTInductor entry point(s):" + absent);
  }
}

}  // namespace

std::vector<std::string> missing_imports(const ElfInfo& elf) {
  std::vector<std::string> missing;
  for (const std::string& name : elf.undefined_symbols) {
    std::string base = name.substr(0, name.find('@'));  // tolerate "sym@VERSION" spellings
    if (!(starts_with(base, "aoti_torch_") || starts_with(base, "aoti_cuda_") || starts_with(base, "cuda"))) continue;
    if (::dlsym(RTLD_DEFAULT, base.c_str()) == nullptr) missing.push_back(base);
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return missing;
}

void promote_self_to_global() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&promote_self_to_global), &info) == 0 || info.dli_fname == nullptr) return;
    void* self = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    // The RTLD_GLOBAL promotion sticks to the already-loaded object; drop the
    // extra reference NOLOAD took.
    if (self != nullptr) ::dlclose(self);
    (void)::dlerror();
  });
}

std::vector<std::size_t> gnu_unique_symbol_offsets(ByteView elf) { return format::gnu_unique_symbol_offsets(elf); }

namespace {

// Throws kLoad naming every shim/cudart import this process does not provide.
void check_imports(const ElfInfo& elf, const std::string& label) {
  std::vector<std::string> missing;
  {
    std::lock_guard<std::mutex> dl(dl_mutex());
    promote_self_to_global();
    missing = missing_imports(elf);
  }
  if (missing.empty()) return;
  throw Error(ErrorCode::kLoad, "the model library of " + label + " imports " + std::to_string(missing.size()) +
                                    " symbol(s) this process does not provide: " + common::join(missing) +
                                    " (the library needs a newer aoti_cuda shim, or libaoti_cuda/cudart are not"
                                    " in the global symbol scope)");
}

// After dlopen failed (dlerror() not yet read): the C/C++ runtime versions the
// library was linked against (GLIBC_2.38, ...) when some are missing (dlopen
// names only the first, and less plainly), else dlopen's own message. The
// versions are checked only here: a library that loads has them all.
[[noreturn]] void throw_dlopen_failure(ByteView so, const std::string& label) {
  const char* why = ::dlerror();
  const std::string dl_error = why != nullptr ? why : "unknown error";
  const LibraryCheck versions = check_symbol_versions(so);
  if (versions.status == CheckStatus::kFail) {
    throw Error(ErrorCode::kLoad, "the model library of " + label + " cannot be loaded on this machine: " +
                                      versions.detail);
  }
  throw Error(ErrorCode::kLoad, "dlopen of the model library of " + label + " failed: " + dl_error);
}

// AOTI_CUDA_TRACE_LOAD=1: where a library's load time went (docs/benchmarks/executorch.md uses it).
void log_load_phases(const std::string& label, std::size_t bytes, double total_ms, double checks_ms,
                     double copied_ms, double dlopen_ms) {
  char phases[160];
  std::snprintf(phases, sizeof phases, "%.3f ms (%zu bytes; checks %.3f, copy done at %.3f, dlopen %.3f)", total_ms,
                bytes, checks_ms, copied_ms, dlopen_ms);
  log(LogLevel::kInfo, label + ": library loaded in " + phases);
}

}  // namespace

std::unique_ptr<ModelLibrary> ModelLibrary::load(ByteView so, const std::string& label,
                                                 const std::vector<std::string>& allowed_sha256) {
  if (so.data == nullptr || so.size == 0) {
    throw Error(ErrorCode::kInvalidProgram, "the model library of " + label + " is empty");
  }
  // 0. The copy into the file dlopen reads, the largest part of a load (an
  // AOTInductor library is 2.3 MB and up, its libstdc++ linked in; on an H200
  // machine ~1.5 ms, mostly the file's page allocation), starts first and
  // overlaps every check below (~1 ms, most of it first touches of the
  // mapped program). Copying runs none of the library's code: the trust pin
  // is still checked before dlopen. `file` outlives `copy`, whose destructor
  // waits for the helper thread when a check throws.
  const auto t_start = common::Clock::now();
  SoFile file;
  std::future<void> copy;
  if (so.size >= kCopyOnThreadFrom) {
    copy = std::async(std::launch::async, [&file, so, &label] { write_so_file(file, so, label); });
  }
  // 1. What is it? (parsing only; throws kInvalidProgram naming the failed check)
  ElfInfo elf = inspect_elf(so);
  if (elf.elf_class != 64 || elf.machine != kHostMachine || !elf.is_shared_object) {
    throw Error(ErrorCode::kLoad, "the model library of " + label + " is not a " + kHostMachineName +
                                      " shared object (ELF class " + std::to_string(elf.elf_class) + ", machine " +
                                      (elf.machine_name.empty() ? std::to_string(elf.machine) : elf.machine_name) +
                                      ", type " + std::to_string(elf.type) + ")");
  }
  auto lib = std::unique_ptr<ModelLibrary>(new ModelLibrary());
  lib->label_ = label;
  // 2. Trust pin, before any of its code can run. Hashing costs ~4 ms/MB, so
  // it only happens when the caller asked for a pin.
  if (!allowed_sha256.empty()) {
    lib->sha256_ = sha256_hex(so.data, so.size);
    bool allowed = false;
    for (const std::string& pin : allowed_sha256) allowed = allowed || lower(pin) == lib->sha256_;
    if (!allowed) {
      throw Error(ErrorCode::kLoad, "the model library of " + label + " has SHA-256 " + lib->sha256_ +
                                        ", which is not in LoadOptions::allowed_so_sha256");
    }
  }
  // 3. Every shim/cudart import must resolve, or dlopen(RTLD_NOW) would fail
  // with only the first name; report all of them.
  check_imports(elf, label);
  // 3b. Does it multiply through cuBLAS? (The Module opens cuBLAS after the libraries are loaded.)
  for (const std::string& name : elf.undefined_symbols) {
    lib->cublas_use_ = std::max(lib->cublas_use_, shim::gemm::cublas_use(name.substr(0, name.find('@')).c_str()));
  }
  lib->kernels_ = inspect_cuda_kernels(so);
  std::vector<std::size_t> unique_offsets;
  if (!env_flag("AOTI_CUDA_KEEP_UNIQUE_SYMBOLS")) unique_offsets = gnu_unique_symbol_offsets(so);
  const double checks_ms = common::ms_since(t_start);
  if (copy.valid()) {
    copy.get();  // rethrows the copy's kIo error
  } else {
    write_so_file(file, so, label);
  }
  if (!patch_unique_bindings(file.fd, unique_offsets, so)) {
    const int err = errno;
    throw Error(ErrorCode::kIo, "writing the model library of " + label + " to " + file.path +
                                    " failed: " + errno_text(err));
  }
  const double copied_ms = common::ms_since(t_start);
  // 4. Load from the anonymous file. Held from dlopen to the end (declared
  // after `lib`, so released before a failed load's ~ModelLibrary takes it again).
  std::unique_lock<std::mutex> dl(dl_mutex());
  (void)::dlerror();
  // RTLD_NOW: every import was checked above, so binding everything now
  // costs little and moves any surprise to load time instead of mid-run.
  // AOTI_CUDA_DLOPEN_LAZY=1 switches to lazy binding (for measurements).
  const int mode = env_flag("AOTI_CUDA_DLOPEN_LAZY") ? RTLD_LAZY : RTLD_NOW;
  lib->handle_ = loader_fault() ? nullptr : ::dlopen(file.path.c_str(), mode | RTLD_LOCAL);
  if (lib->handle_ == nullptr) throw_dlopen_failure(so, label);
  const double dlopen_ms = common::ms_since(t_start) - copied_ms;
  // AOTI_CUDA_KEEP_EH_POOL=1 leaves the pool alone (to measure the leak it prevents).
  if (!env_flag("AOTI_CUDA_KEEP_EH_POOL")) lib->freeres_ = own_freeres(lib->handle_, so);
  // 5. The CUDA functions the SDK hooks, bound in the library's own import
  // slots whatever the process's symbol order (cuda_hooks.hpp).
  lib->hooks_ = bind_hooks(lib->handle_, so, label);  // throws: ~ModelLibrary dlcloses
  lib->hooks_.warnings = common::hooks::bypass_warnings(elf.undefined_symbols);
  // 6. Entry points.
  bind_entry_points(lib->handle_, lib->api_, label);
  if (env_flag("AOTI_CUDA_TRACE_LOAD")) {
    log_load_phases(label, so.size, common::ms_since(t_start), checks_ms, copied_ms, dlopen_ms);
  }
  return lib;
}

ModelLibrary::~ModelLibrary() {
  if (handle_ == nullptr) return;
  // Every load dlopens a fresh memfd (a new link map nobody else references),
  // and the containers built from it are gone, so none of the library's code
  // can throw again: its emergency pool is dead weight. Free it now; once
  // unmapped, the pointer to it would be lost.
  std::lock_guard<std::mutex> dl(dl_mutex());
  if (freeres_ != nullptr) freeres_();
  ::dlclose(handle_);
}

}  // namespace aoti_cuda::runtime
