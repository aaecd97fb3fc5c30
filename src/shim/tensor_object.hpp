// aoti_cuda shim — the object behind an AtenTensorHandle (private).
//
// A handle is a heap AtenTensorOpaque: a shared, refcounted Storage plus this
// view's sizes, strides and storage offset (both in elements) and dtype. Views
// and aliases are new AtenTensorOpaque objects that share the Storage;
// aoti_torch_delete_tensor_object deletes one object and so drops one
// reference. Owned storage is freed (stream-ordered for CUDA) when its last
// reference goes; borrowed storage (create_tensor_from_blob*) never is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/layout.hpp"
#include "shim/error_state.hpp"

namespace aoti_cuda {
namespace shim {

/// Where storage bytes came from, which decides how (and whether) they are freed.
enum class StorageKind : uint8_t {
  kBorrowed,    ///< caller's memory (from_blob): never freed by the shim
  kHost,        ///< 64-byte aligned pageable host memory from the shim
  kHostPinned,  ///< page-locked host memory (cudaMallocHost)
  kCuda,        ///< device memory from the stream-ordered pool (cudaMallocAsync)
};

/// One allocation shared by every view of it. Immutable after construction
/// except `free_stream`, which the Module moves to the legacy default stream
/// for outputs of runs on its own streams (allocator.hpp: set_storage_free_stream),
/// and `program_constant`, which the runtime sets while it loads, before any call.
struct Storage {
  void* data = nullptr;                 ///< base address (nullptr for 0 bytes)
  std::size_t nbytes = 0;               ///< size of the whole allocation
  DeviceType device_type = DeviceType::kCPU;
  int device_index = 0;                 ///< 0 for CPU
  StorageKind kind = StorageKind::kBorrowed;
  void* free_stream = nullptr;          ///< CUDA: stream the memory was allocated on and is freed on
  /// A program's read-only constant (a weight): no kernel ever writes these bytes (runtime's
  /// mark_program_constants).
  bool program_constant = false;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();  // frees owned memory; failures are recorded (see take_storage_free_failure)

  bool is_cuda() const noexcept { return device_type == DeviceType::kCUDA; }
};

/// Allocates owned storage of `nbytes` on a device. CUDA: `device_index` must
/// already be resolved (>= 0); the memory is taken from that device's pool on
/// the calling thread's current stream for it. `pinned` only applies to CPU.
std::shared_ptr<Storage> allocate_storage(DeviceType type, int device_index, std::size_t nbytes, bool pinned);
/// Wraps caller memory without taking ownership.
std::shared_ptr<Storage> borrow_storage(void* data, std::size_t nbytes, DeviceType type, int device_index);

// Layout arithmetic lives in the low layer (common/layout.hpp).
using common::checked_numel;
using common::contiguous_strides;
using common::format_dims;
using common::is_contiguous;
using common::is_non_overlapping_and_dense;
using common::required_bytes;
using common::span_elements;

/// True (once) when a Storage destructor on this thread failed to free its memory.
bool take_storage_free_failure() noexcept;


/// Whether no kernel ever writes the bytes of `t`: its storage holds a program's read-only constant, such
/// as a weight (marked by the runtime at load: runtime/constant_sharing.hpp, mark_program_constants). Views
/// share the mark; a tensor made over the same memory some other way (from_blob) does not have it.
/// With dependent launch a kernel may read such bytes before it waits for the previous kernel
/// (ops/dependent_launch.hpp).
inline bool is_program_constant(const AtenTensorOpaque& t) noexcept;

/// Largest ndim the shim accepts (catches garbage ndim before any allocation).
constexpr int64_t kMaxDims = 64;

/// Number of live handles in the process.
int64_t live_handles() noexcept;

}  // namespace shim
}  // namespace aoti_cuda

/// The object an AtenTensorHandle points to. Defined in the global namespace
/// because shim.h forward-declares it there.
struct AtenTensorOpaque {
  static constexpr uint64_t kLiveMagic = 0x6f7469615f74656eULL;  // "net_aito"
  static constexpr uint64_t kDeadMagic = 0xdeadbeefdeadbeefULL;

  AtenTensorOpaque();
  AtenTensorOpaque(const AtenTensorOpaque& other);
  AtenTensorOpaque& operator=(const AtenTensorOpaque& other) = default;
  ~AtenTensorOpaque();

  uint64_t magic = kLiveMagic;   ///< best-effort detection of garbage / deleted handles
  std::shared_ptr<aoti_cuda::shim::Storage> storage;  ///< null for an undefined tensor
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< in elements
  int64_t storage_offset = 0;    ///< in elements
  int32_t dtype = static_cast<int32_t>(aoti_cuda::DType::kFloat32);

  bool defined() const noexcept { return storage != nullptr; }
  int64_t dim() const noexcept { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const noexcept;  ///< sizes were overflow-checked at creation
  std::size_t itemsize() const noexcept { return aoti_cuda::element_size(dtype); }
  /// storage base + storage_offset * itemsize (nullptr when the storage has no bytes).
  char* data_ptr() const noexcept;
  /// Stable pointers for get_sizes/get_strides (non-null even for 0-d tensors).
  int64_t* sizes_data() noexcept { return sizes.empty() ? &zero_dim_marker_ : sizes.data(); }
  int64_t* strides_data() noexcept { return strides.empty() ? &zero_dim_marker_ : strides.data(); }
  bool is_contiguous() const noexcept { return aoti_cuda::shim::is_contiguous(sizes, strides); }
  bool is_non_overlapping_and_dense() const { return aoti_cuda::shim::is_non_overlapping_and_dense(sizes, strides); }
  std::string describe() const;  ///< "cuda:0 float32 [2, 3] strides [3, 1] offset 0"

 private:
  int64_t zero_dim_marker_ = 0;
};

namespace aoti_cuda {
namespace shim {

/// The object behind `handle`; throws invalid_argument for nullptr or a handle
/// whose magic is wrong (garbage or already deleted; best effort only).
AtenTensorOpaque* checked(AtenTensorHandle handle, const char* arg_name);
/// Same, and the tensor must be defined (not from new_uninitialized_tensor).
AtenTensorOpaque* checked_defined(AtenTensorHandle handle, const char* arg_name);

/// Validates (ndim, sizes, strides) from the C ABI and returns them as vectors;
/// strides == nullptr means contiguous. Throws invalid_argument with `what` in the message.
void read_shape(const char* what, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                std::vector<int64_t>& sizes, std::vector<int64_t>& strides);
/// Validates a dtype code from the C ABI and returns its element size.
std::size_t checked_itemsize(int32_t dtype);
/// Validates a device type code (cpu or cuda only).
DeviceType checked_device_type(int32_t device_type);
/// Checks that [offset, offset + span) elements of `itemsize` fit in `storage`.
void check_view_in_bounds(const Storage& storage, int64_t storage_offset, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, std::size_t itemsize, const char* what);

/// The object for a new handle, counted by live_handles(): a deleted one from the
/// calling thread's pool when there is one (its sizes and strides keep their
/// capacity, so filling them in place allocates nothing in a steady state), else
/// a new one. It comes undefined (no storage, dtype float32, offset 0, no
/// dimensions): the caller sets every field it needs.
AtenTensorOpaque* acquire_handle();
/// Ends a handle (what aoti_torch_delete_tensor_object does): drops its storage
/// reference, marks it dead and keeps the object in the calling thread's pool
/// (at most kHandlePoolSize), or deletes it.
void release_handle(AtenTensorOpaque* t) noexcept;
constexpr std::size_t kHandlePoolSize = 256;

/// RAII: a handle being built; released again unless take() is called.
class NewHandle {
 public:
  NewHandle() : t_(acquire_handle()) {}
  ~NewHandle() {
    if (t_ != nullptr) release_handle(t_);
  }
  NewHandle(const NewHandle&) = delete;
  NewHandle& operator=(const NewHandle&) = delete;
  AtenTensorOpaque* operator->() const noexcept { return t_; }
  AtenTensorOpaque& operator*() const noexcept { return *t_; }
  AtenTensorHandle take() noexcept {
    AtenTensorOpaque* t = t_;
    t_ = nullptr;
    return t;
  }

 private:
  AtenTensorOpaque* t_;
};

/// RAII: a finished handle a shim call made for its caller, deleted unless release()d (so a
/// call that fails after making it leaves nothing behind).
struct HandleGuard {
  AtenTensorHandle handle = nullptr;
  HandleGuard() = default;
  HandleGuard(const HandleGuard&) = delete;
  HandleGuard& operator=(const HandleGuard&) = delete;
  ~HandleGuard() { release_handle(handle); }
  AtenTensorHandle release() noexcept {
    AtenTensorHandle h = handle;
    handle = nullptr;
    return h;
  }
};

/// A new handle over `storage` (counted by live_handles()).
AtenTensorHandle make_handle(std::shared_ptr<Storage> storage, const std::vector<int64_t>& sizes,
                             const std::vector<int64_t>& strides, int64_t storage_offset, int32_t dtype);
/// Allocates a new owning tensor (the body of aoti_torch_empty_strided); `what` prefixes error messages.
AtenTensorHandle new_empty_strided(const char* what, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                   int32_t dtype, int32_t device_type, int32_t device_index, bool pinned);
/// Rows of `t`: true when its last dimension is unit-stride (or of size 1) and its leading dimensions collapse
/// into one row stride; then *rows is their product and *row_stride the elements from one row to the next.
bool unit_stride_rows(const AtenTensorOpaque& t, int64_t* rows, int64_t* row_stride);
/// Writes `value` to an out-parameter after checking it is non-null.
template <class T>
T& out_param(T* ptr, const char* name) {
  if (ptr == nullptr) throw_invalid(std::string(name) + " is null");
  return *ptr;
}


inline bool is_program_constant(const AtenTensorOpaque& t) noexcept {
  return t.storage != nullptr && t.storage->program_constant;
}

}  // namespace shim
}  // namespace aoti_cuda
