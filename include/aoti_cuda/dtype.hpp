// aoti_cuda — element types and devices.
//
// DType values are PyTorch's c10::ScalarType codes, which is also what
// ExecuTorch's ScalarType and the aoti_torch_dtype_*() shim getters use, so a
// value read from a .pte, a shim handle or this enum means the same thing
// everywhere. Header-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aoti_cuda {

/// Element type of a tensor. Values are stable (c10::ScalarType codes); not
/// every type can be computed on, but every one can be stored and copied.
enum class DType : int8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  kComplex32 = 8,
  kComplex64 = 9,
  kComplex128 = 10,
  kBool = 11,
  kQInt8 = 12,
  kQUInt8 = 13,
  kQInt32 = 14,
  kBFloat16 = 15,
  kQUInt4x2 = 16,
  kQUInt2x4 = 17,
  kBits1x8 = 18,
  kBits2x4 = 19,
  kBits4x2 = 20,
  kBits8 = 21,
  kBits16 = 22,
  kFloat8_e5m2 = 23,
  kFloat8_e4m3fn = 24,
  kFloat8_e5m2fnuz = 25,
  kFloat8_e4m3fnuz = 26,
  kUInt16 = 27,
  kUInt32 = 28,
  kUInt64 = 29,
};

/// Size in bytes of one element, or 0 for a code that is not a known type.
/// Accepts raw integer codes so untrusted values can be checked before any cast.
constexpr std::size_t element_size(int code) noexcept {
  switch (code) {
    case 0: case 1: case 11: case 12: case 13: case 16: case 17:
    case 18: case 19: case 20: case 21: case 23: case 24: case 25: case 26:
      return 1;
    case 2: case 5: case 15: case 22: case 27:
      return 2;
    case 3: case 6: case 14: case 28: case 8:
      return 4;
    case 4: case 7: case 29: case 9:
      return 8;
    case 10:
      return 16;
    default:
      return 0;
  }
}
constexpr std::size_t element_size(DType t) noexcept { return element_size(static_cast<int>(t)); }

/// True when `code` is one of the DType values above.
constexpr bool is_valid_dtype(int code) noexcept { return element_size(code) != 0; }

/// Lower-case PyTorch-style name ("float32", "bfloat16", ...); "invalid" otherwise.
constexpr const char* dtype_name(int code) noexcept {
  switch (code) {
    case 0: return "uint8";
    case 1: return "int8";
    case 2: return "int16";
    case 3: return "int32";
    case 4: return "int64";
    case 5: return "float16";
    case 6: return "float32";
    case 7: return "float64";
    case 8: return "complex32";
    case 9: return "complex64";
    case 10: return "complex128";
    case 11: return "bool";
    case 12: return "qint8";
    case 13: return "quint8";
    case 14: return "qint32";
    case 15: return "bfloat16";
    case 16: return "quint4x2";
    case 17: return "quint2x4";
    case 18: return "bits1x8";
    case 19: return "bits2x4";
    case 20: return "bits4x2";
    case 21: return "bits8";
    case 22: return "bits16";
    case 23: return "float8_e5m2";
    case 24: return "float8_e4m3fn";
    case 25: return "float8_e5m2fnuz";
    case 26: return "float8_e4m3fnuz";
    case 27: return "uint16";
    case 28: return "uint32";
    case 29: return "uint64";
    default: return "invalid";
  }
}
constexpr const char* dtype_name(DType t) noexcept { return dtype_name(static_cast<int>(t)); }

/// Where tensor memory lives.
enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

/// A device: CPU, or CUDA with an ordinal. A plain value type. Two CPU
/// devices compare equal whatever their index.
struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static constexpr Device cpu() noexcept { return Device{DeviceType::kCPU, 0}; }
  static constexpr Device cuda(int ordinal = 0) noexcept { return Device{DeviceType::kCUDA, ordinal}; }
  constexpr bool is_cpu() const noexcept { return type == DeviceType::kCPU; }
  constexpr bool is_cuda() const noexcept { return type == DeviceType::kCUDA; }
  friend constexpr bool operator==(Device a, Device b) noexcept {
    return a.type == b.type && (a.type == DeviceType::kCPU || a.index == b.index);
  }
  friend constexpr bool operator!=(Device a, Device b) noexcept { return !(a == b); }
  /// "cpu" or "cuda:N".
  std::string str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }
};

}  // namespace aoti_cuda
