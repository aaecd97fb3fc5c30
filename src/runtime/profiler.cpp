// The per-call profiler (see profiler.hpp).
#include "runtime/profiler.hpp"

#include "common/cuda.hpp"

namespace aoti_cuda::runtime {

using common::check_cuda;

Profiler::Profiler(RunProfile* out, void* stream, bool cuda, bool kernels)
    : out_(out), stream_(static_cast<cudaStream_t>(stream)), cuda_(cuda), t_call_(common::Clock::now()) {
  if (out_ != nullptr && cuda_ && kernels) {
    kernel_timer_ = std::make_unique<common::KernelTimer>();
    kernel_scope_.emplace(kernel_timer_.get());
  }
}

Profiler::~Profiler() {
  for (Step& s : steps_) {
    if (s.start != nullptr) (void)cudaEventDestroy(s.start);
    if (s.stop != nullptr) (void)cudaEventDestroy(s.stop);
  }
}

void Profiler::begin_step(std::string what) {
  Step s;
  s.what = std::move(what);
  if (cuda_) {
    check_cuda(cudaEventCreate(&s.start), "cudaEventCreate (profile)");
    check_cuda(cudaEventCreate(&s.stop), "cudaEventCreate (profile)");
    check_cuda(cudaEventRecord(s.start, stream_), "cudaEventRecord (profile)");
  }
  s.t0 = common::Clock::now();
  steps_.push_back(std::move(s));
}

void Profiler::end_step() {
  Step& s = steps_.back();
  // No throw here (a scope's destructor calls this); a failed record leaves gpu_ms at -1.
  if (cuda_ && s.stop != nullptr && cudaEventRecord(s.stop, stream_) != cudaSuccess) {
    (void)cudaEventDestroy(s.stop);
    s.stop = nullptr;
  }
  s.host_ms = common::ms_since(s.t0);
}

void Profiler::finish() {
  if (out_ == nullptr) return;
  RunProfile p;
  if (cuda_ && !steps_.empty()) check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (profile)");
  p.host_ms = common::ms_since(t_call_);
  cudaEvent_t first = nullptr, last = nullptr;
  for (const Step& s : steps_) {
    StepProfile sp{s.what, s.host_ms, -1};
    float ms = 0;
    if (s.start != nullptr && s.stop != nullptr && cudaEventElapsedTime(&ms, s.start, s.stop) == cudaSuccess) {
      sp.gpu_ms = ms;
      if (first == nullptr) first = s.start;
      last = s.stop;
    }
    p.steps.push_back(std::move(sp));
  }
  float total = 0;
  if (first != nullptr && cudaEventElapsedTime(&total, first, last) == cudaSuccess) p.gpu_ms = total;
  if (kernel_timer_ != nullptr) {
    kernel_scope_.reset();  // nothing launched after this point belongs to the call
    for (common::KernelTime& k : kernel_timer_->finish()) p.kernels.push_back({std::move(k.name), k.launches, k.gpu_ms});
  }
  *out_ = std::move(p);
}

}  // namespace aoti_cuda::runtime
