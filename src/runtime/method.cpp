// Loaded-method resources: teardown order of a delegate, slot streams and
// staging, the stream scope, and model-error text.
#include "runtime/method.hpp"

#include <algorithm>

#include "common/chunk_pool.hpp"
#include "common/cuda.hpp"
#include "runtime/cuda_hooks.hpp"
#include "runtime/graph_cache.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/gemm.hpp"

namespace aoti_cuda::runtime {

using common::check_cuda;
using common::DeviceGuard;

Delegate::~Delegate() {
  {
    // Bind the primary context even when the device is already current:
    // cuModuleUnload (below) needs it current on this thread.
    DeviceGuard on_device(cuda_device, DeviceGuard::OnFailure::kIgnore, DeviceGuard::Bind::kPrimaryContext);
    // The container's code lives in the library: delete it before dlclose.
    if (container != nullptr && library) (void)library->api().destroy(container);
    container = nullptr;
    for (AtenTensorHandle h : shared_aliases) (void)aoti_torch_delete_tensor_object(h);
    shared_aliases.clear();
    for (AtenTensorHandle h : fqn_handles) (void)aoti_torch_delete_tensor_object(h);
    fqn_handles.clear();
    fqn_storage.clear();  // memory no other delegate views is freed here
    // The AOTI runtime never unloads its kernel modules; do it for it, in the
    // device's primary context.
    if (cuda_device >= 0) kernel_modules.unload_all();
  }
  if (cuda_device >= 0) (void)cudaGetLastError();
}

Method::Method() : graphs(std::make_unique<MethodGraphs>()) {}
Method::~Method() = default;

Slot::Slot(std::size_t block_cache_bytes) : block_cache(block_cache_bytes) {}

Slot::~Slot() {
  if (device < 0) return;
  {
    DeviceGuard on_device(device, DeviceGuard::OnFailure::kIgnore);
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    graphs.reset();  // graphs (and their memory) before the stream they were captured on
    values.clear();
    if (pinned_out != nullptr) (void)cudaFreeHost(pinned_out);
    if (staging_done != nullptr) {
      (void)cudaEventSynchronize(staging_done);
      (void)cudaEventDestroy(staging_done);
    }
    if (pinned != nullptr) (void)cudaFreeHost(pinned);
    // What the slot's calls made per stream inside the shim goes with it.
    for (void* s : caller_streams) shim::gemm::release_stream(device, s);
    if (stream != nullptr) {
      shim::gemm::release_stream(device, stream);
      (void)cudaStreamDestroy(stream);
    }
  }
  (void)cudaGetLastError();
}

cudaStream_t Slot::own_stream() {
  if (stream == nullptr) check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)), "cudaStreamCreateWithFlags");
  return stream;
}

void Slot::used_caller_stream(void* s) {
  if (s == nullptr || std::find(caller_streams.begin(), caller_streams.end(), s) != caller_streams.end()) return;
  caller_streams.push_back(s);
}

void* Slot::staging(std::size_t bytes) {
  if (staging_pending) {
    check_cuda(AOTI_CUDA_FAULTABLE(cudaEventSynchronize(staging_done)), "cudaEventSynchronize (input staging)");
    staging_pending = false;
  }
  if (bytes > pinned_capacity) {
    if (pinned != nullptr) (void)cudaFreeHost(pinned);
    pinned = nullptr;
    pinned_capacity = 0;
    const std::size_t want = std::max<std::size_t>(bytes, 1 << 16);
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMallocHost(&pinned, want)), "cudaMallocHost (input staging)");
    pinned_capacity = want;
  }
  return pinned;
}

void* Slot::output_staging(std::size_t bytes) {
  if (bytes > pinned_out_capacity) {
    if (pinned_out != nullptr) (void)cudaFreeHost(pinned_out);
    pinned_out = nullptr;
    pinned_out_capacity = 0;
    const std::size_t want = std::max<std::size_t>(bytes, 1 << 16);
    check_cuda(cudaMallocHost(&pinned_out, want), "cudaMallocHost (output staging)");
    pinned_out_capacity = want;
  }
  return pinned_out;
}

void Slot::staging_used(cudaStream_t s) {
  if (staging_done == nullptr) {
    check_cuda(AOTI_CUDA_FAULTABLE(cudaEventCreateWithFlags(&staging_done, cudaEventDisableTiming)), "cudaEventCreateWithFlags");
  }
  check_cuda(AOTI_CUDA_FAULTABLE(cudaEventRecord(staging_done, s)), "cudaEventRecord");
  staging_pending = true;
}

SlotLease::SlotLease(Method& m) : m_(m) {
  std::unique_lock<std::mutex> lock(m.mu);
  m.cv.wait(lock, [&] { return !m.free_slots.empty(); });
  index_ = m.free_slots.back();
  m.free_slots.pop_back();
}

SlotLease::~SlotLease() {
  {
    std::lock_guard<std::mutex> lock(m_.mu);
    m_.free_slots.push_back(index_);
  }
  m_.cv.notify_one();
}

CurrentStreamScope::CurrentStreamScope(int device, void* stream) : device_(device) {
  if (aoti_cuda_shim_set_current_stream(device, stream, &previous_) != AOTI_TORCH_SUCCESS) {
    throw Error(ErrorCode::kCuda, std::string("setting the shim's current stream failed: ") + aoti_cuda_shim_last_error());
  }
  active_ = true;
}

CurrentStreamScope::~CurrentStreamScope() {
  if (active_) (void)aoti_cuda_shim_set_current_stream(device_, previous_, nullptr);
}

std::string model_failure_detail(const ContainerApi& api) {
  std::string detail;
  const char* shim = aoti_cuda_shim_last_error();
  if (shim != nullptr && *shim != '\0') detail = shim;
  if (api.get_last_error != nullptr) {
    const char* msg = nullptr;
    if (api.get_last_error(&msg) == 0 && msg != nullptr && *msg != '\0') {
      detail += (detail.empty() ? "" : "; ") + std::string("model: ") + msg;
    }
  }
  // What the model printed (its runtime writes exceptions to stderr); kept by
  // the ModelMessageScope around the call (cuda_hooks.hpp).
  const std::string said = last_model_message();
  if (!said.empty() && detail.find(said) == std::string::npos) {
    detail += (detail.empty() ? "" : "; ") + std::string("model said: ") + said;
  }
  return detail.empty() ? std::string("no error message was recorded") : detail;
}

ErrorCode model_failure_code() noexcept {
  return shim::last_error_code() == ErrorCode::kOutOfMemory ? ErrorCode::kOutOfMemory : ErrorCode::kModel;
}

std::shared_ptr<void> own_handle(AtenTensorHandle h) {
  // The control block comes from the thread's chunk pool: no heap allocation per output.
  return std::shared_ptr<void>(
      static_cast<void*>(h), [](void* p) { (void)aoti_torch_delete_tensor_object(static_cast<AtenTensorHandle>(p)); },
      common::ChunkAllocator<char>());
}

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kNone: return "none";
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kInt: return "int";
    case ValueKind::kDouble: return "double";
    case ValueKind::kBool: return "bool";
    case ValueKind::kString: return "string";
    case ValueKind::kList: return "list";
  }
  return "unknown";
}

}  // namespace aoti_cuda::runtime
