// Pass-through cudart functions: the event functions made safe for graph
// capture (capture_hooks.hpp) and cudaMemcpy for weights uploads (weight_upload.hpp).
#include "runtime/capture_hooks.hpp"

#include <dlfcn.h>

#include <cstddef>

#include "aoti_cuda/export.h"
#include "runtime/weight_upload.hpp"

// cudart types, declared here so that this file does not include
// cuda_runtime_api.h (which declares these functions itself).
using cudaError_t = int;
using cudaEvent_t = void*;
using cudaStream_t = void*;
extern "C" int cudaThreadExchangeStreamCaptureMode(int* mode);

namespace aoti_cuda::runtime {
namespace {

constexpr int kModeRelaxed = 2;           // cudaStreamCaptureModeRelaxed
constexpr int kErrorInitialization = 3;   // cudaErrorInitializationError

thread_local bool t_capturing = false;
thread_local int t_skipped_records = 0;

// The real cudart function: the next definition after this object, else the
// one in the library that provides cudaThreadExchangeStreamCaptureMode to
// us (libcudart).
void* cudart_symbol(const char* name) {
  if (void* f = ::dlsym(RTLD_NEXT, name)) return f;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cudaThreadExchangeStreamCaptureMode), &info) != 0 && info.dli_fname != nullptr) {
    if (void* lib = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) return ::dlsym(lib, name);
  }
  return nullptr;
}

template <typename Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(cudart_symbol(name));
}

// Runs f with the thread's capture mode relaxed when a capture scope is active.
template <typename F>
int relaxed_if_capturing(F f) {
  if (!t_capturing) return f();
  int mode = kModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  const int rc = f();
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return rc;
}

}  // namespace

GraphCaptureScope::GraphCaptureScope() noexcept : previous_(t_capturing), records_at_start_(t_skipped_records) {
  t_capturing = true;
}

GraphCaptureScope::~GraphCaptureScope() { t_capturing = previous_; }

int GraphCaptureScope::skipped_records() const noexcept { return t_skipped_records - records_at_start_; }

}  // namespace aoti_cuda::runtime

extern "C" {

AOTI_CUDA_SHIM_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  using Fn = cudaError_t (*)(cudaEvent_t, cudaStream_t);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cudaEventRecord");
  if (aoti_cuda::runtime::t_capturing) {
    ++aoti_cuda::runtime::t_skipped_records;
    return 0;
  }
  return fn != nullptr ? fn(event, stream) : aoti_cuda::runtime::kErrorInitialization;
}

AOTI_CUDA_SHIM_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  using Fn = cudaError_t (*)(cudaEvent_t);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cudaEventQuery");
  if (fn == nullptr) return aoti_cuda::runtime::kErrorInitialization;
  return aoti_cuda::runtime::relaxed_if_capturing([&] { return fn(event); });
}

AOTI_CUDA_SHIM_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  using Fn = cudaError_t (*)(cudaEvent_t);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cudaEventSynchronize");
  if (fn == nullptr) return aoti_cuda::runtime::kErrorInitialization;
  return aoti_cuda::runtime::relaxed_if_capturing([&] { return fn(event); });
}

// Weights uploads (runtime/weight_upload.hpp): inside a WeightUploadScope,
// host-to-device copies from the blob are recorded for the pinned pipeline;
// any other copy first lets the recorded ones happen.
AOTI_CUDA_SHIM_API cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, int kind) {
  using Fn = cudaError_t (*)(void*, const void*, std::size_t, int);
  static const Fn fn = aoti_cuda::runtime::real<Fn>("cudaMemcpy");
  using aoti_cuda::runtime::WeightUploadScope;
  if (WeightUploadScope::offer(dst, src, count, kind)) return 0;
  if (const int err = WeightUploadScope::flush_before_other_copy(); err != 0) return err;
  return fn != nullptr ? fn(dst, src, count, kind) : aoti_cuda::runtime::kErrorInitialization;
}

}  // extern "C"

namespace aoti_cuda::runtime {

std::string capture_hooks_problem() {
  // What a library loaded now would bind to: the first definition in the global scope.
  const void* bound = ::dlsym(RTLD_DEFAULT, "cudaEventRecord");
  if (bound == reinterpret_cast<const void*>(&cudaEventRecord)) return "";
  return "the model libraries would bind cudaEventRecord to libcudart instead of libaoti_cuda's capture-safe "
         "definition (libcudart comes first in the process's global symbol scope; link or load libaoti_cuda "
         "before libcudart)";
}

}  // namespace aoti_cuda::runtime
