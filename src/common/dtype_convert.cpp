// Element conversion between dtypes. See dtype_convert.hpp.
#include "common/dtype_convert.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "aoti_cuda/dtype.hpp"

namespace aoti_cuda::common {
namespace {

// ---- element conversion ------------------------------------------------------
enum class Kind { kBool, kSigned, kUnsigned, kFloat, kNone };

Kind kind_of(int32_t dtype) noexcept {
  switch (dtype) {
    case 11: return Kind::kBool;
    case 1: case 2: case 3: case 4: return Kind::kSigned;
    case 0: case 27: case 28: case 29: return Kind::kUnsigned;
    case 5: case 6: case 7: case 15: return Kind::kFloat;
    default: return Kind::kNone;
  }
}

struct Scalar {
  Kind kind = Kind::kSigned;
  double f = 0;
  int64_t i = 0;
  uint64_t u = 0;
};

template <class T>
T load_as(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Scalar load(const void* p, int32_t dtype) noexcept {
  Scalar s;
  s.kind = kind_of(dtype);
  switch (dtype) {
    case 11: s.u = load_as<uint8_t>(p) != 0 ? 1 : 0; s.kind = Kind::kUnsigned; break;
    case 0: s.u = load_as<uint8_t>(p); break;
    case 27: s.u = load_as<uint16_t>(p); break;
    case 28: s.u = load_as<uint32_t>(p); break;
    case 29: s.u = load_as<uint64_t>(p); break;
    case 1: s.i = load_as<int8_t>(p); break;
    case 2: s.i = load_as<int16_t>(p); break;
    case 3: s.i = load_as<int32_t>(p); break;
    case 4: s.i = load_as<int64_t>(p); break;
    case 5: s.f = half_bits_to_float(load_as<uint16_t>(p)); break;
    case 15: s.f = bfloat16_bits_to_float(load_as<uint16_t>(p)); break;
    case 6: s.f = load_as<float>(p); break;
    case 7: s.f = load_as<double>(p); break;
    default: break;
  }
  return s;
}

template <class T>
T saturate_from_double(double f) noexcept {
  if (std::isnan(f)) return T(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (f <= lo) return std::numeric_limits<T>::lowest();
  if (f >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(f);
}

template <class T>
T to_integer(const Scalar& s) noexcept {
  switch (s.kind) {
    case Kind::kFloat: return saturate_from_double<T>(s.f);
    case Kind::kSigned: return static_cast<T>(s.i);
    default: return static_cast<T>(s.u);
  }
}

double to_double(const Scalar& s) noexcept {
  switch (s.kind) {
    case Kind::kFloat: return s.f;
    case Kind::kSigned: return static_cast<double>(s.i);
    default: return static_cast<double>(s.u);
  }
}

template <class T>
void store_as(void* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

void store(void* p, int32_t dtype, const Scalar& s) noexcept {
  switch (dtype) {
    case 11: {
      bool nonzero = s.kind == Kind::kFloat ? s.f != 0 : (s.kind == Kind::kSigned ? s.i != 0 : s.u != 0);
      store_as<uint8_t>(p, nonzero ? 1 : 0);
      break;
    }
    case 0: store_as(p, to_integer<uint8_t>(s)); break;
    case 27: store_as(p, to_integer<uint16_t>(s)); break;
    case 28: store_as(p, to_integer<uint32_t>(s)); break;
    case 29: store_as(p, to_integer<uint64_t>(s)); break;
    case 1: store_as(p, to_integer<int8_t>(s)); break;
    case 2: store_as(p, to_integer<int16_t>(s)); break;
    case 3: store_as(p, to_integer<int32_t>(s)); break;
    case 4: store_as(p, to_integer<int64_t>(s)); break;
    case 5: store_as(p, float_to_half_bits(static_cast<float>(to_double(s)))); break;
    case 15: store_as(p, float_to_bfloat16_bits(static_cast<float>(to_double(s)))); break;
    case 6: store_as(p, static_cast<float>(to_double(s))); break;
    case 7: store_as(p, to_double(s)); break;
    default: break;
  }
}

}  // namespace

// ---- half / bfloat16 ----------------------------------------------------------
uint16_t float_to_half_bits(float value) noexcept {
  uint32_t x = 0;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u | (mant >> 13) : 0u));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (e <= 0) {                                                // half subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // a carry into the exponent is still correct
  return static_cast<uint16_t>(half);
}

float half_bits_to_float(uint16_t bits) noexcept {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  uint32_t x = 0;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float out = 0;
  std::memcpy(&out, &x, sizeof(out));
  return out;
}

uint16_t float_to_bfloat16_bits(float value) noexcept {
  uint32_t x = 0;
  std::memcpy(&x, &value, sizeof(x));
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu) != 0) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN, sign kept
  }
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) noexcept {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float out = 0;
  std::memcpy(&out, &x, sizeof(out));
  return out;
}

bool conversion_supported(int32_t from, int32_t to) noexcept {
  return from == to ? element_size(from) != 0 : kind_of(from) != Kind::kNone && kind_of(to) != Kind::kNone;
}

void convert_element(const void* src, int32_t src_dtype, void* dst, int32_t dst_dtype) noexcept {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, element_size(src_dtype));
    return;
  }
  store(dst, dst_dtype, load(src, src_dtype));
}

}  // namespace aoti_cuda::common
