// DLPack import/export for aoti_cuda::Tensor (include/aoti_cuda/dlpack.hpp).
#include "aoti_cuda/dlpack.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda {
namespace {

// The DLPack spec gives bool the type code 6 (kDLBool) since v0.8. The
// Debian header we build against (0.6) predates the enumerator, so the value
// is spelled out here; newer headers must agree.
constexpr uint8_t kBoolTypeCode = 6;
#if defined(DLPACK_MAJOR_VERSION) || (defined(DLPACK_VERSION) && DLPACK_VERSION >= 80)
static_assert(kDLBool == kBoolTypeCode, "DLPack bool type code changed");
#endif

// Same bound as the shim's tensors: anything larger is garbage, not a tensor.
constexpr int32_t kMaxDims = 64;

struct DTypeMapping {
  uint8_t code;
  uint8_t bits;
  DType dtype;
};

constexpr DTypeMapping kDTypeMappings[] = {
    {kDLFloat, 16, DType::kFloat16},    {kDLFloat, 32, DType::kFloat32},    {kDLFloat, 64, DType::kFloat64},
    {kDLBfloat, 16, DType::kBFloat16},  {kDLComplex, 32, DType::kComplex32}, {kDLComplex, 64, DType::kComplex64},
    {kDLComplex, 128, DType::kComplex128},
    {kDLInt, 8, DType::kInt8},          {kDLInt, 16, DType::kInt16},        {kDLInt, 32, DType::kInt32},
    {kDLInt, 64, DType::kInt64},        {kDLUInt, 8, DType::kUInt8},        {kDLUInt, 16, DType::kUInt16},
    {kDLUInt, 32, DType::kUInt32},      {kDLUInt, 64, DType::kUInt64},      {kBoolTypeCode, 8, DType::kBool},
};

std::string type_code_name(unsigned code) {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLOpaqueHandle: return "kDLOpaqueHandle";
    case kDLBfloat: return "kDLBfloat";
    case kDLComplex: return "kDLComplex";
    case kBoolTypeCode: return "kDLBool";
    default: return "unknown type code";
  }
}

std::string device_type_name(long long type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return "unknown device type";
  }
}

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
  throw Error(code, "from_dlpack: " + message);
}

DType import_dtype(const DLDataType& t) {
  // Described only on failure: imports sit on the per-call path of the bindings.
  const auto desc = [&t] {
    return "DLTensor.dtype {code " + std::to_string(t.code) + " (" + type_code_name(t.code) + "), bits " +
           std::to_string(t.bits) + ", lanes " + std::to_string(t.lanes) + "}";
  };
  if (t.lanes != 1) fail(ErrorCode::kUnsupported, desc() + ": vector types (lanes != 1) are not supported");
  for (const DTypeMapping& m : kDTypeMappings) {
    if (m.code == t.code && m.bits == t.bits) return m.dtype;
  }
  fail(ErrorCode::kUnsupported, desc() + " has no aoti_cuda dtype (supported: float 16/32/64, bfloat 16, "
                                         "complex 32/64/128, int/uint 8/16/32/64, bool 8)");
}

// The raw integer in DLDevice.device_type. A C producer can store any int
// there, but the C++ enum's value range ends at 15: loading e.g. 99 as a
// DLDeviceType would be undefined behaviour, so the bytes are copied out.
long long raw_device_type(const DLDevice& d) {
  std::underlying_type_t<DLDeviceType> raw;
  static_assert(sizeof(raw) == sizeof(d.device_type), "DLDeviceType layout");
  std::memcpy(&raw, &d.device_type, sizeof(raw));
  return static_cast<long long>(raw);
}

Device import_device(const DLDevice& d) {
  const long long type = raw_device_type(d);
  const auto desc = [&] {
    return "DLTensor.device {device_type " + std::to_string(type) + " (" + device_type_name(type) + "), device_id " +
           std::to_string(d.device_id) + "}";
  };
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:  // page-locked host memory: an ordinary host pointer
      return Device::cpu();
    case kDLCUDA:
    case kDLCUDAManaged:  // managed memory is addressable from the device it is attached to
      if (d.device_id < 0) fail(ErrorCode::kInvalidArgument, desc() + ": negative CUDA device id");
      return Device::cuda(d.device_id);
    default:
      fail(ErrorCode::kUnsupported, desc() + ": only CPU, CUDA, CUDA host and CUDA managed memory are supported");
  }
}

// Keeps an imported DLManagedTensor alive for the Tensor copies. Only armed once
// the Tensor exists, so that a failure half-way leaves ownership with the caller.
struct ImportedOwner {
  DLManagedTensor* managed = nullptr;
  bool armed = false;
  ~ImportedOwner() {
    if (armed && managed->deleter != nullptr) managed->deleter(managed);
  }
};

// manager_ctx of an exported tensor: the Tensor reference that keeps the memory
// alive, plus the arrays DLTensor points into.
struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void delete_export(DLManagedTensor* managed) {
  if (managed != nullptr) delete static_cast<ExportContext*>(managed->manager_ctx);
}

}  // namespace

Tensor from_dlpack(DLManagedTensor* managed) {
  if (managed == nullptr) fail(ErrorCode::kInvalidArgument, "null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;

  const DType dtype = import_dtype(dl.dtype);
  const Device device = import_device(dl.device);

  if (dl.ndim < 0) fail(ErrorCode::kInvalidArgument, "DLTensor.ndim is negative (" + std::to_string(dl.ndim) + ")");
  if (dl.ndim > kMaxDims) {
    fail(ErrorCode::kUnsupported, "DLTensor.ndim " + std::to_string(dl.ndim) + " exceeds the supported " +
                                      std::to_string(kMaxDims) + " dimensions");
  }
  if (dl.ndim > 0 && dl.shape == nullptr) {
    fail(ErrorCode::kInvalidArgument, "DLTensor.shape is null for ndim " + std::to_string(dl.ndim));
  }
  std::vector<int64_t> shape(dl.shape, dl.shape + dl.ndim);
  int64_t numel = 1;
  for (int32_t i = 0; i < dl.ndim; ++i) {
    if (shape[i] < 0) {
      fail(ErrorCode::kInvalidArgument, "DLTensor.shape[" + std::to_string(i) + "] is negative (" +
                                            std::to_string(shape[i]) + ")");
    }
    if (shape[i] == 0) numel = 0;
  }

  std::vector<int64_t> strides;  // empty = contiguous (DLPack: strides == NULL)
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
    for (int32_t i = 0; i < dl.ndim; ++i) {
      if (strides[i] < 0) {
        fail(ErrorCode::kUnsupported, "DLTensor.strides[" + std::to_string(i) + "] is negative (" +
                                          std::to_string(strides[i]) + "); negative strides are not supported");
      }
    }
  }

  void* data = nullptr;
  if (dl.data != nullptr) {
    // Integer arithmetic: a garbage offset must give an error, not pointer-overflow UB.
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(dl.data) + dl.byte_offset;
    data = reinterpret_cast<void*>(address);
    const std::size_t es = element_size(dtype);
    if (address % es != 0) {
      fail(ErrorCode::kInvalidArgument, "DLTensor.data + byte_offset (" + std::to_string(dl.byte_offset) +
                                            ") is not aligned to the " + std::to_string(es) + "-byte element size of " +
                                            dtype_name(dtype));
    }
  } else if (numel != 0) {
    fail(ErrorCode::kInvalidArgument, "DLTensor.data is null for a non-empty tensor");
  }

  // Nothing below may call the deleter on failure: the owner is armed last.
  auto owner = std::make_shared<ImportedOwner>();
  owner->managed = managed;
  Tensor tensor;
  try {
    tensor = Tensor::from_blob(data, std::move(shape), dtype, device, owner, std::move(strides));
  } catch (const Error& e) {
    // from_blob's own checks (e.g. byte size overflow) — re-label for the caller.
    fail(e.code(), e.what());
  }
  owner->armed = true;
  return tensor;
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  if (!tensor.defined()) throw Error(ErrorCode::kInvalidArgument, "to_dlpack: the tensor is undefined");
  const DType dtype = tensor.dtype();
  const DTypeMapping* mapping = nullptr;
  for (const DTypeMapping& m : kDTypeMappings) {
    if (m.dtype == dtype) mapping = &m;
  }
  if (mapping == nullptr) {
    throw Error(ErrorCode::kUnsupported,
                std::string("to_dlpack: dtype ") + dtype_name(dtype) + " has no DLPack equivalent");
  }
  if (tensor.dim() > kMaxDims) {
    throw Error(ErrorCode::kUnsupported, "to_dlpack: " + std::to_string(tensor.dim()) + " dimensions (at most " +
                                             std::to_string(kMaxDims) + ")");
  }

  auto ctx = std::make_unique<ExportContext>();
  ctx->tensor = tensor;
  ctx->shape = tensor.shape();
  ctx->strides = tensor.strides();

  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = tensor.data();
  dl.byte_offset = 0;
  dl.device.device_type = tensor.device().is_cuda() ? kDLCUDA : kDLCPU;
  dl.device.device_id = tensor.device().is_cuda() ? tensor.device().index : 0;
  dl.ndim = static_cast<int32_t>(tensor.dim());
  dl.dtype.code = mapping->code;
  dl.dtype.bits = mapping->bits;
  dl.dtype.lanes = 1;
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = delete_export;
  return &ctx.release()->managed;
}

}  // namespace aoti_cuda
