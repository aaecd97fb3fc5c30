// Tensor objects, storage lifetime and argument validation.
#include "shim/tensor_object.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/chunk_pool.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

std::atomic<int64_t> g_live_handles{0};

// A per-thread pool of deleted handle objects (and, through
// common/chunk_pool.hpp, of storage records), so that the tensors a model
// makes and drops in every call allocate nothing in a steady state. A handle
// deleted on another thread than the one that made it joins that thread's
// pool; one released after its thread's pool is gone is deleted.
struct HandlePool {
  std::vector<AtenTensorOpaque*> free;
  ~HandlePool() {
    for (AtenTensorOpaque* t : free) delete t;
  }
};

HandlePool* handle_pool() noexcept { return common::this_thread_pool<HandlePool>(); }

bool& storage_free_failed() noexcept {
  thread_local bool failed = false;
  return failed;
}

}  // namespace

Storage::~Storage() {
  switch (kind) {
    case StorageKind::kBorrowed:
      break;
    case StorageKind::kHost:
      host_free(data);
      break;
    case StorageKind::kHostPinned:
      pinned_free(data);
      break;
    case StorageKind::kCuda: {
      int err = cuda_free(data, nbytes, device_index, free_stream);
      if (err != 0) {
        storage_free_failed() = true;
        std::string msg = "cudaFreeAsync of " + std::to_string(nbytes) + " bytes on cuda:" +
                          std::to_string(device_index) + " failed with cudaError " + std::to_string(err) +
                          " (was the allocation stream destroyed before the tensor?)";
        set_last_error(ErrorCode::kCuda, "storage release", msg.c_str());
      }
      break;
    }
  }
}

bool take_storage_free_failure() noexcept {
  bool failed = storage_free_failed();
  storage_free_failed() = false;
  return failed;
}

std::shared_ptr<Storage> allocate_storage(DeviceType type, int device_index, std::size_t nbytes, bool pinned) {
  auto storage = std::allocate_shared<Storage>(common::ChunkAllocator<Storage>());
  storage->device_type = type;
  storage->nbytes = nbytes;
  if (type == DeviceType::kCUDA) {
    storage->device_index = device_index;
    void* stream = current_stream(device_index);
    storage->data = cuda_allocate(nbytes, device_index, stream);
    storage->free_stream = stream;
    storage->kind = StorageKind::kCuda;  // set after success: the destructor frees by kind
  } else if (pinned) {
    bool is_pinned = false;
    storage->data = pinned_allocate(nbytes, &is_pinned);
    storage->kind = is_pinned ? StorageKind::kHostPinned : StorageKind::kHost;
  } else {
    storage->data = host_allocate(nbytes);
    storage->kind = StorageKind::kHost;
  }
  return storage;
}

std::shared_ptr<Storage> borrow_storage(void* data, std::size_t nbytes, DeviceType type, int device_index) {
  auto storage = std::allocate_shared<Storage>(common::ChunkAllocator<Storage>());
  storage->data = data;
  storage->nbytes = nbytes;
  storage->device_type = type;
  storage->device_index = type == DeviceType::kCUDA ? device_index : 0;
  storage->kind = StorageKind::kBorrowed;
  return storage;
}

int64_t live_handles() noexcept { return g_live_handles.load(std::memory_order_relaxed); }

AtenTensorOpaque* checked(AtenTensorHandle handle, const char* arg_name) {
  if (handle == nullptr) throw_invalid(std::string("tensor handle '") + arg_name + "' is null");
  if (handle->magic != AtenTensorOpaque::kLiveMagic) {
    throw_invalid(std::string("tensor handle '") + arg_name +
                  "' is not a live aoti_cuda tensor (garbage pointer or already deleted)");
  }
  return handle;
}

bool unit_stride_rows(const AtenTensorOpaque& t, int64_t* rows, int64_t* row_stride) {
  const int64_t d = t.dim();
  if (d < 1 || (t.strides[d - 1] != 1 && t.sizes[d - 1] > 1)) return false;
  *rows = 1;
  *row_stride = t.sizes[d - 1];
  int64_t expected = -1;
  for (int64_t i = d - 2; i >= 0; --i) {
    if (t.sizes[i] == 1) continue;
    if (expected < 0) {
      *row_stride = t.strides[i];
      expected = t.strides[i] * t.sizes[i];
    } else if (t.strides[i] != expected) {
      return false;
    } else {
      expected *= t.sizes[i];
    }
    *rows *= t.sizes[i];
  }
  return true;
}

AtenTensorOpaque* checked_defined(AtenTensorHandle handle, const char* arg_name) {
  AtenTensorOpaque* t = checked(handle, arg_name);
  if (!t->defined()) {
    throw_invalid(std::string("tensor handle '") + arg_name +
                  "' is an undefined tensor (from aoti_torch_new_uninitialized_tensor)");
  }
  return t;
}

std::size_t checked_itemsize(int32_t dtype) {
  std::size_t size = element_size(dtype);
  if (size == 0) throw_invalid("unknown dtype code " + std::to_string(dtype));
  return size;
}

DeviceType checked_device_type(int32_t device_type) {
  if (device_type == 0) return DeviceType::kCPU;
  if (device_type == 1) return DeviceType::kCUDA;
  throw Error(ErrorCode::kUnsupported, "unsupported device type " + std::to_string(device_type) +
                                           " (aoti_cuda supports cpu=0 and cuda=1)");
}

void read_shape(const char* what, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  if (ndim < 0 || ndim > kMaxDims) {
    throw_invalid(std::string(what) + ": ndim " + std::to_string(ndim) + " is out of range [0, " +
                  std::to_string(kMaxDims) + "]");
  }
  if (ndim > 0 && sizes_ptr == nullptr) throw_invalid(std::string(what) + ": sizes is null but ndim is " + std::to_string(ndim));
  sizes.assign(sizes_ptr, sizes_ptr + ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    if (sizes[static_cast<std::size_t>(i)] < 0) {
      throw_invalid(std::string(what) + ": size " + std::to_string(sizes[static_cast<std::size_t>(i)]) +
                    " of dimension " + std::to_string(i) + " is negative");
    }
  }
  (void)checked_numel(sizes);
  if (strides_ptr == nullptr) {
    common::contiguous_strides_into(sizes, strides);  // into the recycled handle's vector
    return;
  }
  strides.assign(strides_ptr, strides_ptr + ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    if (strides[static_cast<std::size_t>(i)] < 0) {
      throw_invalid(std::string(what) + ": stride " + std::to_string(strides[static_cast<std::size_t>(i)]) +
                    " of dimension " + std::to_string(i) + " is negative (not supported)");
    }
  }
}

void check_view_in_bounds(const Storage& storage, int64_t storage_offset, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, std::size_t itemsize, const char* what) {
  if (storage_offset < 0) {
    throw_invalid(std::string(what) + ": storage offset " + std::to_string(storage_offset) + " is negative");
  }
  int64_t span = span_elements(sizes, strides);
  std::size_t needed = required_bytes(storage_offset, span, itemsize);
  if (needed > storage.nbytes) {
    throw_invalid(std::string(what) + ": view with sizes " + format_dims(sizes) + ", strides " + format_dims(strides) +
                  ", storage offset " + std::to_string(storage_offset) + " and itemsize " + std::to_string(itemsize) +
                  " needs " + std::to_string(needed) + " bytes but the storage has " + std::to_string(storage.nbytes));
  }
}

AtenTensorOpaque* acquire_handle() {
  AtenTensorOpaque* t = nullptr;
  HandlePool* p = handle_pool();
  if (p != nullptr && !p->free.empty()) {
    t = p->free.back();
    p->free.pop_back();
    t->magic = AtenTensorOpaque::kLiveMagic;
  } else {
    t = new AtenTensorOpaque();
  }
  g_live_handles.fetch_add(1, std::memory_order_relaxed);
  return t;
}

void release_handle(AtenTensorOpaque* t) noexcept {
  if (t == nullptr) return;
  g_live_handles.fetch_sub(1, std::memory_order_relaxed);
  t->storage.reset();  // frees the memory when this was the last reference
  t->magic = AtenTensorOpaque::kDeadMagic;
  HandlePool* p = handle_pool();
  if (p != nullptr && p->free.size() < kHandlePoolSize) {
    try {
      if (p->free.capacity() == 0) p->free.reserve(kHandlePoolSize);
      t->sizes.clear();
      t->strides.clear();
      t->storage_offset = 0;
      t->dtype = static_cast<int32_t>(aoti_cuda::DType::kFloat32);
      p->free.push_back(t);
      return;
    } catch (...) {
      // no room to keep it: deleted below
    }
  }
  delete t;
}

AtenTensorHandle make_handle(std::shared_ptr<Storage> storage, const std::vector<int64_t>& sizes,
                             const std::vector<int64_t>& strides, int64_t storage_offset, int32_t dtype) {
  AtenTensorOpaque* t = acquire_handle();
  t->storage = std::move(storage);
  t->sizes.assign(sizes.begin(), sizes.end());  // into the kept capacity
  t->strides.assign(strides.begin(), strides.end());
  t->storage_offset = storage_offset;
  t->dtype = dtype;
  return t;
}

}  // namespace shim
}  // namespace aoti_cuda

// ---- AtenTensorOpaque ------------------------------------------------------

AtenTensorOpaque::AtenTensorOpaque() = default;

AtenTensorOpaque::AtenTensorOpaque(const AtenTensorOpaque& other)
    : magic(kLiveMagic),
      storage(other.storage),
      sizes(other.sizes),
      strides(other.strides),
      storage_offset(other.storage_offset),
      dtype(other.dtype) {}

AtenTensorOpaque::~AtenTensorOpaque() { magic = kDeadMagic; }

int64_t AtenTensorOpaque::numel() const noexcept {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

char* AtenTensorOpaque::data_ptr() const noexcept {
  if (!storage || storage->data == nullptr) return nullptr;
  return static_cast<char*>(storage->data) + storage_offset * static_cast<int64_t>(itemsize());
}

std::string AtenTensorOpaque::describe() const {
  if (!defined()) return "undefined tensor";
  std::string out = storage->is_cuda() ? "cuda:" + std::to_string(storage->device_index) : std::string("cpu");
  out += " ";
  out += aoti_cuda::dtype_name(dtype);
  out += " " + aoti_cuda::shim::format_dims(sizes) + " strides " + aoti_cuda::shim::format_dims(strides) + " offset " +
         std::to_string(storage_offset);
  return out;
}

// ---------------------------------------------------------------------------
// Handle capture (handle_capture.hpp)
#include "shim/handle_capture.hpp"

namespace aoti_cuda::shim {
namespace {
struct CaptureState {
  CreatedBy kind = CreatedBy::kFromBlob;
  std::vector<AtenTensorHandle>* target = nullptr;
};
CaptureState& capture_state() noexcept {
  thread_local CaptureState state;
  return state;
}
}  // namespace

HandleCapture::HandleCapture(CreatedBy kind, std::vector<AtenTensorHandle>* out) noexcept
    : previous_kind_(capture_state().kind), previous_(capture_state().target) {
  capture_state() = CaptureState{kind, out};
}

HandleCapture::~HandleCapture() { capture_state() = CaptureState{previous_kind_, previous_}; }

void record_created_handle(CreatedBy kind, AtenTensorHandle h) noexcept {
  const CaptureState& state = capture_state();
  if (state.target == nullptr || state.kind != kind || h == nullptr) return;
  try {
    state.target->push_back(h);
  } catch (...) {
    // Out of memory while recording: the capture is incomplete, which its
    // user detects by comparing counts; the handle itself is fine.
  }
}

}  // namespace aoti_cuda::shim
