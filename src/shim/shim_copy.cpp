// Shim: copies, clones, zero_, item_*, scalar_to_tensor_*, inf/nan check, printing.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "aoti_cuda/log.hpp"
#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/copy_engine.hpp"
#include "shim/error_state.hpp"
#include "shim/tensor_object.hpp"

using namespace aoti_cuda::shim;  // NOLINT: this file is the shim's implementation
using aoti_cuda::DeviceType;
using aoti_cuda::ErrorCode;

namespace {

// New owning tensor on `like`'s device with the given layout (storage offset 0).
AtenTensorHandle allocate_like(const AtenTensorOpaque& like, const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides, std::size_t nbytes) {
  auto storage = allocate_storage(like.storage->device_type, like.storage->device_index, nbytes, false);
  return make_handle(std::move(storage), sizes, strides, 0, like.dtype);
}

template <class T>
AOTITorchError item_impl(const char* fn, AtenTensorHandle tensor, T* ret_value, int32_t out_dtype) {
  return shim_call(fn, [&] {
    T& out = out_param(ret_value, "ret_value");
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    if (t->numel() != 1) {
      throw_invalid("item needs a tensor with exactly one element, got " + std::to_string(t->numel()) + " (" +
                    t->describe() + ")");
    }
    if (!conversion_supported(t->dtype, out_dtype)) {
      throw aoti_cuda::Error(ErrorCode::kUnsupported, std::string("cannot read a ") + aoti_cuda::dtype_name(t->dtype) +
                                                          " element as " + aoti_cuda::dtype_name(out_dtype));
    }
    alignas(16) unsigned char element[16] = {0};
    read_single_element(view_of(*t), element);
    T value{};
    convert_element(element, t->dtype, &value, out_dtype);
    out = value;
  });
}

template <class T>
AOTITorchError scalar_impl(const char* fn, T value, int32_t dtype, AtenTensorHandle* ret_new_tensor) {
  return shim_call(fn, [&] {
    AtenTensorHandle& out = out_param(ret_new_tensor, "ret_new_tensor");
    out = nullptr;
    auto storage = allocate_storage(DeviceType::kCPU, 0, sizeof(T), false);
    std::memcpy(storage->data, &value, sizeof(T));
    out = make_handle(std::move(storage), {}, {}, 0, dtype);
  });
}

// Contiguous host copy of a tensor's elements (for inspection); returns the buffer.
std::vector<unsigned char> host_elements(const AtenTensorOpaque& t) {
  const std::size_t item = t.itemsize();
  const auto numel = static_cast<std::size_t>(t.numel());
  std::vector<unsigned char> bytes(numel * item);
  if (numel == 0) return bytes;
  View dst;
  dst.data = reinterpret_cast<char*>(bytes.data());
  dst.sizes = t.sizes;
  dst.strides = contiguous_strides(t.sizes);
  dst.dtype = t.dtype;
  copy_views(dst, view_of(t), false);
  return bytes;
}

}  // namespace

extern "C" {

AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret, "ret");
    out = nullptr;
    AtenTensorOpaque* t = checked_defined(self, "self");
    // memory_format=preserve: keep a dense layout's strides, else row-major.
    std::vector<int64_t> strides = t->is_non_overlapping_and_dense() ? t->strides : contiguous_strides(t->sizes);
    std::size_t nbytes = required_bytes(0, span_elements(t->sizes, strides), t->itemsize());
    HandleGuard result{allocate_like(*t, t->sizes, strides, nbytes)};
    copy_views(view_of(*result.handle), view_of(*t), false);
    out = result.release();
  });
}

AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle* ret) {
  return shim_call(__func__, [&] {
    AtenTensorHandle& out = out_param(ret, "ret");
    out = nullptr;
    AtenTensorOpaque* t = checked_defined(self, "self");
    // Copies the minimal covering span byte for byte (gaps included) and re-applies sizes/strides at offset 0.
    std::size_t nbytes = required_bytes(0, span_elements(t->sizes, t->strides), t->itemsize());
    HandleGuard result{allocate_like(*t, t->sizes, t->strides, nbytes)};
    if (nbytes > 0) {
      View dst;
      dst.data = static_cast<char*>(result.handle->storage->data);
      dst.sizes = {static_cast<int64_t>(nbytes)};
      dst.strides = {1};
      dst.dtype = 0;  // bytes
      dst.cuda = t->storage->is_cuda();
      dst.device = t->storage->device_index;
      View src = dst;
      src.data = t->data_ptr();
      src.pinned = t->storage->kind == StorageKind::kHostPinned;
      copy_views(dst, src, false);
    }
    out = result.release();
  });
}

AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src, int32_t non_blocking) {
  return shim_call(__func__, [&] {
    AtenTensorOpaque* dst = checked_defined(self, "self");
    AtenTensorOpaque* from = checked_defined(src, "src");
    copy_views(view_of(*dst), view_of(*from), non_blocking != 0);
  });
}

AOTITorchError aoti_torch_tensor_copy_(AtenTensorHandle src, AtenTensorHandle dst) {
  return shim_call(__func__, [&] {
    AtenTensorOpaque* from = checked_defined(src, "src");
    AtenTensorOpaque* to = checked_defined(dst, "dst");
    copy_views(view_of(*to), view_of(*from), false);
  });
}

AOTITorchError aoti_torch_zero_(AtenTensorHandle self) {
  return shim_call(__func__, [&] { zero_view(view_of(*checked_defined(self, "self"))); });
}

// ---- item -------------------------------------------------------------------------
AOTITorchError aoti_torch_item_float16(AtenTensorHandle t, uint16_t* v) { return item_impl(__func__, t, v, 5); }
AOTITorchError aoti_torch_item_bfloat16(AtenTensorHandle t, uint16_t* v) { return item_impl(__func__, t, v, 15); }
AOTITorchError aoti_torch_item_float32(AtenTensorHandle t, float* v) { return item_impl(__func__, t, v, 6); }
AOTITorchError aoti_torch_item_float64(AtenTensorHandle t, double* v) { return item_impl(__func__, t, v, 7); }
AOTITorchError aoti_torch_item_uint8(AtenTensorHandle t, uint8_t* v) { return item_impl(__func__, t, v, 0); }
AOTITorchError aoti_torch_item_uint16(AtenTensorHandle t, uint16_t* v) { return item_impl(__func__, t, v, 27); }
AOTITorchError aoti_torch_item_uint32(AtenTensorHandle t, uint32_t* v) { return item_impl(__func__, t, v, 28); }
AOTITorchError aoti_torch_item_uint64(AtenTensorHandle t, uint64_t* v) { return item_impl(__func__, t, v, 29); }
AOTITorchError aoti_torch_item_int8(AtenTensorHandle t, int8_t* v) { return item_impl(__func__, t, v, 1); }
AOTITorchError aoti_torch_item_int16(AtenTensorHandle t, int16_t* v) { return item_impl(__func__, t, v, 2); }
AOTITorchError aoti_torch_item_int32(AtenTensorHandle t, int32_t* v) { return item_impl(__func__, t, v, 3); }
AOTITorchError aoti_torch_item_int64(AtenTensorHandle t, int64_t* v) { return item_impl(__func__, t, v, 4); }
AOTITorchError aoti_torch_item_bool(AtenTensorHandle t, bool* v) {
  // bool is stored as one byte 0/1; read it as uint8 so no invalid bool value is ever formed.
  if (v == nullptr) return shim_call(__func__, [] { throw_invalid("ret_value is null"); });
  uint8_t byte = 0;
  AOTITorchError rc = item_impl("aoti_torch_item_bool", t, &byte, 11);
  if (rc == AOTI_TORCH_SUCCESS) *v = byte != 0;
  return rc;
}

AOTITorchError aoti_torch_item_complex64(AtenTensorHandle tensor, float* ret_value) {
  return shim_call(__func__, [&] {
    float& re = out_param(ret_value, "ret_value");
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    if (t->numel() != 1) {
      throw_invalid("item needs a tensor with exactly one element, got " + std::to_string(t->numel()));
    }
    alignas(16) unsigned char element[16] = {0};
    if (t->dtype == 9) {
      read_single_element(view_of(*t), element);
      std::memcpy(&re, element, 2 * sizeof(float));  // {real, imag}
      return;
    }
    if (!conversion_supported(t->dtype, 6)) {
      throw aoti_cuda::Error(ErrorCode::kUnsupported,
                             std::string("cannot read a ") + aoti_cuda::dtype_name(t->dtype) + " element as complex64");
    }
    read_single_element(view_of(*t), element);
    float parts[2] = {0.0f, 0.0f};
    convert_element(element, t->dtype, &parts[0], 6);
    std::memcpy(&re, parts, sizeof(parts));
  });
}

// ---- scalar_to_tensor ----------------------------------------------------------------
AOTITorchError aoti_torch_scalar_to_tensor_float32(float v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 6, r); }
AOTITorchError aoti_torch_scalar_to_tensor_float64(double v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 7, r); }
AOTITorchError aoti_torch_scalar_to_tensor_uint8(uint8_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 0, r); }
AOTITorchError aoti_torch_scalar_to_tensor_uint16(uint16_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 27, r); }
AOTITorchError aoti_torch_scalar_to_tensor_uint32(uint32_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 28, r); }
AOTITorchError aoti_torch_scalar_to_tensor_uint64(uint64_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 29, r); }
AOTITorchError aoti_torch_scalar_to_tensor_int8(int8_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 1, r); }
AOTITorchError aoti_torch_scalar_to_tensor_int16(int16_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 2, r); }
AOTITorchError aoti_torch_scalar_to_tensor_int32(int32_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 3, r); }
AOTITorchError aoti_torch_scalar_to_tensor_int64(int64_t v, AtenTensorHandle* r) { return scalar_impl(__func__, v, 4, r); }
AOTITorchError aoti_torch_scalar_to_tensor_bool(bool v, AtenTensorHandle* r) {
  return scalar_impl(__func__, static_cast<uint8_t>(v ? 1 : 0), 11, r);
}

// ---- debugging -------------------------------------------------------------------------
AOTITorchError aoti_torch_check_inf_and_nan(const char* tensor_name, AtenTensorHandle tensor) {
  return shim_call(__func__, [&] {
    AtenTensorOpaque* t = checked_defined(tensor, "tensor");
    const std::string name = tensor_name ? tensor_name : "<unnamed>";
    int32_t dtype = t->dtype;
    bool is_complex = dtype == 9 || dtype == 10;
    if (!(dtype == 5 || dtype == 6 || dtype == 7 || dtype == 15 || is_complex)) return;  // integers cannot be inf/nan
    std::vector<unsigned char> bytes = host_elements(*t);
    const std::size_t item = t->itemsize();
    const std::size_t count = bytes.size() / item;
    bool nan = false;
    bool inf = false;
    for (std::size_t i = 0; i < count && !nan; ++i) {
      const unsigned char* p = bytes.data() + i * item;
      double parts[2] = {0, 0};
      int nparts = 1;
      if (dtype == 9) {
        float f[2];
        std::memcpy(f, p, sizeof(f));
        parts[0] = f[0];
        parts[1] = f[1];
        nparts = 2;
      } else if (dtype == 10) {
        std::memcpy(parts, p, sizeof(parts));
        nparts = 2;
      } else {
        convert_element(p, dtype, &parts[0], 7);
      }
      for (int k = 0; k < nparts; ++k) {
        nan = nan || std::isnan(parts[k]);
        inf = inf || std::isinf(parts[k]);
      }
    }
    if (nan) throw aoti_cuda::Error(ErrorCode::kModel, "At least one NaN in " + name);
    if (inf) throw aoti_cuda::Error(ErrorCode::kModel, "At least one INF in " + name);
  });
}

void aoti_torch_print_tensor_handle(AtenTensorHandle self, const char* msg) {
  // Debug printer: best effort, never throws; prints metadata and up to 32 values to stderr.
  try {
    std::string line = std::string("[aoti_cuda] ") + (msg ? msg : "") + ": ";
    if (self == nullptr || self->magic != AtenTensorOpaque::kLiveMagic) {
      line += "<invalid tensor handle>";
    } else if (!self->defined()) {
      line += "<undefined tensor>";
    } else {
      line += self->describe();
      // Values are copied to the host in full, so only for tensors of modest size.
      if (conversion_supported(self->dtype, 7) && self->numel() <= (int64_t{1} << 24)) {
        std::vector<unsigned char> bytes = host_elements(*self);
        const std::size_t item = self->itemsize();
        const std::size_t count = bytes.size() / item;
        line += " values [";
        for (std::size_t i = 0; i < count && i < 32; ++i) {
          double v = 0;
          convert_element(bytes.data() + i * item, self->dtype, &v, 7);
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%s%g", i ? ", " : "", v);
          line += buf;
        }
        line += count > 32 ? ", ...]" : "]";
      }
    }
    aoti_cuda::log(aoti_cuda::LogLevel::kInfo, line);
  } catch (const std::exception& e) {
    aoti_cuda::log(aoti_cuda::LogLevel::kError, std::string(msg ? msg : "") + ": <could not print tensor: " + e.what() + ">");
  } catch (...) {
    aoti_cuda::log(aoti_cuda::LogLevel::kError, std::string(msg ? msg : "") + ": <could not print tensor>");
  }
}

}  // extern "C"
