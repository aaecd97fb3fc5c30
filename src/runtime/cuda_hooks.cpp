// The hooks the loader binds model libraries to (cuda_hooks.hpp), their table,
// and the binding itself. Every interposed function of the SDK is defined in
// this file; none is exported, so the rest of the process never sees them.
#include "runtime/cuda_hooks.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>
#include <type_traits>

#include "aoti_cuda/error.hpp"
#include "common/cuda.hpp"
#include "common/cuda_hook_table.hpp"
#include "common/kernel_timer.hpp"
#include "format/elf.hpp"
#include "runtime/capture_hooks.hpp"
#include "runtime/driver_modules.hpp"
#include "runtime/weight_upload.hpp"

namespace aoti_cuda::runtime {
namespace {

using namespace common::hooks;

// What each hooked import would have reached without the hook: the first
// definition in the process's global scope, or (driver functions, which a
// model library may reach only through its own DT_NEEDED libcuda.so.1) the
// driver's. Resolved on first use and kept.
std::array<std::atomic<void*>, kHookCount> g_next{};

template <typename Fn>
Fn next(HookId id) noexcept {
  void* p = g_next[id].load(std::memory_order_acquire);
  if (p == nullptr) {
    const char* name = kHooks[static_cast<std::size_t>(id)].import;
    p = ::dlsym(RTLD_DEFAULT, name);
    if (p == nullptr && std::strncmp(name, "cu", 2) == 0 && std::strncmp(name, "cuda", 4) != 0) {
      p = common::driver_symbol(name);
    }
    g_next[id].store(p, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(p);
}

// ---- graph capture ------------------------------------------------------

template <HookId Id>
cudaError_t event_record(cudaEvent_t event, cudaStream_t stream) {
  if (GraphCaptureScope::skip_event_record()) return cudaSuccess;
  const auto fn = next<decltype(&::cudaEventRecord)>(Id);
  return fn != nullptr ? fn(event, stream) : cudaErrorInitializationError;
}

template <HookId Id>
cudaError_t event_record_with_flags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (GraphCaptureScope::skip_event_record()) return cudaSuccess;
  const auto fn = next<decltype(&::cudaEventRecordWithFlags)>(Id);
  return fn != nullptr ? fn(event, stream, flags) : cudaErrorInitializationError;
}

template <HookId Id>
cudaError_t event_wait(cudaEvent_t event) {  // cudaEventQuery, cudaEventSynchronize
  const auto fn = next<decltype(&::cudaEventQuery)>(Id);
  if (fn == nullptr) return cudaErrorInitializationError;
  RelaxedCaptureMode relaxed;
  return fn(event);
}

// ---- weights upload -----------------------------------------------------

template <HookId Id>
cudaError_t memcpy_hook(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
  if (WeightUploadScope::offer(dst, src, count, static_cast<int>(kind))) return cudaSuccess;
  if (const int err = WeightUploadScope::flush_before_other_copy(); err != 0) return static_cast<cudaError_t>(err);
  const auto fn = next<decltype(&::cudaMemcpy)>(Id);
  return fn != nullptr ? fn(dst, src, count, kind) : cudaErrorInitializationError;
}

// ---- kernel modules -----------------------------------------------------

void record_module(CUresult rc, CUmodule* module) {
  if (rc == CUDA_SUCCESS && module != nullptr) {
    if (ModuleTracker* t = ModuleTracker::current()) t->record(*module);
  }
}

void record_library(CUresult rc, CUlibrary* library) {
  if (rc == CUDA_SUCCESS && library != nullptr) {
    if (ModuleTracker* t = ModuleTracker::current()) t->record_library(*library);
  }
}

// Calls the loader the import would have reached, then records what it loaded.
template <typename Fn, typename Handle, typename... Args>
CUresult load_and_record(HookId id, void (*record)(CUresult, Handle*), Handle* out, Args... args) {
  const auto fn = next<Fn>(id);
  if (fn == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = fn(out, args...);
  record(rc, out);
  return rc;
}

CUresult module_load(CUmodule* module, const char* path) {
  return load_and_record<decltype(&::cuModuleLoad)>(kModuleLoad, record_module, module, path);
}

CUresult module_load_data(CUmodule* module, const void* image) {
  return load_and_record<decltype(&::cuModuleLoadData)>(kModuleLoadData, record_module, module, image);
}

CUresult module_load_data_ex(CUmodule* module, const void* image, unsigned int n, CUjit_option* options,
                             void** values) {
  return load_and_record<decltype(&::cuModuleLoadDataEx)>(kModuleLoadDataEx, record_module, module, image, n, options,
                                                          values);
}

CUresult module_load_fat_binary(CUmodule* module, const void* fat_binary) {
  return load_and_record<decltype(&::cuModuleLoadFatBinary)>(kModuleLoadFatBinary, record_module, module, fat_binary);
}

CUresult library_load_data(CUlibrary* library, const void* code, CUjit_option* jit_options, void** jit_values,
                           unsigned int jit_count, CUlibraryOption* options, void** values, unsigned int count) {
  return load_and_record<decltype(&::cuLibraryLoadData)>(kLibraryLoadData, record_library, library, code, jit_options,
                                                         jit_values, jit_count, options, values, count);
}

CUresult library_load_from_file(CUlibrary* library, const char* path, CUjit_option* jit_options, void** jit_values,
                                unsigned int jit_count, CUlibraryOption* options, void** values, unsigned int count) {
  return load_and_record<decltype(&::cuLibraryLoadFromFile)>(kLibraryLoadFromFile, record_library, library, path,
                                                             jit_options, jit_values, jit_count, options, values, count);
}

// ---- kernel launches ----------------------------------------------------

// Recorded weight copies must land before a kernel can read their destination.
CUresult flush_weight_copies() noexcept {
  const int err = WeightUploadScope::flush_before_other_copy();
  if (err == 0) return CUDA_SUCCESS;
  return err == cudaErrorMemoryAllocation ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
}

template <HookId Id>
CUresult launch_kernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                       unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream, void** params,
                       void** extra) {
  const auto fn = next<decltype(&::cuLaunchKernel)>(Id);
  if (fn == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (const CUresult err = flush_weight_copies(); err != CUDA_SUCCESS) return err;
  common::KernelTimer* timer = common::KernelTimer::current();
  if (timer == nullptr) return fn(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  common::KernelTimer::Launch timed(timer, f, nullptr, stream);
  const CUresult rc = fn(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  timed.done(rc == CUDA_SUCCESS);
  return rc;
}

template <HookId Id>
CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  const auto fn = next<decltype(&::cuLaunchKernelEx)>(Id);
  if (fn == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (const CUresult err = flush_weight_copies(); err != CUDA_SUCCESS) return err;
  common::KernelTimer* timer = common::KernelTimer::current();
  if (timer == nullptr || config == nullptr) return fn(config, f, params, extra);
  common::KernelTimer::Launch timed(timer, f, nullptr, config->hStream);
  const CUresult rc = fn(config, f, params, extra);
  timed.done(rc == CUDA_SUCCESS);
  return rc;
}

// ---- model messages -----------------------------------------------------

// What the model wrote to stderr in the thread's current ModelMessageScope.
// A fixed buffer: the scope wraps every container call, so it must not allocate.
struct MessageBuffer {
  int depth = 0;
  std::size_t size = 0;
  char text[1024];
};
thread_local MessageBuffer t_messages;

void keep_message(FILE* stream, const void* data, std::size_t bytes) noexcept {
  MessageBuffer& m = t_messages;
  if (m.depth == 0 || stream != stderr || data == nullptr) return;
  const std::size_t room = sizeof(m.text) - m.size;
  const std::size_t n = std::min(room, bytes);
  std::memcpy(m.text + m.size, data, n);
  m.size += n;
}

std::size_t fwrite_hook(const void* data, std::size_t size, std::size_t count, FILE* stream) {
  std::size_t bytes = 0;
  if (!__builtin_mul_overflow(size, count, &bytes)) keep_message(stream, data, bytes);
  const auto fn = next<decltype(&::fwrite)>(kFwrite);
  return fn != nullptr ? fn(data, size, count, stream) : 0;
}

int fputs_hook(const char* text, FILE* stream) {
  if (text != nullptr) keep_message(stream, text, std::strlen(text));
  const auto fn = next<decltype(&::fputs)>(kFputs);
  return fn != nullptr ? fn(text, stream) : EOF;
}

template <HookId Id>
int put_char(int c, FILE* stream) {  // fputc, putc
  const char ch = static_cast<char>(c);
  keep_message(stream, &ch, 1);
  const auto fn = next<decltype(&::fputc)>(Id);
  return fn != nullptr ? fn(c, stream) : EOF;
}

// Each hook has exactly the type of the function it replaces, as the CUDA and
// C headers declare it (the _ptsz/_ptds variants are declared only for
// per-thread-stream builds; they have their base function's type).
// (glibc's declarations carry attributes such as nonnull that a type
// comparison drops; that is expected.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <typename Hook, typename Declared>
constexpr bool same_type = std::is_same_v<Hook, Declared>;
static_assert(same_type<decltype(&event_record<kEventRecord>), decltype(&::cudaEventRecord)>);
static_assert(same_type<decltype(&event_record_with_flags<kEventRecordWithFlags>), decltype(&::cudaEventRecordWithFlags)>);
static_assert(same_type<decltype(&event_wait<kEventQuery>), decltype(&::cudaEventQuery)>);
static_assert(same_type<decltype(&event_wait<kEventSynchronize>), decltype(&::cudaEventSynchronize)>);
static_assert(same_type<decltype(&memcpy_hook<kMemcpy>), decltype(&::cudaMemcpy)>);
static_assert(same_type<decltype(&module_load), decltype(&::cuModuleLoad)>);
static_assert(same_type<decltype(&module_load_data), decltype(&::cuModuleLoadData)>);
static_assert(same_type<decltype(&module_load_data_ex), decltype(&::cuModuleLoadDataEx)>);
static_assert(same_type<decltype(&module_load_fat_binary), decltype(&::cuModuleLoadFatBinary)>);
static_assert(same_type<decltype(&library_load_data), decltype(&::cuLibraryLoadData)>);
static_assert(same_type<decltype(&library_load_from_file), decltype(&::cuLibraryLoadFromFile)>);
static_assert(same_type<decltype(&launch_kernel<kLaunchKernel>), decltype(&::cuLaunchKernel)>);
static_assert(same_type<decltype(&launch_kernel_ex<kLaunchKernelEx>), decltype(&::cuLaunchKernelEx)>);
static_assert(same_type<decltype(&fwrite_hook), decltype(&::fwrite)>);
static_assert(same_type<decltype(&fputs_hook), decltype(&::fputs)>);
static_assert(same_type<decltype(&put_char<kFputc>), decltype(&::fputc)>);
static_assert(same_type<decltype(&put_char<kPutc>), decltype(&::putc)>);
#pragma GCC diagnostic pop

template <typename Fn>
void* address(Fn fn) {
  return reinterpret_cast<void*>(fn);
}

// The hook of each table row, same order.
const std::array<void*, kHookCount>& hook_functions() {
  static const std::array<void*, kHookCount> fns = {
      address(&event_record<kEventRecord>), address(&event_record<kEventRecordPtsz>),
      address(&event_record_with_flags<kEventRecordWithFlags>),
      address(&event_record_with_flags<kEventRecordWithFlagsPtsz>), address(&event_wait<kEventQuery>),
      address(&event_wait<kEventSynchronize>), address(&memcpy_hook<kMemcpy>), address(&memcpy_hook<kMemcpyPtds>),
      address(&module_load), address(&module_load_data), address(&module_load_data_ex),
      address(&module_load_fat_binary), address(&library_load_data), address(&library_load_from_file),
      address(&launch_kernel<kLaunchKernel>), address(&launch_kernel<kLaunchKernelPtsz>),
      address(&launch_kernel_ex<kLaunchKernelEx>), address(&launch_kernel_ex<kLaunchKernelExPtsz>),
      address(&fwrite_hook), address(&fputs_hook), address(&put_char<kFputc>), address(&put_char<kPutc>),
  };
  return fns;
}


// Makes the pages of [begin, end) writable (true) or read-only again (false).
bool set_writable(std::uintptr_t begin, std::uintptr_t end, bool writable) noexcept {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = begin & ~(page - 1);
  const std::uintptr_t last = (end + page - 1) & ~(page - 1);
  return ::mprotect(reinterpret_cast<void*>(first), last - first, writable ? PROT_READ | PROT_WRITE : PROT_READ) == 0;
}

}  // namespace


void* hook_function(const char* import) noexcept {
  const int id = import != nullptr ? find_hook(import) : -1;
  return id >= 0 ? hook_functions()[static_cast<std::size_t>(id)] : nullptr;
}



HookBinding bind_hooks(void* handle, ByteView so, const std::string& label) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) {
    throw Error(ErrorCode::kLoad, "binding the CUDA hooks of " + label + ": the loaded library has no link map");
  }
  const std::vector<format::ImportSlot> slots =
      format::import_slots(so, [](const std::string& name) { return find_hook(name) >= 0; });
  const auto& fns = hook_functions();
  std::uintptr_t relro_begin = UINTPTR_MAX, relro_end = 0;
  for (const format::ImportSlot& s : slots) {
    if (!s.in_relro) continue;
    relro_begin = std::min<std::uintptr_t>(relro_begin, map->l_addr + s.offset);
    relro_end = std::max<std::uintptr_t>(relro_end, map->l_addr + s.offset + sizeof(void*));
  }
  const bool relro = relro_end != 0;
  if (relro && !set_writable(relro_begin, relro_end, true)) {
    throw Error(ErrorCode::kLoad, "binding the CUDA hooks of " + label + ": its relocated data cannot be made "
                                      "writable (mprotect: " + std::strerror(errno) + "); without the hooks, graph "
                                      "capture, pinned weight uploads and kernel unloading would not work");
  }
  std::set<std::string> bound;
  std::string unbound;
  for (const format::ImportSlot& s : slots) {
    const int id = find_hook(s.symbol);
    auto* slot = reinterpret_cast<std::uintptr_t*>(map->l_addr + s.offset);
    const auto want = reinterpret_cast<std::uintptr_t>(fns[static_cast<std::size_t>(id)]) +
                      static_cast<std::uintptr_t>(s.addend);
    *slot = want;
    if (*slot == want) {
      bound.insert(s.symbol);
    } else {
      unbound += " " + s.symbol;
    }
  }
  if (relro) (void)set_writable(relro_begin, relro_end, false);
  if (!unbound.empty()) {
    throw Error(ErrorCode::kLoad, "binding the CUDA hooks of " + label + " failed for:" + unbound +
                                      " (see docs/cuda-hooks.md for what each hook guarantees)");
  }
  HookBinding result;
  result.bound.assign(bound.begin(), bound.end());
  return result;
}

ModelMessageScope::ModelMessageScope() noexcept {
  if (t_messages.depth++ == 0) t_messages.size = 0;
}

ModelMessageScope::~ModelMessageScope() { --t_messages.depth; }

std::string last_model_message() {
  const MessageBuffer& m = t_messages;
  std::string text(m.text, m.size);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace aoti_cuda::runtime
