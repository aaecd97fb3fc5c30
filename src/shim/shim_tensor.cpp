// Shim: enum getters, tensor accessors, creation, views and lifetime.
#include <cstring>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/handle_capture.hpp"
#include "shim/tensor_object.hpp"

using aoti_cuda::DeviceType;
using aoti_cuda::ErrorCode;
using aoti_cuda::shim::checked;
using aoti_cuda::shim::checked_defined;
using aoti_cuda::shim::out_param;
using aoti_cuda::shim::shim_call;
using aoti_cuda::shim::throw_invalid;

namespace aoti_cuda {
namespace shim {

// Shared by empty_strided, empty_strided_pinned and from_blob with data == nullptr.
AtenTensorHandle new_empty_strided(const char* what, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                   int32_t dtype, int32_t device_type, int32_t device_index, bool pinned) {
  NewHandle t;  // the shape is read into the (recycled) handle itself
  read_shape(what, ndim, sizes_ptr, strides_ptr, t->sizes, t->strides);
  std::size_t itemsize = checked_itemsize(dtype);
  DeviceType type = checked_device_type(device_type);
  if (pinned && type != DeviceType::kCPU) {
    throw_invalid(std::string(what) + ": pinned memory is host memory; device type must be cpu (0), got " +
                  std::to_string(device_type));
  }
  std::size_t nbytes = required_bytes(0, span_elements(t->sizes, t->strides), itemsize);
  int device = 0;
  if (type == DeviceType::kCUDA) device = resolve_cuda_device(device_index);
  t->storage = allocate_storage(type, device, nbytes, pinned);
  t->dtype = dtype;
  return t.take();
}

}  // namespace shim
}  // namespace aoti_cuda

namespace {

using aoti_cuda::shim::new_empty_strided;

AOTITorchError create_from_blob(const char* fn, void* data, int64_t ndim, const int64_t* sizes_ptr,
                                const int64_t* strides_ptr, int64_t storage_offset, int32_t dtype,
                                int32_t device_type, int32_t device_index, AtenTensorHandle* ret) {
  return shim_call(fn, [&] {
    AtenTensorHandle& out = out_param(ret, "ret");
    out = nullptr;
    if (data == nullptr) {
      // libtorch allocates when given no data (the "0-size tensor" case of from_blob).
      out = new_empty_strided(fn, ndim, sizes_ptr, strides_ptr, dtype, device_type, device_index, false);
      aoti_cuda::shim::record_created_handle(aoti_cuda::shim::CreatedBy::kFromBlob, out);
      return;
    }
    aoti_cuda::shim::NewHandle t;
    aoti_cuda::shim::read_shape(fn, ndim, sizes_ptr, strides_ptr, t->sizes, t->strides);
    std::size_t itemsize = aoti_cuda::shim::checked_itemsize(dtype);
    DeviceType type = aoti_cuda::shim::checked_device_type(device_type);
    if (storage_offset < 0) throw_invalid("storage_offset " + std::to_string(storage_offset) + " is negative");
    int device = 0;
    if (type == DeviceType::kCUDA) device = aoti_cuda::shim::resolve_cuda_device(device_index);
    std::size_t nbytes = aoti_cuda::shim::required_bytes(
        storage_offset, aoti_cuda::shim::span_elements(t->sizes, t->strides), itemsize);
    t->storage = aoti_cuda::shim::borrow_storage(data, nbytes, type, device);
    t->storage_offset = storage_offset;
    t->dtype = dtype;
    out = t.take();
    aoti_cuda::shim::record_created_handle(aoti_cuda::shim::CreatedBy::kFromBlob, out);
  });
}

}  // namespace

extern "C" {

// ---- version and enum getters ------------------------------------------------
uint64_t aoti_torch_abi_version(void) { return 0x020B000000000000ULL; }

int32_t aoti_torch_device_type_cpu(void) { return 0; }
int32_t aoti_torch_device_type_cuda(void) { return 1; }
int32_t aoti_torch_device_type_xpu(void) { return 12; }
int32_t aoti_torch_device_type_mps(void) { return 13; }
int32_t aoti_torch_device_type_meta(void) { return 14; }
int32_t aoti_torch_device_type_privateuse1(void) { return 20; }

int32_t aoti_torch_dtype_uint8(void) { return 0; }
int32_t aoti_torch_dtype_int8(void) { return 1; }
int32_t aoti_torch_dtype_int16(void) { return 2; }
int32_t aoti_torch_dtype_int32(void) { return 3; }
int32_t aoti_torch_dtype_int64(void) { return 4; }
int32_t aoti_torch_dtype_float16(void) { return 5; }
int32_t aoti_torch_dtype_float32(void) { return 6; }
int32_t aoti_torch_dtype_float64(void) { return 7; }
int32_t aoti_torch_dtype_complex32(void) { return 8; }
int32_t aoti_torch_dtype_complex64(void) { return 9; }
int32_t aoti_torch_dtype_complex128(void) { return 10; }
int32_t aoti_torch_dtype_bool(void) { return 11; }
int32_t aoti_torch_dtype_bfloat16(void) { return 15; }
int32_t aoti_torch_dtype_float8_e5m2(void) { return 23; }
int32_t aoti_torch_dtype_float8_e4m3fn(void) { return 24; }
int32_t aoti_torch_dtype_float8_e5m2fnuz(void) { return 25; }
int32_t aoti_torch_dtype_float8_e4m3fnuz(void) { return 26; }
int32_t aoti_torch_dtype_uint16(void) { return 27; }
int32_t aoti_torch_dtype_uint32(void) { return 28; }
int32_t aoti_torch_dtype_uint64(void) { return 29; }
int32_t aoti_torch_dtype_float8_e8m0fnu(void) { return 44; }
int32_t aoti_torch_dtype_float4_e2m1fn_x2(void) { return 45; }

int32_t aoti_torch_layout_strided(void) { return 0; }
int32_t aoti_torch_layout_sparse_coo(void) { return 1; }
int32_t aoti_torch_layout_sparse_csr(void) { return 2; }
int32_t aoti_torch_layout__mkldnn(void) { return 3; }
int32_t aoti_torch_layout_sparse_csc(void) { return 4; }
int32_t aoti_torch_layout_sparse_bsr(void) { return 5; }
int32_t aoti_torch_layout_sparse_bsc(void) { return 6; }
int32_t aoti_torch_layout_jagged(void) { return 7; }

int32_t aoti_torch_memory_format_contiguous_format(void) { return 0; }
int32_t aoti_torch_memory_format_preserve_format(void) { return 1; }
int32_t aoti_torch_memory_format_channels_last(void) { return 2; }
int32_t aoti_torch_memory_format_channels_last_3d(void) { return 3; }

size_t aoti_torch_dtype_element_size(int32_t dtype) { return aoti_cuda::element_size(dtype); }

// ---- accessors -----------------------------------------------------------------
AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret_data_ptr) {
  return shim_call(__func__, [&] {
    void*& out = out_param(ret_data_ptr, "ret_data_ptr");
    out = checked_defined(tensor, "tensor")->data_ptr();
  });
}

AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle tensor, int64_t* ret_size) {
  return shim_call(__func__, [&] {
    int64_t& out = out_param(ret_size, "ret_size");
    out = static_cast<int64_t>(checked_defined(tensor, "tensor")->storage->nbytes);
  });
}

AOTITorchError aoti_torch_get_storage_numel(AtenTensorHandle tensor, int64_t* ret_numel) {
  return shim_call(__func__, [&] {
    int64_t& out = out_param(ret_numel, "ret_numel");
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    out = static_cast<int64_t>(t->storage->nbytes / t->itemsize());
  });
}

AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret_dim) {
  return shim_call(__func__, [&] { out_param(ret_dim, "ret_dim") = checked_defined(tensor, "tensor")->dim(); });
}

AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret_numel) {
  return shim_call(__func__, [&] { out_param(ret_numel, "ret_numel") = checked_defined(tensor, "tensor")->numel(); });
}

AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret_sizes) {
  return shim_call(__func__, [&] { out_param(ret_sizes, "ret_sizes") = checked_defined(tensor, "tensor")->sizes_data(); });
}

AOTITorchError aoti_torch_get_size(AtenTensorHandle tensor, int64_t d, int64_t* ret_size) {
  return shim_call(__func__, [&] {
    int64_t& out = out_param(ret_size, "ret_size");
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    int64_t dim = t->dim();
    int64_t index = d < 0 ? d + dim : d;  // PyTorch-style negative dimension
    if (index < 0 || index >= dim) {
      throw_invalid("dimension " + std::to_string(d) + " is out of range for a " + std::to_string(dim) + "-d tensor");
    }
    out = t->sizes[static_cast<std::size_t>(index)];
  });
}

AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret_strides) {
  return shim_call(__func__, [&] {
    out_param(ret_strides, "ret_strides") = checked_defined(tensor, "tensor")->strides_data();
  });
}

AOTITorchError aoti_torch_get_stride(AtenTensorHandle tensor, int64_t d, int64_t* ret_stride) {
  return shim_call(__func__, [&] {
    int64_t& out = out_param(ret_stride, "ret_stride");
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    int64_t dim = t->dim();
    int64_t index = d < 0 ? d + dim : d;
    if (index < 0 || index >= dim) {
      throw_invalid("dimension " + std::to_string(d) + " is out of range for a " + std::to_string(dim) + "-d tensor");
    }
    out = t->strides[static_cast<std::size_t>(index)];
  });
}

AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret_dtype) {
  return shim_call(__func__, [&] { out_param(ret_dtype, "ret_dtype") = checked_defined(tensor, "tensor")->dtype; });
}

AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret_device_type) {
  return shim_call(__func__, [&] {
    out_param(ret_device_type, "ret_device_type") =
        static_cast<int32_t>(checked_defined(tensor, "tensor")->storage->device_type);
  });
}

AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret_device_index) {
  return shim_call(__func__, [&] {
    out_param(ret_device_index, "ret_device_index") = checked_defined(tensor, "tensor")->storage->device_index;
  });
}

AOTITorchError aoti_torch_get_layout(AtenTensorHandle tensor, int32_t* ret_layout) {
  return shim_call(__func__, [&] {
    int32_t& out = out_param(ret_layout, "ret_layout");
    (void)checked_defined(tensor, "tensor");
    out = 0;  // strided: the only layout this shim creates
  });
}

AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret_storage_offset) {
  return shim_call(__func__, [&] {
    out_param(ret_storage_offset, "ret_storage_offset") = checked_defined(tensor, "tensor")->storage_offset;
  });
}

AOTITorchError aoti_torch_is_contiguous(AtenTensorHandle tensor, bool* ret_is_contiguous) {
  return shim_call(__func__, [&] {
    out_param(ret_is_contiguous, "ret_is_contiguous") = checked_defined(tensor, "tensor")->is_contiguous();
  });
}

AOTITorchError aoti_torch_is_defined(AtenTensorHandle tensor, bool* ret_is_defined) {
  return shim_call(__func__, [&] {
    out_param(ret_is_defined, "ret_is_defined") = checked(tensor, "tensor")->defined();
  });
}

// ---- creation and lifetime -----------------------------------------------------
AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor) {
  bool free_failed = false;
  AOTITorchError rc = shim_call(__func__, [&] {
    AtenTensorOpaque* t = checked(tensor, "tensor");
    (void)aoti_cuda::shim::take_storage_free_failure();
    aoti_cuda::shim::release_handle(t);
    free_failed = aoti_cuda::shim::take_storage_free_failure();
  });
  // The handle is gone either way; a failed stream-ordered free was recorded by the storage.
  return free_failed ? AOTI_TORCH_FAILURE : rc;
}

AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig_handle, AtenTensorHandle* new_handle) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(new_handle, "new_handle");
    out = nullptr;
    const AtenTensorOpaque& orig = *checked(orig_handle, "orig_handle");
    aoti_cuda::shim::NewHandle t;
    *t = orig;
    out = t.take();
    aoti_cuda::shim::record_created_handle(aoti_cuda::shim::CreatedBy::kAlias, out);
  });
}

AOTITorchError aoti_torch_new_uninitialized_tensor(AtenTensorHandle* ret) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret, "ret");
    out = nullptr;
    out = aoti_cuda::shim::acquire_handle();
  });
}

AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                        int32_t dtype, int32_t device_type, int32_t device_index,
                                        AtenTensorHandle* ret_new_tensor) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret_new_tensor, "ret_new_tensor");
    out = nullptr;
    out = new_empty_strided("aoti_torch_empty_strided", ndim, sizes_ptr, strides_ptr, dtype, device_type, device_index,
                            false);
  });
}

AOTITorchError aoti_torch_empty_strided_pinned(int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                               int32_t dtype, int32_t device_type, int32_t device_index,
                                               AtenTensorHandle* ret_new_tensor) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret_new_tensor, "ret_new_tensor");
    out = nullptr;
    out = new_empty_strided("aoti_torch_empty_strided_pinned", ndim, sizes_ptr, strides_ptr, dtype, device_type,
                            device_index, true);
  });
}

AOTITorchError aoti_torch_create_tensor_from_blob(void* data, int64_t ndim, const int64_t* sizes_ptr,
                                                  const int64_t* strides_ptr, int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index, AtenTensorHandle* ret) {
  return create_from_blob(__func__, data, ndim, sizes_ptr, strides_ptr, storage_offset, dtype, device_type,
                          device_index, ret);
}

AOTITorchError aoti_torch_create_tensor_from_blob_v2(void* data, int64_t ndim, const int64_t* sizes_ptr,
                                                     const int64_t* strides_ptr, int64_t storage_offset, int32_t dtype,
                                                     int32_t device_type, int32_t device_index, AtenTensorHandle* ret,
                                                     int32_t layout, const uint8_t* opaque_metadata,
                                                     int64_t opaque_metadata_size) {
  (void)opaque_metadata;
  (void)opaque_metadata_size;
  if (layout != 0) {
    return shim_call(__func__, [&] {
      if (ret != nullptr) *ret = nullptr;
      throw aoti_cuda::Error(ErrorCode::kUnsupported, "layout " + std::to_string(layout) +
                                                          " is not supported (only strided = 0; mkldnn needs libtorch)");
    });
  }
  return create_from_blob(__func__, data, ndim, sizes_ptr, strides_ptr, storage_offset, dtype, device_type,
                          device_index, ret);
}

AOTITorchError aoti_torch__alloc_from_pool(AtenTensorHandle self, int64_t offset_bytes, int32_t dtype, int64_t ndim,
                                           const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                           AtenTensorHandle* ret_new_tensor) {
  const char* name = __func__;
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret_new_tensor, "ret_new_tensor");
    out = nullptr;
    AtenTensorOpaque* pool = checked_defined(self, "self");
    if (pool->storage_offset != 0) {
      throw_invalid("pool tensor must have storage offset 0, has " + std::to_string(pool->storage_offset));
    }
    std::size_t itemsize = aoti_cuda::shim::checked_itemsize(dtype);
    if (offset_bytes < 0 || offset_bytes % static_cast<int64_t>(itemsize) != 0) {
      throw_invalid("offset_bytes " + std::to_string(offset_bytes) + " is negative or not a multiple of the " +
                    aoti_cuda::dtype_name(dtype) + " element size " + std::to_string(itemsize));
    }
    aoti_cuda::shim::NewHandle v;
    aoti_cuda::shim::read_shape(name, ndim, sizes_ptr, strides_ptr, v->sizes, v->strides);
    int64_t offset = offset_bytes / static_cast<int64_t>(itemsize);
    aoti_cuda::shim::check_view_in_bounds(*pool->storage, offset, v->sizes, v->strides, itemsize, name);
    v->storage = pool->storage;
    v->storage_offset = offset;
    v->dtype = dtype;
    out = v.take();
  });
}

AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim, const int64_t* sizes_ptr,
                                              const int64_t* strides_ptr, int64_t storage_offset,
                                              AtenTensorHandle* ret_new_tensor) {
  const char* name = __func__;
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret_new_tensor, "ret_new_tensor");
    out = nullptr;
    AtenTensorOpaque* t = checked_defined(self, "self");
    aoti_cuda::shim::NewHandle v;
    aoti_cuda::shim::read_shape(name, ndim, sizes_ptr, strides_ptr, v->sizes, v->strides);
    int64_t offset = 0;  // the argument is an increment on self's offset (libtorch semantics)
    if (__builtin_add_overflow(t->storage_offset, storage_offset, &offset)) throw_invalid("storage offset overflows");
    aoti_cuda::shim::check_view_in_bounds(*t->storage, offset, v->sizes, v->strides, t->itemsize(), name);
    v->storage = t->storage;
    v->storage_offset = offset;
    v->dtype = t->dtype;
    out = v.take();
  });
}

AOTITorchError aoti_torch_as_strided(AtenTensorHandle self, const int64_t* sizes_ptr, const int64_t* strides_ptr,
                                     AtenTensorHandle* ret) {
  const char* name = __func__;
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret, "ret");
    out = nullptr;
    AtenTensorOpaque* t = checked_defined(self, "self");
    if (t->dim() > 0 && strides_ptr == nullptr) throw_invalid("strides is null");
    aoti_cuda::shim::NewHandle v;
    aoti_cuda::shim::read_shape(name, t->dim(), sizes_ptr, strides_ptr, v->sizes, v->strides);
    aoti_cuda::shim::check_view_in_bounds(*t->storage, t->storage_offset, v->sizes, v->strides, t->itemsize(), name);
    v->storage = t->storage;
    v->storage_offset = t->storage_offset;
    v->dtype = t->dtype;
    out = v.take();
  });
}

AOTITorchError aoti_torch_assign_tensors(AtenTensorHandle src, AtenTensorHandle dst) {
  return shim_call(__func__, [&] {
    AtenTensorOpaque* s = checked(src, "src");
    AtenTensorOpaque* d = checked(dst, "dst");
    if (s == d) return;
    *d = *s;  // dst now aliases src's storage with src's metadata; both handles stay owned
  });
}

AOTITorchError aoti_torch_assign_tensors_out(AtenTensorHandle src, AtenTensorHandle* ret_dst) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret_dst, "ret_dst");
    out = nullptr;
    const AtenTensorOpaque& from = *checked(src, "src");
    aoti_cuda::shim::NewHandle t;
    *t = from;
    out = t.take();
  });
}

}  // extern "C"
