// Strided copies, fills, element conversion. See copy_engine.hpp.
#include "shim/copy_engine.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>

#include "shim/allocator.hpp"
#include "shim/error_state.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

// More 2-D slabs than this and a CUDA copy goes through host staging instead
// (each slab is one cudaMemcpy2DAsync call).
constexpr int64_t kMaxSlabs = 1024;

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

// ---- dimension bookkeeping ----------------------------------------------------
// Shapes of a two-operand elementwise loop after reordering and merging.
struct LoopDims {
  std::vector<int64_t> sizes;
  std::vector<int64_t> dst;  // strides in elements
  std::vector<int64_t> src;
};

// Drops size-1 dims, orders dims by decreasing destination stride (the copy is
// elementwise, so any order is valid) and merges dims that are contiguous with
// their inner neighbour in both operands.
LoopDims plan_loop(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dst,
                   const std::vector<int64_t>& src) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (dst[a] != dst[b]) return dst[a] > dst[b];
    return src[a] > src[b];
  });
  LoopDims out;
  for (std::size_t i : order) {
    if (!out.sizes.empty() && out.dst.back() == dst[i] * sizes[i] && out.src.back() == src[i] * sizes[i]) {
      // previous (outer) dim steps exactly over this one: merge
      out.sizes.back() *= sizes[i];
      out.dst.back() = dst[i];
      out.src.back() = src[i];
      continue;
    }
    out.sizes.push_back(sizes[i]);
    out.dst.push_back(dst[i]);
    out.src.push_back(src[i]);
  }
  return out;
}

// Calls fn(dst_elem_offset, src_elem_offset) for every index of the outer
// dims [0, outer) of `loop`, in row-major order.
template <class Fn>
void for_each_outer(const LoopDims& loop, std::size_t outer, Fn&& fn) {
  std::vector<int64_t> index(outer, 0);
  int64_t d = 0;
  int64_t s = 0;
  for (;;) {
    fn(d, s);
    std::size_t k = outer;
    for (;;) {
      if (k == 0) return;
      --k;
      if (++index[k] < loop.sizes[k]) {
        d += loop.dst[k];
        s += loop.src[k];
        break;
      }
      d -= loop.dst[k] * (loop.sizes[k] - 1);
      s -= loop.src[k] * (loop.sizes[k] - 1);
      index[k] = 0;
    }
  }
}

void host_copy(char* dst, const std::vector<int64_t>& dst_strides, int32_t dst_dtype, const char* src,
               const std::vector<int64_t>& src_strides, int32_t src_dtype, const std::vector<int64_t>& sizes) {
  LoopDims loop = plan_loop(sizes, dst_strides, src_strides);
  const auto dsize = static_cast<int64_t>(element_size(dst_dtype));
  const auto ssize = static_cast<int64_t>(element_size(src_dtype));
  const bool same = dst_dtype == src_dtype;
  if (loop.sizes.empty()) {  // a single element
    if (same) std::memcpy(dst, src, static_cast<std::size_t>(dsize));
    else convert_element(src, src_dtype, dst, dst_dtype);
    return;
  }
  const std::size_t inner = loop.sizes.size() - 1;
  const int64_t n = loop.sizes[inner];
  const int64_t dstep = loop.dst[inner] * dsize;
  const int64_t sstep = loop.src[inner] * ssize;
  const bool contiguous_run = same && loop.dst[inner] == 1 && loop.src[inner] == 1;
  for_each_outer(loop, inner, [&](int64_t d, int64_t s) {
    char* dp = dst + d * dsize;
    const char* sp = src + s * ssize;
    if (contiguous_run) {
      std::memcpy(dp, sp, static_cast<std::size_t>(n * dsize));
      return;
    }
    for (int64_t k = 0; k < n; ++k, dp += dstep, sp += sstep) {
      if (same) std::memcpy(dp, sp, static_cast<std::size_t>(dsize));
      else convert_element(sp, src_dtype, dp, dst_dtype);
    }
  });
}

// Owns a host staging buffer.
struct HostBuffer {
  std::unique_ptr<void, void (*)(void*)> ptr{nullptr, [](void* p) { host_free(p); }};
  explicit HostBuffer(std::size_t nbytes) { ptr.reset(host_allocate(nbytes)); }
  char* get() const { return static_cast<char*>(ptr.get()); }
};

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda_error(err, what);
}

std::size_t span_bytes(const View& v) {
  return required_bytes(0, span_elements(v.sizes, v.strides), element_size(v.dtype));
}

// True when the byte ranges covered by two views in the same memory space intersect.
bool views_overlap(const View& a, const View& b) {
  if (a.cuda != b.cuda || (a.cuda && a.device != b.device)) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  const std::size_t as = span_bytes(a);
  const std::size_t bs = span_bytes(b);
  return as != 0 && bs != 0 && a0 < b0 + bs && b0 < a0 + as;
}

// Host staging for copies that touch CUDA and cannot be expressed as 2-D memcpys.
void staged_copy(const View& dst, const View& src, cudaStream_t stream) {
  const char* src_host = src.data;
  std::unique_ptr<HostBuffer> src_stage;
  if (src.cuda) {
    std::size_t bytes = span_bytes(src);
    src_stage = std::make_unique<HostBuffer>(bytes);
    check_cuda(cudaMemcpyAsync(src_stage->get(), src.data, bytes, cudaMemcpyDefault, stream),
               "cudaMemcpyAsync (device -> host staging)");
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging)");
    src_host = src_stage->get();
  } else if (dst.cuda) {
    // The host source may be written by earlier work on the stream (a pending
    // non_blocking D2H into pinned memory): order the CPU read after it.
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging)");
  }
  if (!dst.cuda) {
    host_copy(dst.data, dst.strides, dst.dtype, src_host, src.strides, src.dtype, dst.sizes);
    return;
  }
  // Read-modify-write of the destination's covering span, so bytes between the
  // view's elements (other tensors' data) are preserved.
  std::size_t bytes = span_bytes(dst);
  HostBuffer dst_stage(bytes);
  check_cuda(cudaMemcpyAsync(dst_stage.get(), dst.data, bytes, cudaMemcpyDefault, stream),
             "cudaMemcpyAsync (device -> host staging)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging)");
  host_copy(dst_stage.get(), dst.strides, dst.dtype, src_host, src.strides, src.dtype, dst.sizes);
  check_cuda(cudaMemcpyAsync(dst.data, dst_stage.get(), bytes, cudaMemcpyDefault, stream),
             "cudaMemcpyAsync (host staging -> device)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (staging)");  // before the buffer is freed
}

// Tries to express the copy as <= kMaxSlabs 2-D memcpys; returns false when it cannot.
bool memcpy2d_copy(const View& dst, const View& src, cudaStream_t stream) {
  const auto item = static_cast<int64_t>(element_size(dst.dtype));
  LoopDims loop = plan_loop(dst.sizes, dst.strides, src.strides);
  if (loop.sizes.empty()) {
    check_cuda(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(item), cudaMemcpyDefault, stream),
               "cudaMemcpyAsync");
    return true;
  }
  const std::size_t nd = loop.sizes.size();
  int64_t width = item;
  int64_t height = 1;
  int64_t dpitch = item;
  int64_t spitch = item;
  std::size_t outer = 0;
  if (loop.dst[nd - 1] == 1 && loop.src[nd - 1] == 1) {
    width = loop.sizes[nd - 1] * item;
    if (nd == 1) {
      check_cuda(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(width), cudaMemcpyDefault, stream),
                 "cudaMemcpyAsync");
      return true;
    }
    height = loop.sizes[nd - 2];
    dpitch = loop.dst[nd - 2] * item;
    spitch = loop.src[nd - 2] * item;
    outer = nd - 2;
  } else {
    height = loop.sizes[nd - 1];
    dpitch = loop.dst[nd - 1] * item;
    spitch = loop.src[nd - 1] * item;
    outer = nd - 1;
  }
  if (dpitch < width || spitch < width) return false;  // overlapping rows (e.g. broadcast): not a 2-D memcpy
  int64_t slabs = 1;
  for (std::size_t k = 0; k < outer; ++k) {
    slabs *= loop.sizes[k];
    if (slabs > kMaxSlabs) return false;
  }
  bool ok = true;
  for_each_outer(loop, outer, [&](int64_t d, int64_t s) {
    if (!ok) return;
    cudaError_t err = cudaMemcpy2DAsync(dst.data + d * item, static_cast<std::size_t>(dpitch), src.data + s * item,
                                        static_cast<std::size_t>(spitch), static_cast<std::size_t>(width),
                                        static_cast<std::size_t>(height), cudaMemcpyDefault, stream);
    if (err == cudaErrorInvalidPitchValue) {
      (void)cudaGetLastError();
      ok = false;  // pitch beyond the device limit; only possible on the first slab
      return;
    }
    check_cuda(err, "cudaMemcpy2DAsync");
  });
  return ok;
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

View view_of(const AtenTensorOpaque& tensor) {
  View v;
  v.data = tensor.data_ptr();
  v.sizes = tensor.sizes;
  v.strides = tensor.strides;
  v.dtype = tensor.dtype;
  v.cuda = tensor.storage->is_cuda();
  v.device = tensor.storage->device_index;
  v.pinned = tensor.storage->kind == StorageKind::kHostPinned;
  return v;
}

void copy_views(const View& dst, const View& src_in, bool non_blocking) {
  if (!conversion_supported(src_in.dtype, dst.dtype)) {
    throw Error(ErrorCode::kUnsupported, std::string("dtype conversion ") + dtype_name(src_in.dtype) + " -> " +
                                             dtype_name(dst.dtype) + " is not supported");
  }
  // Broadcast src to dst's sizes (trailing dims aligned; size-1 dims get stride 0).
  View src = src_in;
  if (src.sizes != dst.sizes) {
    bool ok = src.sizes.size() <= dst.sizes.size();
    const std::size_t lead = dst.sizes.size() - (ok ? src.sizes.size() : 0);
    std::vector<int64_t> strides(dst.sizes.size(), 0);
    for (std::size_t i = 0; ok && i < src.sizes.size(); ++i) {
      const int64_t want = dst.sizes[lead + i];
      if (src.sizes[i] == want) strides[lead + i] = src.strides[i];
      else if (src.sizes[i] != 1) ok = false;
    }
    if (!ok) {
      throw_invalid("shape mismatch: cannot copy a source of sizes " + format_dims(src_in.sizes) +
                    " into a destination of sizes " + format_dims(dst.sizes));
    }
    src.sizes = dst.sizes;
    src.strides = std::move(strides);
  }
  const int64_t numel = checked_numel(dst.sizes);
  if (numel == 0) return;
  if (views_overlap(dst, src)) {
    // Reading and writing the same bytes in one pass is undefined for memcpy and
    // cudaMemcpy: materialize the source in a temporary contiguous buffer first.
    const std::size_t bytes = static_cast<std::size_t>(numel) * element_size(src.dtype);
    View tmp = src;
    tmp.strides = contiguous_strides(src.sizes);
    tmp.pinned = false;
    if (!src.cuda) {
      HostBuffer buffer(bytes);
      tmp.data = buffer.get();
      host_copy(tmp.data, tmp.strides, tmp.dtype, src.data, src.strides, src.dtype, src.sizes);
      copy_views(dst, tmp, non_blocking);
      return;
    }
    void* stream = current_stream(src.device);
    tmp.data = static_cast<char*>(cuda_allocate(bytes, src.device, stream));
    struct FreeOnExit {
      void* ptr;
      std::size_t bytes;
      int device;
      void* stream;
      ~FreeOnExit() { (void)cuda_free(ptr, bytes, device, stream); }  // stream-ordered after the copies
    } release{tmp.data, bytes, src.device, stream};
    copy_views(tmp, src, false);
    copy_views(dst, tmp, non_blocking);
    return;
  }
  if (!dst.cuda && !src.cuda) {
    host_copy(dst.data, dst.strides, dst.dtype, src.data, src.strides, src.dtype, dst.sizes);
    return;
  }
  const int device = dst.cuda ? dst.device : src.device;
  DeviceSwitch on_device(device);
  auto stream = static_cast<cudaStream_t>(current_stream(device));
  if (dst.dtype != src.dtype || !memcpy2d_copy(dst, src, stream)) {
    staged_copy(dst, src, stream);
    return;
  }
  const bool host_involved = !dst.cuda || !src.cuda;
  const bool host_pinned = !dst.cuda ? dst.pinned : src.pinned;
  if (host_involved && (!non_blocking || !host_pinned)) {
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after host copy)");
  }
}

void zero_view(const View& dst) {
  const int64_t numel = checked_numel(dst.sizes);
  if (numel == 0) return;
  const std::size_t item = element_size(dst.dtype);
  const bool dense = is_non_overlapping_and_dense(dst.sizes, dst.strides);
  if (dense) {
    const std::size_t bytes = static_cast<std::size_t>(numel) * item;
    if (!dst.cuda) {
      std::memset(dst.data, 0, bytes);
      return;
    }
    DeviceSwitch on_device(dst.device);
    check_cuda(cudaMemsetAsync(dst.data, 0, bytes, static_cast<cudaStream_t>(current_stream(dst.device))),
               "cudaMemsetAsync");
    return;
  }
  // Non-dense: copy from a zero-filled contiguous host buffer (broadcast over nothing).
  HostBuffer zeros(static_cast<std::size_t>(numel) * item);
  std::memset(zeros.get(), 0, static_cast<std::size_t>(numel) * item);
  View src;
  src.data = zeros.get();
  src.sizes = dst.sizes;
  src.strides = contiguous_strides(dst.sizes);
  src.dtype = dst.dtype;
  copy_views(dst, src, false);  // synchronizes: the buffer dies at return
}

void read_single_element(const View& view, void* out) {
  const std::size_t item = element_size(view.dtype);
  if (!view.cuda) {
    std::memcpy(out, view.data, item);
    return;
  }
  DeviceSwitch on_device(view.device);
  auto stream = static_cast<cudaStream_t>(current_stream(view.device));
  check_cuda(cudaMemcpyAsync(out, view.data, item, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (item)");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (item)");
}

}  // namespace shim
}  // namespace aoti_cuda
