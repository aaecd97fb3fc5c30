// aoti_cuda shim — zeroed counters per (device, stream); see zeroed_counters.hpp.
#include "shim/ops/zeroed_counters.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

namespace aoti_cuda {
namespace shim {
namespace zeroed_counters {
namespace {

struct Table {
  std::mutex mutex;
  std::map<std::pair<int, void*>, unsigned int*> sets;
};

Table& table() {
  static Table* t = new Table;  // never destroyed: captured graphs may outlive static destruction
  return *t;
}

// A zeroed block of kPerStream counters on the current device, or nullptr. Safe inside a capture on
// this thread: relaxed mode for the allocation, the zeroing on a private stream, synchronized.
unsigned int* allocate_zeroed() noexcept {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  void* p = nullptr;
  cudaStream_t side = nullptr;
  bool ok = cudaMalloc(&p, kPerStream * sizeof(unsigned int)) == cudaSuccess;
  ok = ok && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess;
  ok = ok && cudaMemsetAsync(p, 0, kPerStream * sizeof(unsigned int), side) == cudaSuccess;
  ok = ok && cudaStreamSynchronize(side) == cudaSuccess;
  if (side != nullptr) (void)cudaStreamDestroy(side);
  if (!ok && p != nullptr) (void)cudaFree(p);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);  // back to the caller's mode
  (void)cudaGetLastError();                           // nothing left for the model library
  return ok ? static_cast<unsigned int*>(p) : nullptr;
}

}  // namespace

unsigned int* counters(int device, void* stream, std::size_t count) noexcept {
  // cudaStreamPerThread names a different stream on each thread: one key could not tell them apart.
  if (count > kPerStream || stream == static_cast<void*>(cudaStreamPerThread)) return nullptr;
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  const auto key = std::make_pair(device, stream);
  const auto it = t.sets.find(key);
  if (it != t.sets.end()) return it->second;
  if (t.sets.size() >= kMaxStreams) return nullptr;
  unsigned int* p = allocate_zeroed();
  if (p != nullptr) t.sets.emplace(key, p);
  return p;
}

}  // namespace zeroed_counters
}  // namespace shim
}  // namespace aoti_cuda
