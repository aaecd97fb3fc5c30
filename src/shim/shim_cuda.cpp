// Shim: CUDA device/stream guards, current streams, raw allocator.
#include <cuda_runtime_api.h>

#include <mutex>
#include <new>
#include <type_traits>
#include <unordered_map>

#include "aoti_cuda/shim.h"
#include "common/chunk_pool.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/tensor_object.hpp"

using namespace aoti_cuda::shim;  // NOLINT: this file is the shim's implementation

// Guards live in chunks of the per-thread pool (common/chunk_pool.hpp): a
// model opens one or two per Run. Both types must stay trivially destructible.
struct CUDAGuardOpaque {
  int original_device = 0;
  int device = 0;
};

struct CUDAStreamGuardOpaque {
  int original_device = 0;
  int device = 0;
  void* previous_stream = nullptr;
};
static_assert(std::is_trivially_destructible_v<CUDAGuardOpaque> && sizeof(CUDAGuardOpaque) <= aoti_cuda::common::kChunkBytes);
static_assert(std::is_trivially_destructible_v<CUDAStreamGuardOpaque> &&
              sizeof(CUDAStreamGuardOpaque) <= aoti_cuda::common::kChunkBytes);

namespace {

int current_device() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) throw_cuda_error(err, "cudaGetDevice");
  return device;
}

// Always calls cudaSetDevice, even for the current ordinal: with CUDA >= 12
// that makes the device's primary context current on this thread, which the
// model's driver-API calls (cuModuleLoadData, cuLaunchKernel) need.
void set_device(int device) {
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) throw_cuda_error(err, "cudaSetDevice(" + std::to_string(device) + ")");
}

struct RawAllocation {
  std::size_t nbytes = 0;
  int device = 0;
  void* stream = nullptr;
};

struct RawAllocations {
  std::mutex mutex;
  std::unordered_map<void*, RawAllocation> live;
};

RawAllocations& raw_allocations() {
  static RawAllocations* r = new RawAllocations();  // leaked: may be used during static destruction
  return *r;
}

}  // namespace

extern "C" {

AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index, CUDAGuardHandle* ret_guard) {
  return shim_call(__func__, [&] {
    CUDAGuardHandle& out = out_param(ret_guard, "ret_guard");
    out = nullptr;
    int device = resolve_cuda_device(device_index);
    int original = current_device();
    set_device(device);
    out = new (aoti_cuda::common::take_chunk()) CUDAGuardOpaque{original, device};  // pooled: one per Run
  });
}

AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard) {
  return shim_call(__func__, [&] {
    if (guard == nullptr) throw_invalid("guard is null");
    int original = guard->original_device;
    aoti_cuda::common::give_chunk(guard);  // trivially destructible
    set_device(original);
  });
}

AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard, int32_t device_index) {
  return shim_call(__func__, [&] {
    if (guard == nullptr) throw_invalid("guard is null");
    int device = resolve_cuda_device(device_index);
    set_device(device);
    guard->device = device;
  });
}

AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream, int32_t device_index,
                                                   CUDAStreamGuardHandle* ret_guard) {
  return shim_call(__func__, [&] {
    CUDAStreamGuardHandle& out = out_param(ret_guard, "ret_guard");
    out = nullptr;
    int device = resolve_cuda_device(device_index);
    int original = current_device();
    set_device(device);
    auto* guard = new (aoti_cuda::common::take_chunk()) CUDAStreamGuardOpaque{original, device, nullptr};
    guard->previous_stream = exchange_current_stream(device, stream);
    out = guard;
  });
}

AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard) {
  return shim_call(__func__, [&] {
    if (guard == nullptr) throw_invalid("guard is null");
    CUDAStreamGuardOpaque saved = *guard;
    aoti_cuda::common::give_chunk(guard);
    (void)exchange_current_stream(saved.device, saved.previous_stream);
    set_device(saved.original_device);
  });
}

AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream) {
  return shim_call(__func__, [&] {
    void*& out = out_param(ret_stream, "ret_stream");
    out = nullptr;
    out = current_stream(resolve_cuda_device(device_index));
  });
}

AOTITorchError aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t nbytes, void** ret_ptr) {
  return shim_call(__func__, [&] {
    void*& out = out_param(ret_ptr, "ret_ptr");
    out = nullptr;
    if (nbytes == 0) return;
    int device = resolve_cuda_device(-1);
    void* stream = current_stream(device);
    void* ptr = cuda_allocate(static_cast<std::size_t>(nbytes), device, stream);
    RawAllocations& raw = raw_allocations();
    try {
      std::lock_guard<std::mutex> lock(raw.mutex);
      raw.live.emplace(ptr, RawAllocation{static_cast<std::size_t>(nbytes), device, stream});
    } catch (...) {
      (void)cuda_free(ptr, static_cast<std::size_t>(nbytes), device, stream);
      throw;
    }
    out = ptr;
  });
}

AOTITorchError aoti_torch_cuda_caching_allocator_raw_delete(void* ptr) {
  return shim_call(__func__, [&] {
    if (ptr == nullptr) return;
    RawAllocation allocation;
    {
      RawAllocations& raw = raw_allocations();
      std::lock_guard<std::mutex> lock(raw.mutex);
      auto it = raw.live.find(ptr);
      if (it == raw.live.end()) {
        throw_invalid("pointer was not returned by aoti_torch_cuda_caching_allocator_raw_alloc (or already freed)");
      }
      allocation = it->second;
      raw.live.erase(it);
    }
    int err = cuda_free(ptr, allocation.nbytes, allocation.device, allocation.stream);
    if (err != 0) throw_cuda_error(err, "cudaFreeAsync");
  });
}

AOTITorchError aoti_cuda_shim_set_current_stream(int32_t device_index, void* stream, void** ret_previous) {
  return shim_call(__func__, [&] {
    void* previous = exchange_current_stream(resolve_cuda_device(device_index), stream);
    if (ret_previous != nullptr) *ret_previous = previous;
  });
}

}  // extern "C"
