// Shim operator aoti_torch_cuda_aoti_cuda_argmax, the C shim of the custom operator aoti_cuda::aoti_cuda_argmax
// (tools/export/llm/argmax_op.py): validation and the output here, the kernel in argmax.cu.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/argmax.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

void argmax_call(AtenTensorHandle x_handle, AtenTensorHandle* ret0) {
  out_param(ret0, "ret0 (the output)") = nullptr;
  const AtenTensorOpaque& x = *checked_defined(x_handle, "x");
  argmax::Problem p;
  switch (static_cast<DType>(x.dtype)) {
    case DType::kBFloat16: p.dtype = argmax::Dtype::kBFloat16; break;
    case DType::kFloat16: p.dtype = argmax::Dtype::kFloat16; break;
    case DType::kFloat32: p.dtype = argmax::Dtype::kFloat32; break;
    default: throw_invalid("x must be bfloat16, float16 or float32, got " + x.describe());
  }
  expect(x.dim() >= 1, [&] { return "x must have at least one dimension (the one reduced), got " + x.describe(); });
  p.n = x.sizes[x.dim() - 1];
  expect(p.n >= 1 && p.n < argmax::kMaxN, [&] {
    return "x's last dimension (the one reduced) must hold 1 to " + std::to_string(argmax::kMaxN - 1) +
           " elements, got " + x.describe();
  });
  expect(unit_stride_rows(x, &p.rows, &p.row_stride), [&] {
    return "x must have a unit-stride last dimension and leading dimensions of one row stride, got " + x.describe();
  });
  expect(p.rows <= 0x7fffffff, [&] { return "too many rows for the kernel's grid: " + std::to_string(p.rows); });
  expect(x.storage->is_cuda(), [&] { return "x must be a CUDA tensor, got " + x.describe(); });
  const int device = x.storage->device_index;

  // x's sizes with the last one 1 (keepdim), contiguous int64.
  HandleGuard out;
  std::vector<int64_t> sizes(x.sizes.begin(), x.sizes.end());
  sizes.back() = 1;
  out.handle = new_empty_strided("argmax output", static_cast<int64_t>(sizes.size()), sizes.data(), nullptr,
                                 static_cast<int32_t>(DType::kInt64), static_cast<int32_t>(DeviceType::kCUDA), device,
                                 false);
  p.x = x.data_ptr();
  p.out = reinterpret_cast<int64_t*>(out.handle->data_ptr());
  DeviceSwitch on_device(device);
  void* stream = current_stream(device);
  common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr, "aoti_cuda argmax", stream);
  const int err = argmax::launch(p, stream);
  timed.done(err == 0);
  if (err != 0) throw_cuda_error(err, "argmax kernel launch");
  *ret0 = out.release();
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_aoti_cuda_argmax(AtenTensorHandle x, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__, [&] { argmax_call(x, ret0); });
}

}  // extern "C"
