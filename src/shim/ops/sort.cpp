// Shim operator: aoti_torch_cuda_sort_stable (torch.sort(stable=...), which the generated
// code of a program that sorts on the GPU calls, e.g. top-p sampling exported by ExecuTorch
// 1.3+). Validation, outputs and dispatch here; the kernels are in sort.cu.
#include <cstdint>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/copy_engine.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/sort.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kInt64 = static_cast<int32_t>(DType::kInt64);

void sort_stable(AtenTensorHandle self, int64_t dim, bool descending, AtenTensorHandle* ret_values,
                 AtenTensorHandle* ret_indices) {
  const AtenTensorOpaque& x = *checked_defined(self, "self");
  const int64_t ndim = x.dim();
  const int64_t rank = ndim == 0 ? 1 : ndim;  // a 0-d tensor sorts like one element along dim 0 or -1
  expect(dim >= -rank && dim < rank, [&] {
    return "dim " + std::to_string(dim) + " is out of range for a " + std::to_string(ndim) + "-d tensor";
  });
  if (dim < 0) dim += rank;
  expect(sortop::supported(x.dtype), [&] {
    return std::string("self must be bool, an integer type, float16, bfloat16, float32 or float64, got ") +
           dtype_name(x.dtype);
  });
  if (!x.storage->is_cuda()) throw_invalid("self must be a CUDA tensor, got " + x.describe());
  const int device = x.storage->device_index;
  const int64_t numel = x.numel();
  expect(numel <= sortop::kMaxElements,
         [&] { return "self has " + std::to_string(numel) + " elements; at most 2^31 - 1 can be sorted"; });

  sortop::Problem p;
  p.dtype = x.dtype;
  for (int64_t d = 0; d < ndim; ++d) {
    if (d < dim) p.outer *= x.sizes[d];
    if (d == dim) p.n = x.sizes[d];
    if (d > dim) p.inner *= x.sizes[d];
  }
  p.descending = descending;

  // Outputs: contiguous, self's sizes (what ATen returns for a contiguous self).
  HandleGuard values, indices;
  values.handle = new_empty_strided("sort_stable values", ndim, x.sizes.data(), nullptr, x.dtype,
                                    static_cast<int32_t>(DeviceType::kCUDA), device, false);
  indices.handle = new_empty_strided("sort_stable indices", ndim, x.sizes.data(), nullptr, kInt64,
                                     static_cast<int32_t>(DeviceType::kCUDA), device, false);
  if (numel > 0) {
    DeviceSwitch on_device(device);
    void* stream = current_stream(device);
    // The kernels read a contiguous input; any other layout is copied into one first.
    HandleGuard staged;
    const AtenTensorOpaque* in = &x;
    if (!x.is_contiguous()) {
      staged.handle = new_empty_strided("sort_stable input copy", ndim, x.sizes.data(), nullptr, x.dtype,
                                        static_cast<int32_t>(DeviceType::kCUDA), device, false);
      copy_views(view_of(*staged.handle), view_of(x), false);
      in = staged.handle;
    }
    p.in = in->data_ptr();
    p.values = values.handle->data_ptr();
    p.indices = reinterpret_cast<int64_t*>(indices.handle->data_ptr());
    const std::size_t bytes = sortop::scratch_bytes(numel, p.outer * p.inner);
    StreamScratch scratch(bytes, device, stream);
    common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr, "aoti_cuda sort_stable", stream);
    const int err = sortop::run(p, scratch.get(), bytes, stream);
    timed.done(err == 0);
    if (err != 0) throw_cuda_error(err, "sort_stable kernels");
  }
  *ret_values = values.release();
  *ret_indices = indices.release();
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_sort_stable(AtenTensorHandle self, int32_t* stable, int64_t dim, int32_t descending,
                                           AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  (void)stable;  // always stable: a stable order is a valid answer for stable=False too
  return aoti_cuda::shim::shim_call(__func__, [&] {
    AtenTensorHandle& values = aoti_cuda::shim::out_param(ret0, "ret0");
    AtenTensorHandle& indices = aoti_cuda::shim::out_param(ret1, "ret1");
    values = nullptr;
    indices = nullptr;
    aoti_cuda::shim::sort_stable(self, dim, descending != 0, &values, &indices);
  });
}

}  // extern "C"
