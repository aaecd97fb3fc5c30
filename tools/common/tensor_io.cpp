#include "tensor_io.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

namespace aoti_cuda_cli {
namespace {

using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::Tensor;
using aoti_cuda::TensorSpec;

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kNotFound, "cannot open file '" + path + "'");
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t float_to_half(float f) {
  // Simple conversion; values from random_tensor are in [-1,1), normal range.
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exp = static_cast<int>((bits >> 23) & 0xffu) - 127 + 15;
  const uint32_t mant = bits & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13));
}

std::string join_shape(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r;
}

void check_against_spec(const std::string& path, const std::vector<int64_t>& shape, DType dtype,
                        const TensorSpec& spec) {
  if (dtype != spec.dtype) {
    throw Error(ErrorCode::kInvalidArgument, "file '" + path + "' holds " + aoti_cuda::dtype_name(dtype) +
                                                  " but " + aoti_cuda::dtype_name(spec.dtype) + " is expected");
  }
  bool ok = shape.size() == spec.sizes.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    ok = spec.dynamic ? (shape[i] >= 0 && shape[i] <= spec.sizes[i]) : shape[i] == spec.sizes[i];
  }
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument, "file '" + path + "' has shape [" + join_shape(shape) +
                                                 "] but " + describe(spec) + " is expected");
  }
}

// .npy through the SDK's reader (aoti_cuda/npy.hpp), then checked against the spec.
Tensor load_npy(const std::string& path, const std::vector<char>& bytes, const TensorSpec& spec) {
  Tensor t = aoti_cuda::parse_npy({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, path);
  check_against_spec(path, t.shape(), t.dtype(), spec);
  return t;
}

}  // namespace

std::string describe(const TensorSpec& s) {
  std::string r = std::string(aoti_cuda::dtype_name(s.dtype)) + "[";
  for (size_t i = 0; i < s.sizes.size(); ++i) r += (i ? "," : "") + std::string(s.dynamic ? "<=" : "") + std::to_string(s.sizes[i]);
  return r + "]";
}

std::string describe(const Tensor& t) {
  return std::string(aoti_cuda::dtype_name(t.dtype())) + "[" + join_shape(t.shape()) + "]";
}

namespace {

// Splits "file.bin@1,17,64" into the path and an explicit shape.
bool split_shape_suffix(const std::string& arg, std::string* path, std::vector<int64_t>* shape) {
  const size_t at = arg.rfind('@');
  if (at == std::string::npos || at + 1 >= arg.size() ||
      arg.find_first_not_of("0123456789,", at + 1) != std::string::npos) {
    *path = arg;
    return false;
  }
  *path = arg.substr(0, at);
  std::stringstream ss(arg.substr(at + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) shape->push_back(std::stoll(item));
  }
  return true;
}

// For a raw file of a dynamic tensor: the shape obtained by shrinking one
// dimension to make the byte count fit. The leading (batch) dimension is
// preferred; otherwise exactly one dimension must fit, else empty.
std::vector<int64_t> infer_dynamic_shape(const TensorSpec& spec, size_t bytes) {
  const size_t elem = aoti_cuda::element_size(spec.dtype);
  std::vector<std::vector<int64_t>> candidates;
  for (size_t d = 0; d < spec.sizes.size(); ++d) {
    size_t others = elem;
    for (size_t i = 0; i < spec.sizes.size(); ++i) {
      if (i != d) others *= static_cast<size_t>(spec.sizes[i]);
    }
    if (others == 0 || bytes % others != 0) continue;
    const int64_t n = static_cast<int64_t>(bytes / others);
    if (n > spec.sizes[d]) continue;
    std::vector<int64_t> shape = spec.sizes;
    shape[d] = n;
    candidates.push_back(shape);
  }
  if (!candidates.empty() && candidates.front().size() == spec.sizes.size() && !spec.sizes.empty() &&
      candidates.front()[0] != spec.sizes[0]) {
    return candidates.front();  // shrinking the leading dimension fits
  }
  return candidates.size() == 1 ? candidates.front() : std::vector<int64_t>{};
}

}  // namespace

Tensor load_tensor(const std::string& arg, const TensorSpec& spec) {
  std::string path;
  std::vector<int64_t> shape;
  const bool explicit_shape = split_shape_suffix(arg, &path, &shape);
  const std::vector<char> bytes = read_file(path);
  if (ends_with(path, ".npy")) return load_npy(path, bytes, spec);
  const size_t elem = aoti_cuda::element_size(spec.dtype);
  auto nbytes_of = [&](const std::vector<int64_t>& s) {
    size_t n = elem;
    for (int64_t d : s) n *= static_cast<size_t>(d);
    return n;
  };
  if (!explicit_shape) {
    shape = spec.sizes;
    if (bytes.size() != nbytes_of(shape) && spec.dynamic) {
      shape = infer_dynamic_shape(spec, bytes.size());
      if (shape.empty()) {
        throw Error(ErrorCode::kInvalidArgument,
                    "input file '" + path + "' is " + std::to_string(bytes.size()) + " bytes, which does not tell the shape of " +
                        describe(spec) + " unambiguously; give it as '" + path + "@d0,d1,...'");
      }
    }
  }
  if (bytes.size() != nbytes_of(shape)) {
    throw Error(ErrorCode::kInvalidArgument, "input file '" + path + "' is " + std::to_string(bytes.size()) +
                                                 " bytes but " + describe(spec) + " with shape [" + join_shape(shape) +
                                                 "] needs " + std::to_string(nbytes_of(shape)));
  }
  check_against_spec(path, shape, spec.dtype, spec);
  Tensor t = Tensor::empty(shape, spec.dtype);
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

Tensor random_tensor(const TensorSpec& spec, uint32_t seed) {
  Tensor t = Tensor::empty(spec.sizes, spec.dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    switch (spec.dtype) {
      case DType::kFloat32: t.data_ptr<float>()[i] = uni(rng); break;
      case DType::kFloat64: t.data_ptr<double>()[i] = uni(rng); break;
      case DType::kBFloat16: t.data_ptr<uint16_t>()[i] = float_to_bf16(uni(rng)); break;
      case DType::kFloat16: t.data_ptr<uint16_t>()[i] = float_to_half(uni(rng)); break;
      case DType::kInt64: t.data_ptr<int64_t>()[i] = static_cast<int64_t>(rng() % 8); break;
      case DType::kInt32: t.data_ptr<int32_t>()[i] = static_cast<int32_t>(rng() % 8); break;
      case DType::kBool: t.data_ptr<bool>()[i] = (i % 2) == 0; break;
      default: std::memset(static_cast<char*>(t.data()) + i * aoti_cuda::element_size(spec.dtype), static_cast<int>(rng() % 8),
                           aoti_cuda::element_size(spec.dtype));
    }
  }
  return t;
}

double element_as_double(const Tensor& t, int64_t i) {
  const void* p = static_cast<const char*>(t.data()) + i * static_cast<int64_t>(aoti_cuda::element_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kFloat32: return *static_cast<const float*>(p);
    case DType::kFloat64: return *static_cast<const double*>(p);
    case DType::kBFloat16: return bf16_to_float(*static_cast<const uint16_t*>(p));
    case DType::kFloat16: return half_to_float(*static_cast<const uint16_t*>(p));
    case DType::kInt64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::kInt32: return *static_cast<const int32_t*>(p);
    case DType::kInt16: return *static_cast<const int16_t*>(p);
    case DType::kInt8: return *static_cast<const int8_t*>(p);
    case DType::kUInt8: return *static_cast<const uint8_t*>(p);
    case DType::kBool: return *static_cast<const bool*>(p) ? 1.0 : 0.0;
    default: return NAN;
  }
}

void save_tensor(const Tensor& t, const std::string& path) {
  if (ends_with(path, ".npy")) {
    aoti_cuda::save_npy(t, path);
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kIo, "cannot write '" + path + "'");
  f.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  if (!f) throw Error(ErrorCode::kIo, "short write to '" + path + "'");
}

Comparison compare_to_file(const Tensor& got, const std::string& expected_path, double atol, double rtol) {
  Comparison c;
  const std::vector<char> bytes = read_file(expected_path);
  Tensor want;
  if (ends_with(expected_path, ".npy")) {
    // .npy carries dtype and shape: both must be the output's.
    TensorSpec spec;
    spec.dtype = got.dtype();
    spec.sizes = got.shape();
    try {
      want = load_npy(expected_path, bytes, spec);
    } catch (const Error& e) {
      c.ok = false;
      c.message = std::string("cannot compare with output ") + describe(got) + ": " + e.what();
      return c;
    }
  } else if (bytes.size() != got.nbytes()) {
    c.ok = false;
    c.message = "expected file '" + expected_path + "' is " + std::to_string(bytes.size()) + " bytes, output " +
                describe(got) + " is " + std::to_string(got.nbytes());
    return c;
  } else {
    want = Tensor::from_blob(const_cast<char*>(bytes.data()), got.shape(), got.dtype());
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = element_as_double(got, i), w = element_as_double(want, i);
    const double err = std::fabs(g - w);
    if (std::isnan(g) != std::isnan(w) || err > atol + rtol * std::fabs(w)) {
      if (c.first_bad < 0) c.first_bad = i;
      c.ok = false;
    }
    if (!std::isnan(err) && err > c.max_abs_err) c.max_abs_err = err;
  }
  std::ostringstream m;
  m << (c.ok ? "match" : "MISMATCH") << " (max |err| = " << c.max_abs_err << ", atol " << atol << ", rtol " << rtol;
  if (c.first_bad >= 0) m << ", first bad element " << c.first_bad;
  m << ")";
  c.message = m.str();
  return c;
}

}  // namespace aoti_cuda_cli
