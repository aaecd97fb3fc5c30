// aoti_cuda::Tensor: allocation, wrapping and copies between host and CUDA memory.
#include "aoti_cuda/tensor.hpp"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>

#include "aoti_cuda/error.hpp"
#include "common/cuda.hpp"
#include "common/host_memory.hpp"
#include "common/strided_copy.hpp"
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

void TensorSlot::reset(Tensor& t) noexcept {
  t.owner_.reset();
  t.data_ = nullptr;
  t.shape_.clear();
  t.strides_.clear();
  t.dtype_ = DType::kFloat32;
  t.device_ = Device::cpu();
  t.defined_ = false;
}

void TensorSlot::assign(Tensor& t, void* data, int64_t ndim, const int64_t* sizes, const int64_t* strides, DType dtype,
                        Device device, std::shared_ptr<void> owner) {
  t.shape_.assign(sizes, sizes + ndim);
  t.strides_.assign(strides, strides + ndim);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.dtype_ = dtype;
  t.device_ = device;
  t.defined_ = true;
}

bool row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) noexcept {
  if (strides.size() != shape.size()) return false;
  int64_t expect = 1;
  bool empty = false;
  bool dense = true;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) empty = true;
    if (shape[i] > 1 && strides[i] != expect) dense = false;
    expect *= shape[i];
  }
  return dense || empty;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

bool enqueue_device_copy(const Tensor& dst, const Tensor& src, void* stream) {
  if (!dst.defined() || !src.defined() || !dst.device().is_cuda() || dst.device() != src.device() ||
      dst.dtype() != src.dtype() || dst.shape() != src.shape()) {
    return false;
  }
  common::DeviceGuard on_device(dst.device().index);
  return common::copy_by_kernel(dst.data(), dst.strides().data(), src.data(), src.strides().data(),
                                dst.shape().data(), static_cast<int>(dst.shape().size()), element_size(dst.dtype()),
                                stream);
}

namespace {

common::View view_of(const Tensor& t) {
  common::View v;
  v.data = static_cast<char*>(t.data());
  v.sizes = t.shape();
  v.strides = t.strides();
  v.dtype = static_cast<int32_t>(t.dtype());
  v.cuda = t.device().is_cuda();
  v.device = t.device().is_cuda() ? t.device().index : 0;
  return v;
}

bool has_negative_stride(const Tensor& t) {
  for (int64_t s : t.strides()) {
    if (s < 0) return true;
  }
  return false;
}

}  // namespace
}  // namespace runtime

using common::check_cuda;

int64_t Tensor::numel() const noexcept {
  if (!defined_) return 0;  // an empty shape means 0-d (one element) only for a defined tensor
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

std::size_t Tensor::nbytes() const noexcept {
  return static_cast<std::size_t>(numel()) * element_size(dtype_);
}

bool Tensor::is_contiguous() const noexcept { return runtime::row_major(shape_, strides_); }

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, Device device, bool pinned) {
  const std::size_t es = element_size(dtype);
  if (es == 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::empty: invalid dtype code " + std::to_string(static_cast<int>(dtype)));
  const int64_t n = runtime::checked_numel(shape, es, "Tensor::empty");
  const std::size_t nbytes = static_cast<std::size_t>(n) * es;
  Tensor t;
  if (device.is_cpu() && !pinned) {
    t.owner_ = common::host_shared(nbytes);
  } else if (device.is_cpu()) {
    void* p = nullptr;
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMallocHost(&p, nbytes == 0 ? 64 : nbytes)), "cudaMallocHost (pinned host tensor)");
    t.owner_ = std::shared_ptr<void>(p, [](void* q) { (void)cudaFreeHost(q); });
  } else {
    if (device.index < 0) throw Error(ErrorCode::kInvalidArgument, "Tensor::empty: negative CUDA device index");
    common::DeviceGuard guard(device.index);
    void* p = nullptr;
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMalloc(&p, nbytes == 0 ? 256 : nbytes)),
               ("cudaMalloc of " + std::to_string(nbytes) + " bytes on " + device.str()).c_str());
    const int index = device.index;
    t.owner_ = std::shared_ptr<void>(p, [index](void* q) {
      common::DeviceGuard on_device(index, common::DeviceGuard::OnFailure::kIgnore);
      if (cudaFree(q) != cudaSuccess) (void)cudaGetLastError();
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

Tensor Tensor::from_blob(const void* data, std::vector<int64_t> shape, DType dtype, Device device,
                         std::vector<int64_t> strides) {
  return from_blob(data, std::move(shape), dtype, device, nullptr, std::move(strides));
}

Tensor Tensor::from_blob(const void* data, std::vector<int64_t> shape, DType dtype, Device device,
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
  t.data_ = const_cast<void*>(data);  // Tensor has no const flavour; see from_blob's contract
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
  if (!defined_ || !src.defined_) throw Error(ErrorCode::kInvalidArgument, "Tensor::copy_from: undefined tensor");
  if (src.dtype_ != dtype_) {
    throw Error(ErrorCode::kInvalidArgument, std::string("Tensor::copy_from: dtype mismatch (destination ") +
                                                 dtype_name(dtype_) + ", source " + dtype_name(src.dtype_) + ")");
  }
  if (src.shape_ != shape_) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::copy_from: shape mismatch (destination " +
                                                 runtime::shape_str(shape_) + ", source " + runtime::shape_str(src.shape_) + ")");
  }
  if (nbytes() == 0) return;
  const bool cuda = device_.is_cuda() || src.device_.is_cuda();
  if (!cuda && is_contiguous() && src.is_contiguous()) {  // the common host case, without building views
    std::memmove(data(), src.data(), nbytes());
    return;
  }
  if (cuda && (runtime::has_negative_stride(*this) || runtime::has_negative_stride(src))) {
    throw Error(ErrorCode::kInvalidArgument, "Tensor::copy_from: negative strides are only supported for host copies");
  }
  // The low layer's engine (2-D memcpy fast path, host staging otherwise).
  // Host memory is synchronized by the engine; a device-to-device copy is
  // only enqueued there, and this call promises a completed copy.
  common::copy_views(runtime::view_of(*this), runtime::view_of(src), /*non_blocking=*/false, stream);
  if (device_.is_cuda() && src.device_.is_cuda()) {
    common::DeviceGuard on_device(device_.index);
    check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))), "cudaStreamSynchronize (Tensor::copy_from)");
  }
}

}  // namespace aoti_cuda
