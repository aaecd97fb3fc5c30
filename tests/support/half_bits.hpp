// Test helpers: 16-bit floats (bf16 or fp16) as raw bits, to fill device tensors and read them back on the host.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace aoti_cuda_test {

/// The float value of 16-bit `bits`: fp16 when `fp16`, else bf16.
inline float from16(uint16_t bits, bool fp16) {
  if (fp16) return __half2float(__ushort_as_half(bits));
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// `f` rounded to fp16 or bf16 bits, to nearest even (finite inputs).
inline uint16_t to16(float f, bool fp16) {
  if (fp16) return __half_as_ushort(__float2half_rn(f));
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace aoti_cuda_test
