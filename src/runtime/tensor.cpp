// aoti_cuda::Tensor: allocation, wrapping and copies between host and CUDA memory.
#include "aoti_cuda/tensor.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>

#include "aoti_cuda/error.hpp"
#include "common/fault_injection.hpp"
#include "runtime/cuda_util.hpp"
#include "runtime/tensor_util.hpp"

namespace aoti_cuda {
namespace runtime {

int64_t checked_numel(const std::vector<int64_t>& shape, std::size_t element_size, const char* what) {
  int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": dimension " + std::to_string(i) +
                                                   " is negative (" + std::to_string(shape[i]) + ")");
    }
    if (shape[i] != 0 && n > std::numeric_limits<int64_t>::max() / shape[i]) {
      throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": shape " + shape_str(shape) + " overflows");
    }
    n *= shape[i];
  }
  if (element_size != 0 && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(element_size)) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": shape " + shape_str(shape) + " is too large");
  }
  return n;
}

void copy_strided_host(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                       const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                       std::size_t es) {
  const std::size_t nd = shape.size();
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (nd == 0) {
    std::memcpy(d, s, es);
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1];
  const int64_t ds = dst_strides[nd - 1], ss = src_strides[nd - 1];
  while (true) {
    int64_t doff = 0, soff = 0;
    for (std::size_t k = 0; k + 1 < nd; ++k) {
      doff += idx[k] * dst_strides[k];
      soff += idx[k] * src_strides[k];
    }
    if (ds == 1 && ss == 1) {
      std::memcpy(d + doff * static_cast<int64_t>(es), s + soff * static_cast<int64_t>(es),
                  static_cast<std::size_t>(inner) * es);
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        std::memcpy(d + (doff + j * ds) * static_cast<int64_t>(es), s + (soff + j * ss) * static_cast<int64_t>(es), es);
      }
    }
    // advance the outer index (an odometer over all dims but the last)
    if (nd == 1) return;
    std::size_t k = nd - 1;
    while (true) {
      --k;
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
  }
}

std::vector<int64_t> strides_for_dim_order(const std::vector<int64_t>& sizes, const std::vector<std::uint8_t>& dim_order) {
  const std::size_t nd = sizes.size();
  bool valid = dim_order.size() == nd;
  std::vector<bool> seen(nd, false);
  for (std::size_t i = 0; valid && i < nd; ++i) {
    if (dim_order[i] >= nd || seen[dim_order[i]]) valid = false;
    else seen[dim_order[i]] = true;
  }
  if (!valid) return contiguous_strides(sizes);
  std::vector<int64_t> strides(nd);
  int64_t s = 1;
  for (std::size_t i = nd; i-- > 0;) {
    const std::size_t d = dim_order[i];
    strides[d] = s;
    s *= sizes[d] > 0 ? sizes[d] : 1;
  }
  return strides;
}

bool same_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& want) {
  if (strides.size() != shape.size() || want.size() != shape.size()) return false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return true;  // empty: any layout is the same
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1 && strides[i] != want[i]) return false;
  }
  return true;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

namespace {

// The lowest and highest element offsets a strided tensor touches (numel > 0).
void element_span(const Tensor& t, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = 0;
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    const int64_t reach = (t.shape()[i] - 1) * t.strides()[i];
    if (reach < 0) lo += reach; else hi += reach;
  }
}

// Host memory with 64-byte alignment, freed with std::free.
std::shared_ptr<void> host_alloc(std::size_t nbytes) {
  const std::size_t rounded = (nbytes + 63) / 64 * 64;
  void* p = nullptr;
  if (testing::FaultInjector::should_fail(testing::FaultKind::kHostAlloc) ||
      posix_memalign(&p, 64, rounded == 0 ? 64 : rounded) != 0 || p == nullptr) {
    throw Error(ErrorCode::kOutOfMemory, "host allocation of " + std::to_string(nbytes) + " bytes failed");
  }
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// cudaMemcpyAsync on `stream` then wait for it (the copy is complete on return).
void copy_bytes(void* dst, const void* src, std::size_t n, void* stream) {
  if (n == 0) return;
  check_cuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

}  // namespace
}  // namespace runtime

using runtime::check_cuda;

int64_t Tensor::numel() const noexcept {
  if (!defined_) return 0;  // an empty shape means 0-d (one element) only for a defined tensor
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

std::size_t Tensor::nbytes() const noexcept {
  return static_cast<std::size_t>(numel()) * element_size(dtype_);
}

bool Tensor::is_contiguous() const noexcept {
  return runtime::same_layout(shape_, strides_, contiguous_strides(shape_));
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, Device device, bool pinned) {
  const std::size_t es = element_size(dtype);
  if (es == 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::empty: invalid dtype code " + std::to_string(static_cast<int>(dtype)));
  const int64_t n = runtime::checked_numel(shape, es, "Tensor::empty");
  const std::size_t nbytes = static_cast<std::size_t>(n) * es;
  Tensor t;
  if (device.is_cpu() && !pinned) {
    t.owner_ = runtime::host_alloc(nbytes);
  } else if (device.is_cpu()) {
    void* p = nullptr;
    check_cuda(cudaMallocHost(&p, nbytes == 0 ? 64 : nbytes), "cudaMallocHost (pinned host tensor)");
    t.owner_ = std::shared_ptr<void>(p, [](void* q) { (void)cudaFreeHost(q); });
  } else {
    if (device.index < 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::empty: negative CUDA device index");
    runtime::DeviceGuard guard(device.index);
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, nbytes == 0 ? 256 : nbytes),
               ("cudaMalloc of " + std::to_string(nbytes) + " bytes on " + device.str()).c_str());
    const int index = device.index;
    t.owner_ = std::shared_ptr<void>(p, [index](void* q) {
      int prev = -1;
      const bool got = cudaGetDevice(&prev) == cudaSuccess;
      if (got && prev != index) (void)cudaSetDevice(index);
      (void)cudaFree(q);
      if (got && prev != index) (void)cudaSetDevice(prev);
    });
  }
  t.data_ = t.owner_.get();
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.defined_ = true;
  return t;
}

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                         std::vector<int64_t> strides) {
  return from_blob(data, std::move(shape), dtype, device, nullptr, std::move(strides));
}

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dtype, Device device,
                         std::shared_ptr<void> owner, std::vector<int64_t> strides) {
  const std::size_t es = element_size(dtype);
  if (es == 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::from_blob: invalid dtype code " + std::to_string(static_cast<int>(dtype)));
  const int64_t n = runtime::checked_numel(shape, es, "Tensor::from_blob");
  if (!strides.empty() && strides.size() != shape.size()) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::from_blob: " + std::to_string(strides.size()) +
                                                 " strides for a " + std::to_string(shape.size()) + "-d shape");
  }
  if (data == nullptr && n != 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::from_blob: null data for a non-empty tensor");
  if (device.is_cuda() && device.index < 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::from_blob: negative CUDA device index");
  Tensor t;
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.strides_ = strides.empty() ? contiguous_strides(shape) : std::move(strides);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.defined_ = true;
  return t;
}

Tensor Tensor::to(Device device, void* stream, bool pinned) const {
  if (!defined_) throw Error(ErrorCode::kInvalidArgument, "Tensor::to: the tensor is undefined");
  Tensor out = empty(shape_, dtype_, device, pinned && device.is_cpu());
  out.copy_from(*this, stream);
  return out;
}

void Tensor::copy_from(const Tensor& src, void* stream) {
  using runtime::copy_bytes;
  if (!defined_ || !src.defined_) throw Error(ErrorCode::kInvalidArgument, "Tensor::copy_from: undefined tensor");
  if (src.dtype_ != dtype_) {
    throw Error(ErrorCode::kInvalidArgument, std::string("Tensor::copy_from: dtype mismatch (destination ") +
                                                 dtype_name(dtype_) + ", source " + dtype_name(src.dtype_) + ")");
  }
  if (src.shape_ != shape_) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::copy_from: shape mismatch (destination " +
                                                 runtime::shape_str(shape_) + ", source " + runtime::shape_str(src.shape_) + ")");
  }
  const std::size_t es = element_size(dtype_);
  const std::size_t n = nbytes();
  if (n == 0) return;
  const bool src_c = src.is_contiguous(), dst_c = is_contiguous();

  if (device_.is_cpu() && src.device_.is_cpu()) {
    if (src_c && dst_c) std::memmove(data_, src.data_, n);
    else runtime::copy_strided_host(data_, strides_, src.data_, src.strides_, shape_, es);
    return;
  }
  if (src_c && dst_c) {  // fast path: one DMA
    copy_bytes(data_, src.data_, n, stream);
    return;
  }

  // Strided copy involving device memory: bring the source to a host layout we
  // can index, re-stride on the host, then write the destination back.
  std::shared_ptr<void> src_keep;
  const char* src_base = static_cast<const char*>(src.data_);  // address of element 0
  if (src.device_.is_cuda()) {
    int64_t lo, hi;
    runtime::element_span(src, lo, hi);
    const std::size_t span = static_cast<std::size_t>(hi - lo + 1) * es;
    src_keep = runtime::host_alloc(span);
    copy_bytes(src_keep.get(), static_cast<const char*>(src.data_) + lo * static_cast<int64_t>(es), span, stream);
    src_base = static_cast<const char*>(src_keep.get()) - lo * static_cast<int64_t>(es);
  }
  if (device_.is_cpu()) {
    runtime::copy_strided_host(data_, strides_, src_base, src.strides_, shape_, es);
    return;
  }
  if (dst_c) {
    auto staged = runtime::host_alloc(n);
    runtime::copy_strided_host(staged.get(), strides_, src_base, src.strides_, shape_, es);
    copy_bytes(data_, staged.get(), n, stream);
    return;
  }
  // Non-contiguous device destination: read-modify-write its span so bytes
  // between its elements are preserved.
  int64_t lo, hi;
  runtime::element_span(*this, lo, hi);
  const std::size_t span = static_cast<std::size_t>(hi - lo + 1) * es;
  auto staged = runtime::host_alloc(span);
  char* dev_lo = static_cast<char*>(data_) + lo * static_cast<int64_t>(es);
  copy_bytes(staged.get(), dev_lo, span, stream);
  runtime::copy_strided_host(static_cast<char*>(staged.get()) - lo * static_cast<int64_t>(es), strides_, src_base,
                             src.strides_, shape_, es);
  copy_bytes(dev_lo, staged.get(), span, stream);
}

}  // namespace aoti_cuda
