// Per-kernel GPU times (see kernel_timer.hpp).
#include "common/kernel_timer.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "common/cuda.hpp"

namespace aoti_cuda::common {
namespace {

thread_local KernelTimer* t_timer = nullptr;

}  // namespace

KernelTimer* KernelTimer::current() noexcept { return t_timer; }

KernelTimer::Scope::Scope(KernelTimer* timer) noexcept : previous_(t_timer) { t_timer = timer; }

KernelTimer::Scope::~Scope() { t_timer = previous_; }

KernelTimer::~KernelTimer() {
  for (Record& r : records_) {
    if (r.start != nullptr) (void)cudaEventDestroy(r.start);
    if (r.stop != nullptr) (void)cudaEventDestroy(r.stop);
  }
}

KernelTimer::Launch::Launch(KernelTimer* timer, const void* function, const char* label, void* stream) noexcept
    : timer_(timer) {
  if (timer_ == nullptr) return;
  Record r;
  r.function = function;
  r.label = label;
  const auto s = static_cast<cudaStream_t>(stream);
  if (cudaEventCreate(&r.start) != cudaSuccess || cudaEventCreate(&r.stop) != cudaSuccess ||
      cudaEventRecord(r.start, s) != cudaSuccess) {
    (void)cudaGetLastError();
    if (r.start != nullptr) (void)cudaEventDestroy(r.start);
    if (r.stop != nullptr) (void)cudaEventDestroy(r.stop);
    return;
  }
  try {
    timer_->records_.push_back(r);
  } catch (...) {
    (void)cudaEventDestroy(r.start);
    (void)cudaEventDestroy(r.stop);
    return;
  }
  // The stop event goes on the same stream after the launch: remember it.
  stream_ = s;
  index_ = timer_->records_.size() - 1;
  open_ = true;
}

void KernelTimer::Launch::done(bool launched) noexcept {
  if (!open_) return;
  open_ = false;
  Record& r = timer_->records_[index_];
  if (!launched || cudaEventRecord(r.stop, stream_) != cudaSuccess) {
    // Left out of the profile: its events are destroyed and the record marked empty.
    (void)cudaGetLastError();
    (void)cudaEventDestroy(r.start);
    (void)cudaEventDestroy(r.stop);
    r.start = r.stop = nullptr;
  }
}

KernelTimer::Launch::~Launch() { done(false); }

std::vector<KernelTime> KernelTimer::finish() {
  std::vector<KernelTime> out;
  std::unordered_map<std::string, std::size_t> index;
  std::unordered_map<const void*, std::string> names;
  for (const Record& r : records_) {
    if (r.start == nullptr) continue;  // a launch that failed
    check_cuda(cudaEventSynchronize(r.stop), "cudaEventSynchronize (kernel profile)");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime (kernel profile)");
    std::string name;
    if (r.label != nullptr) {
      name = r.label;
    } else {
      auto it = names.find(r.function);
      if (it == names.end()) it = names.emplace(r.function, kernel_function_name(r.function)).first;
      name = it->second;
    }
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) out.push_back(KernelTime{name, 0, 0});
    KernelTime& k = out[it->second];
    ++k.launches;
    k.gpu_ms += ms;
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.gpu_ms > b.gpu_ms; });
  return out;
}

std::string kernel_function_name(const void* function) {
  using Fn = int (*)(const char**, const void*);
  static const Fn get_name = reinterpret_cast<Fn>(driver_symbol("cuFuncGetName"));
  const char* name = nullptr;
  if (function != nullptr && get_name != nullptr && get_name(&name, function) == 0 && name != nullptr) return name;
  char buf[32];
  std::snprintf(buf, sizeof buf, "kernel %p", function);
  return buf;
}

}  // namespace aoti_cuda::common
