// Shim operator aoti_torch_cuda_aoti_cuda_fused_linear (work in progress: its kernel has not run on a GPU yet), the C
// shim of the custom operator aoti_cuda::aoti_cuda_fused_linear (tools/export/llm/fused_linear_op.py). Validation
// and the output here; the kernel is in fused_linear.cu.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/fused_linear.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kFloat16 = static_cast<int32_t>(DType::kFloat16);

// An optional operand: null pointer (absent) or the address of a defined handle.
const AtenTensorOpaque* optional_operand(AtenTensorHandle* h, const char* name) {
  if (h == nullptr) return nullptr;
  return checked_defined(*h, name);
}

// Rows of a tensor whose last dimension is unit-stride and whose leading dimensions collapse into one row stride.
// Returns false when they do not.
bool rows_of(const AtenTensorOpaque& t, int64_t* rows, int64_t* row_stride) {
  const int64_t d = t.dim();
  if (d < 1 || (t.strides[d - 1] != 1 && t.sizes[d - 1] > 1)) return false;
  *rows = 1;
  *row_stride = t.sizes[d - 1];
  int64_t expected = -1;
  for (int64_t i = d - 2; i >= 0; --i) {
    if (t.sizes[i] == 1) continue;
    if (expected < 0) {
      *row_stride = t.strides[i];
      expected = t.strides[i] * t.sizes[i];
    } else if (t.strides[i] != expected) {
      return false;
    } else {
      expected *= t.sizes[i];
    }
    *rows *= t.sizes[i];
  }
  return true;
}

void fused_linear_call(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, int32_t swiglu,
                       AtenTensorHandle weight, AtenTensorHandle* residual, AtenTensorHandle* ret0) {
  AtenTensorHandle& out_handle = out_param(ret0, "ret0 (the output)");
  out_handle = nullptr;
  const AtenTensorOpaque& xt = *checked_defined(x, "x");
  const AtenTensorOpaque& wt = *checked_defined(weight, "weight");
  const AtenTensorOpaque* nt = optional_operand(norm_weight, "norm_weight");
  const AtenTensorOpaque* rt = optional_operand(residual, "residual");
  expect(xt.dtype == kBFloat16 || xt.dtype == kFloat16,
         [&] { return "x must be bfloat16 or float16, got " + xt.describe(); });
  for (const AtenTensorOpaque* t : {&wt, nt, rt}) {
    if (t == nullptr) continue;
    expect(t->dtype == xt.dtype, [&] { return "every operand must have x's dtype, got " + t->describe(); });
  }
  fused_linear::Problem p;
  expect(rows_of(xt, &p.rows, &p.x_row_stride),
         [&] { return "x must have a unit-stride last dimension and rows of one stride, got " + xt.describe(); });
  const int64_t width = xt.dim() >= 1 ? xt.sizes[xt.dim() - 1] : 0;
  p.swiglu = swiglu != 0;
  expect(!p.swiglu || width % 2 == 0,
         [&] { return "with swiglu, x's last dimension (gate, then up) must be even, got " + xt.describe(); });
  p.k = p.swiglu ? width / 2 : width;
  expect(wt.dim() == 2 && wt.sizes[1] == p.k && (wt.strides[1] == 1 || wt.sizes[1] == 1), [&] {
    return "weight must be [N, " + std::to_string(p.k) + "] with unit-stride rows" +
           (p.swiglu ? " (swiglu halves x's width)" : "") + ", got " + wt.describe();
  });
  p.n = wt.sizes[0];
  p.weight_row_stride = wt.strides[0];
  expect(p.k >= 8 && p.k <= fused_linear::kMaxK && p.k % 8 == 0 && p.weight_row_stride % 8 == 0 &&
             reinterpret_cast<uintptr_t>(wt.data_ptr()) % 16 == 0,
         [&] {
           return "the kernel takes K a multiple of 8 in [8, " + std::to_string(fused_linear::kMaxK) +
                  "] and 16-byte aligned weight rows, got K " + std::to_string(p.k) + ", weight " + wt.describe();
         });
  expect(p.rows <= 65535, [&] { return "too many rows for the kernel's grid: " + std::to_string(p.rows); });
  if (nt != nullptr) {
    expect(nt->numel() == p.k && nt->dim() == 1 && (nt->strides[0] == 1 || p.k == 1),
           [&] { return "norm_weight must be a contiguous [" + std::to_string(p.k) + "], got " + nt->describe(); });
    expect(std::isfinite(eps) && eps >= 0, [&] { return "eps must be finite and >= 0, got " + std::to_string(eps); });
  }
  if (rt != nullptr) {
    int64_t rows = 0;
    expect(rt->dim() == xt.dim() && rt->sizes[rt->dim() - 1] == p.n && rows_of(*rt, &rows, &p.residual_row_stride) &&
               rows == p.rows,
           [&] {
             return "residual must have x's leading sizes and " + std::to_string(p.n) +
                    " columns, unit-stride, got " + rt->describe() + " for x " + xt.describe();
           });
  }
  expect(xt.storage->is_cuda(), [&] { return "x must be a CUDA tensor, got " + xt.describe(); });
  const int device = xt.storage->device_index;
  for (const AtenTensorOpaque* t : {&wt, nt, rt}) {
    if (t == nullptr) continue;
    expect(t->storage->is_cuda() && t->storage->device_index == device,
           [&] { return "every operand must be on x's device (cuda:" + std::to_string(device) + "), got " + t->describe(); });
  }
  p.x = xt.data_ptr();
  p.weight = wt.data_ptr();
  p.norm_weight = nt != nullptr ? nt->data_ptr() : nullptr;
  p.eps = static_cast<float>(eps);
  p.residual = rt != nullptr ? rt->data_ptr() : nullptr;
  p.fp16 = xt.dtype == kFloat16;

  HandleGuard out;
  std::vector<int64_t> sizes(xt.sizes.begin(), xt.sizes.end());
  sizes.back() = p.n;
  out.handle = new_empty_strided("fused linear output", static_cast<int64_t>(sizes.size()), sizes.data(), nullptr,
                                 xt.dtype, static_cast<int32_t>(aoti_cuda::DeviceType::kCUDA), device, false);
  p.out = out.handle->data_ptr();
  DeviceSwitch on_device(device);
  const int err = fused_linear::launch(p, current_stream(device));
  if (err != 0) throw_cuda_error(err, "fused linear kernel launch");
  out_handle = out.release();
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_aoti_cuda_fused_linear(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps,
                                                      int32_t swiglu, AtenTensorHandle weight,
                                                      AtenTensorHandle* residual, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__, [&] { fused_linear_call(x, norm_weight, eps, swiglu, weight, residual, ret0); });
}

}  // extern "C"
