// NumPy .npy reading and writing (see aoti_cuda/npy.hpp). The header is a
// Python dict literal; only the three keys NumPy writes are read, each value
// parsed strictly, every length checked against the bytes present.
#include "aoti_cuda/npy.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda {
namespace {

constexpr std::pair<const char*, DType> kDescrs[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16}, {"<i8", DType::kInt64},
    {"<i4", DType::kInt32},   {"<i2", DType::kInt16},   {"|i1", DType::kInt8},    {"|u1", DType::kUInt8},
    {"|b1", DType::kBool},    {"<V2", DType::kBFloat16}, {"|V2", DType::kBFloat16}};

[[noreturn]] void bad(const std::string& label, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "'" + label + "' is not a valid .npy file: " + what);
}

// The text after "'key':" in the header dict, up to the end of the dict.
std::string value_of(const std::string& header, const std::string& key, const std::string& label) {
  const std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) bad(label, "the header has no '" + key + "'");
  const std::size_t colon = header.find(':', k);
  if (colon == std::string::npos) bad(label, "no value for '" + key + "'");
  std::size_t v = header.find_first_not_of(' ', colon + 1);
  return v == std::string::npos ? "" : header.substr(v);
}

DType parse_descr(const std::string& header, const std::string& label) {
  const std::string v = value_of(header, "descr", label);
  if (v.size() < 2 || (v[0] != '\'' && v[0] != '"')) bad(label, "'descr' is not a string");
  const std::size_t end = v.find(v[0], 1);
  if (end == std::string::npos) bad(label, "'descr' is not terminated");
  const std::string d = v.substr(1, end - 1);
  for (const auto& [name, t] : kDescrs) {
    if (d == name) return t;
  }
  throw Error(ErrorCode::kUnsupported, "'" + label + "': .npy dtype '" + d + "' is not supported");
}

std::vector<int64_t> parse_shape(const std::string& header, const std::string& label) {
  const std::string v = value_of(header, "shape", label);
  if (v.empty() || v[0] != '(') bad(label, "'shape' is not a tuple");
  const std::size_t close = v.find(')');
  if (close == std::string::npos) bad(label, "'shape' is not terminated");
  std::vector<int64_t> shape;
  const std::string body = v.substr(1, close - 1);
  std::size_t pos = 0;
  while (pos < body.size()) {
    pos = body.find_first_not_of(" ", pos);
    if (pos == std::string::npos) break;
    std::size_t used = 0;
    long long d = -1;
    try {
      d = std::stoll(body.substr(pos), &used);
    } catch (const std::exception&) {
      bad(label, "'shape' holds '" + body + "'");
    }
    if (d < 0) bad(label, "'shape' has a negative dimension");
    shape.push_back(d);
    pos = body.find_first_not_of(" ", pos + used);
    if (pos != std::string::npos && body[pos] != ',') bad(label, "'shape' holds '" + body + "'");
    if (pos != std::string::npos) ++pos;
  }
  return shape;
}

std::string header_for(const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& [name, dt] : kDescrs) {
    if (dt == t.dtype() && descr == nullptr) descr = name;
  }
  if (descr == nullptr) {
    throw Error(ErrorCode::kUnsupported, std::string("save_npy: ") + dtype_name(t.dtype()) + " cannot be stored in .npy");
  }
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ",";
  if (t.shape().size() > 1) shape.pop_back();  // (3,) for 1-d, (2,3) otherwise
  shape += ")";
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t total = 10 + h.size() + 1;  // magic(6)+version(2)+len(2), header, '\n'
  h.append((64 - total % 64) % 64, ' ');          // the data starts 64-byte aligned, as NumPy writes it
  return h + '\n';
}

}  // namespace

Tensor parse_npy(ByteView bytes, const std::string& label) {
  if (bytes.data == nullptr || bytes.size < 10 || std::memcmp(bytes.data, "\x93NUMPY", 6) != 0) {
    bad(label, "no \\x93NUMPY magic");
  }
  const int major = bytes.data[6];
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = bytes.data[8] | (bytes.data[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size < 12) bad(label, "truncated header length");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(bytes.data[8 + i]) << (8 * i);
    header_start = 12;
  } else {
    bad(label, "format version " + std::to_string(major) + " (1, 2 and 3 are known)");
  }
  if (header_len > bytes.size - header_start) bad(label, "the header runs past the end of the file");
  const std::string header(reinterpret_cast<const char*>(bytes.data) + header_start, header_len);
  const DType dtype = parse_descr(header, label);
  if (value_of(header, "fortran_order", label).rfind("False", 0) != 0) {
    throw Error(ErrorCode::kUnsupported, "'" + label + "': Fortran-ordered .npy arrays are not supported");
  }
  Tensor t = Tensor::empty(parse_shape(header, label), dtype);  // checks the shape for overflow
  const std::size_t data_bytes = bytes.size - header_start - header_len;
  if (data_bytes != t.nbytes()) {
    bad(label, "the data is " + std::to_string(data_bytes) + " bytes; " + dtype_name(dtype) + " of that shape needs " +
                   std::to_string(t.nbytes()));
  }
  if (t.nbytes() > 0) std::memcpy(t.data(), bytes.data + header_start + header_len, t.nbytes());
  return t;
}

Tensor load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw Error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                "cannot open '" + path + "': " + std::strerror(errno));
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error(ErrorCode::kIo, "reading '" + path + "' failed");
  return parse_npy({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, path);
}

void save_npy(const Tensor& t, const std::string& path) {
  if (!t.defined()) throw Error(ErrorCode::kInvalidArgument, "save_npy: undefined tensor");
  const Tensor host = t.device().is_cuda() || !t.is_contiguous() ? t.to(Device::cpu()) : t;
  const std::string header = header_for(host);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kIo, "cannot write '" + path + "': " + std::strerror(errno));
  const char prefix[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size() & 0xff),
                           static_cast<char>(header.size() >> 8)};
  f.write(prefix, sizeof prefix);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(host.data()), static_cast<std::streamsize>(host.nbytes()));
  if (!f) throw Error(ErrorCode::kIo, "short write to '" + path + "'");
}

}  // namespace aoti_cuda
