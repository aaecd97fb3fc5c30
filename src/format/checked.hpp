// Overflow-checked arithmetic and little-endian reads for untrusted input.
#pragma once

#include <cstdint>
#include <cstring>

namespace aoti_cuda {
namespace format {

/// a + b in u64; false on overflow.
inline bool add_u64(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
/// a * b in u64; false on overflow.
inline bool mul_u64(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

inline std::uint16_t read_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t read_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline std::uint64_t read_u64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(read_u32(p)) | (static_cast<std::uint64_t>(read_u32(p + 4)) << 32);
}

}  // namespace format
}  // namespace aoti_cuda
