// Output delivery and bound outputs. See outputs.hpp.
#include "runtime/outputs.hpp"

#include <array>
#include <cstring>

#include "common/cuda.hpp"
#include "runtime/tensor_util.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::check_cuda;

std::string output_name(const MethodSpec& ms, std::size_t i) {
  return "method '" + ms.name + "' output " + std::to_string(i);
}

// Device->host copies of one call, through the slot's pinned output buffer
// (a few outputs are kept inline: no heap allocation on the common path).
class Downloads {
 public:
  explicit Downloads(RunState& run) : run_(run) {}

  /// Queues src (contiguous, on the device) -> dst (contiguous host memory of the same size).
  void add(const Tensor& src, void* dst) {
    const Item it{src.data(), dst, src.nbytes(), 0};
    if (n_ < inline_.size()) inline_[n_] = it;
    else overflow_.push_back(it);
    ++n_;
  }
  /// Queues every copy, waits once, copies out of the pinned buffer.
  void finish() {
    if (n_ == 0) return;
    std::size_t total = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      Item& it = at(i);
      it.offset = total;
      total += staging_piece(it.n);
    }
    char* pinned = static_cast<char*>(run_.slot.output_staging(total));
    auto stream = static_cast<cudaStream_t>(run_.stream);
    for (std::size_t i = 0; i < n_; ++i) {
      const Item& it = at(i);
      if (it.n == 0) continue;
      check_cuda(cudaMemcpyAsync(pinned + it.offset, it.src, it.n, cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync (output download)");
    }
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (output download)");
    for (std::size_t i = 0; i < n_; ++i) {
      const Item& it = at(i);
      if (it.n > 0) std::memcpy(it.dst, pinned + it.offset, it.n);
    }
  }

 private:
  struct Item {
    const void* src;
    void* dst;
    std::size_t n;
    std::size_t offset;
  };
  Item& at(std::size_t i) { return i < inline_.size() ? inline_[i] : overflow_[i - inline_.size()]; }
  RunState& run_;
  std::array<Item, 8> inline_{};
  std::vector<Item> overflow_;
  std::size_t n_ = 0;
};

// A new model-owned device tensor with t's shape, strides and dtype (the shim
// allocates it on the current stream).
Value new_device_output(RunState& run, const Tensor& t, std::size_t index) {
  AtenTensorHandle h = nullptr;
  if (aoti_torch_empty_strided(t.dim(), t.shape().data(), t.strides().data(), static_cast<int32_t>(t.dtype()),
                               aoti_torch_device_type_cuda(), run.device().index, &h) != AOTI_TORCH_SUCCESS) {
    throw Error(ErrorCode::kOutOfMemory, output_name(*run.method.spec, index) + ": allocating the result failed: " +
                                             aoti_cuda_shim_last_error());
  }
  return wrap_output(h, "method '" + run.method.spec->name + "'", index);
}

// Keeps a result's Value at its output's value index (finish_on_own_stream
// moves the frees of those off the slot's stream).
Tensor keep_output(RunState& run, Value v, std::size_t index) {
  const MethodSpec& ms = *run.method.spec;
  if (run.values.size() < ms.values.size()) run.values.resize(ms.values.size());
  Tensor t = v.tensor;
  run.values[static_cast<std::size_t>(ms.outputs[index].value_index)] = std::move(v);
  return t;
}

// new_device_output, filled from t on the run stream by one copy of the
// memory span t covers (graph outputs may be strided views; the copy keeps
// their layout).
Tensor fresh_device_copy(RunState& run, const Tensor& t, std::size_t index) {
  Value v = new_device_output(run, t, index);
  if (t.numel() > 0) {
    int64_t last = 0;  // offset of the last element, in elements (strides of model outputs are >= 0)
    for (std::size_t d = 0; d < t.shape().size(); ++d) last += (t.shape()[d] - 1) * t.strides()[d];
    const std::size_t span = static_cast<std::size_t>(last + 1) * element_size(t.dtype());
    check_cuda(cudaMemcpyAsync(v.tensor.data(), t.data(), span, cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(run.stream)),
               "cudaMemcpyAsync (graph output)");
  }
  return keep_output(run, std::move(v), index);
}

}  // namespace

Tensor fresh_device_output(RunState& run, const Tensor& like, std::size_t index) {
  return keep_output(run, new_device_output(run, like, index), index);
}

Value wrap_output(AtenTensorHandle h, const std::string& owner, std::size_t index) {
  Value v;
  wrap_output_into(v, h, owner, index);
  return v;
}

void wrap_output_into(Value& dst, AtenTensorHandle h, const std::string& owner, std::size_t index) {
  clear_value(dst);
  auto holder = own_handle(h);  // from here on the handle is released whatever happens
  void* data = nullptr;
  int64_t dim = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  int32_t dtype = 0, dev_type = 0, dev_index = 0;
  if (aoti_torch_get_data_ptr(h, &data) != AOTI_TORCH_SUCCESS || aoti_torch_get_dim(h, &dim) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_sizes(h, &sizes) != AOTI_TORCH_SUCCESS || aoti_torch_get_strides(h, &strides) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_dtype(h, &dtype) != AOTI_TORCH_SUCCESS || aoti_torch_get_device_type(h, &dev_type) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_index(h, &dev_index) != AOTI_TORCH_SUCCESS) {
    throw Error(ErrorCode::kModel, owner + " output " + std::to_string(index) +
                                       ": reading the output tensor failed: " + aoti_cuda_shim_last_error());
  }
  if (!is_valid_dtype(dtype) || dim < 0 || dim > 64) {
    throw Error(ErrorCode::kModel, owner + " output " + std::to_string(index) +
                                       ": the model returned a tensor with dtype code " + std::to_string(dtype) +
                                       " and " + std::to_string(dim) + " dimensions");
  }
  const Device dev = dev_type == aoti_torch_device_type_cuda() ? Device::cuda(dev_index) : Device::cpu();
  TensorSlot::assign(dst.tensor, data, dim, sizes, strides, static_cast<DType>(dtype), dev, std::move(holder));
  dst.handle = h;
}

void validate_bound_outputs(const MethodSpec& ms, const TargetDevice& target, const std::vector<Tensor>& bound) {
  if (bound.size() != ms.outputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, "method '" + ms.name + "' has " + std::to_string(ms.outputs.size()) +
                                                 " output(s), " + std::to_string(bound.size()) + " output tensor(s) given");
  }
  for (std::size_t i = 0; i < bound.size(); ++i) {
    const Tensor& t = bound[i];
    const TensorSpec& want = ms.outputs[i].tensor;
    auto fail = [&](const std::string& why) {
      return Error(ErrorCode::kInvalidArgument, output_name(ms, i) + ": " + why);
    };
    if (!t.defined()) throw fail("the output tensor is undefined");
    if (t.dtype() != want.dtype) {
      throw fail(std::string("dtype mismatch: the method produces ") + dtype_name(want.dtype) + ", the tensor is " +
                 dtype_name(t.dtype()));
    }
    if (t.shape().size() != want.sizes.size()) {
      throw fail("rank mismatch: the method produces " + std::to_string(want.sizes.size()) + "-d " +
                 shape_str(want.sizes) + ", the tensor is " + std::to_string(t.dim()) + "-d " + shape_str(t.shape()));
    }
    if (!want.dynamic && t.shape() != want.sizes) {
      throw fail("shape mismatch: the method produces " + shape_str(want.sizes) + ", the tensor is " + shape_str(t.shape()));
    }
    if (!t.is_contiguous()) throw fail("the output tensor must be contiguous");
    if (t.numel() > 0 && t.data() == nullptr) throw fail("null data");
    if (t.device().is_cuda() && t.device() != target.device) {
      throw fail("the tensor is on " + t.device().str() + "; outputs go to the host or to " + target.device.str());
    }
  }
}

std::vector<Tensor> deliver_outputs(RunState& run, const ProducedOutputs& produced, bool want_device, bool copy_device) {
  const MethodSpec& ms = *run.method.spec;
  const bool cuda = run.device().is_cuda();
  std::vector<Tensor> result;
  result.reserve(ms.outputs.size());
  Downloads downloads(run);
  for (std::size_t i = 0; i < ms.outputs.size(); ++i) {
    const Tensor& t = produced[i].tensor;
    if (!t.defined()) {
      throw Error(ErrorCode::kInternal, output_name(ms, i) + " (value " + std::to_string(ms.outputs[i].value_index) +
                                            ") was never produced");
    }
    if (!cuda || (t.device().is_cuda() && want_device && !copy_device) || (t.device().is_cpu() && !want_device)) {
      result.push_back(t);
    } else if (t.device().is_cuda() && want_device) {
      result.push_back(fresh_device_copy(run, t, i));
    } else if (t.device().is_cuda() && t.is_contiguous()) {
      result.push_back(Tensor::empty(t.shape(), t.dtype(), Device::cpu()));
      downloads.add(t, result.back().data());
    } else {
      result.push_back(t.to(want_device ? run.device() : Device::cpu(), run.stream));
    }
  }
  downloads.finish();
  return result;
}

void write_bound_outputs(RunState& run, const ProducedOutputs& produced, const std::vector<Tensor>& bound) {
  const MethodSpec& ms = *run.method.spec;
  Downloads downloads(run);
  auto stream = static_cast<cudaStream_t>(run.stream);
  for (std::size_t i = 0; i < ms.outputs.size(); ++i) {
    const Tensor& src = produced[i].tensor;
    const Tensor& dst = bound[i];
    if (!src.defined()) throw Error(ErrorCode::kInternal, output_name(ms, i) + " was never produced");
    if (src.shape() != dst.shape()) {
      throw Error(ErrorCode::kInvalidArgument, output_name(ms, i) + ": the call produced shape " +
                                                   shape_str(src.shape()) + ", the output tensor has " +
                                                   shape_str(dst.shape()));
    }
    if (src.nbytes() == 0 || src.data() == dst.data()) continue;
    if (!src.is_contiguous() && enqueue_device_copy(dst, src, run.stream)) {
      continue;  // re-strided on the device, stream-ordered
    }
    if (!src.is_contiguous() || (src.device().is_cpu() && dst.device().is_cpu())) {
      // strided, or host->host (CPU modules). The caller handed us these tensors
      // to write into; writing through the const reference spares a copy.
      const_cast<Tensor&>(dst).copy_from(src, run.stream);
    } else if (src.device().is_cuda() && dst.device().is_cpu()) {
      downloads.add(src, dst.data());
    } else {
      const cudaMemcpyKind kind = src.device().is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
      check_cuda(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), kind, stream), "cudaMemcpyAsync (bound output)");
    }
  }
  downloads.finish();
}

}  // namespace aoti_cuda::runtime
