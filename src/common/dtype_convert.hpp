// Private low layer: host-side element conversion between dtypes (the one
// float16 / bfloat16 implementation of the library).
//
// Between bool, uint8/16/32/64, int8/16/32/64, float16, bfloat16, float32 and
// float64. Float -> integer saturates and maps NaN to 0 (PyTorch leaves that
// undefined); integer -> integer wraps. complex and float8 types convert only
// to the same dtype.
#pragma once

#include <cstdint>

namespace aoti_cuda::common {

/// True when a host-side conversion between the two dtypes is implemented.
bool conversion_supported(int32_t from, int32_t to) noexcept;
/// Converts one element (host memory) between dtypes; requires conversion_supported().
void convert_element(const void* src, int32_t src_dtype, void* dst, int32_t dst_dtype) noexcept;
/// float16 / bfloat16 bit conversions (round to nearest even).
uint16_t float_to_half_bits(float value) noexcept;
float half_bits_to_float(uint16_t bits) noexcept;
uint16_t float_to_bfloat16_bits(float value) noexcept;
float bfloat16_bits_to_float(uint16_t bits) noexcept;

}  // namespace aoti_cuda::common
