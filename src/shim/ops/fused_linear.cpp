// Shim operators aoti_torch_cuda_aoti_cuda_fused_linear and aoti_torch_cuda_aoti_cuda_fused_linear_int4, the C shims
// of the custom operators aoti_cuda::aoti_cuda_fused_linear(_int4) (tools/export/llm/fused_linear_op.py). Validation
// and the output here; the kernels are in fused_linear.cu (bf16 / fp16) and weight_int4pack_gemv.cu (int4).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/env.hpp"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/fused_linear.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kFloat16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kInt32 = static_cast<int32_t>(DType::kInt32);

// An optional operand: null pointer (absent) or the address of a defined handle.
const AtenTensorOpaque* optional_operand(AtenTensorHandle* h, const char* name) {
  if (h == nullptr) return nullptr;
  return checked_defined(*h, name);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// AOTI_CUDA_INT4_FUSED_WARPS=8 (kernel tuning only, docs/configuration.md): Int4Problem::small_blocks for every
// call, so that a whole model can be timed both ways. Read once per process.
bool int4_small_blocks() {
  static const bool small = env_integer_or_warn("AOTI_CUDA_INT4_FUSED_WARPS", 8, 16).value_or(16) < 16;
  return small;
}

// What both forms check the same way (the callers reset *ret0 first): x's rows, the optional norm weight and
// residual, the devices; then the output.
struct Operands {
  const AtenTensorOpaque& x;
  const AtenTensorOpaque* norm;
  const AtenTensorOpaque* residual;
  int64_t rows = 0, x_row_stride = 0, k = 0, residual_row_stride = 0;
  int device = 0;

  Operands(AtenTensorHandle x_handle, AtenTensorHandle* norm_weight, AtenTensorHandle* residual_handle)
      : x(*checked_defined(x_handle, "x")),
        norm(optional_operand(norm_weight, "norm_weight")),
        residual(optional_operand(residual_handle, "residual")) {
    expect(unit_stride_rows(x, &rows, &x_row_stride),
           [&] { return "x must have a unit-stride last dimension and rows of one stride, got " + x.describe(); });
    k = x.sizes[x.dim() - 1];
    expect(k >= 8 && k % 8 == 0 && (rows == 1 || x_row_stride % 8 == 0) && aligned16(x.data_ptr()), [&] {
      return "x's last dimension must be a multiple of 8 (at least 8), its rows 16-byte aligned, got " + x.describe();
    });
  }

  // The checks that need N: norm weight, eps, residual [..., n_out], every operand's dtype and device.
  void check(double eps, int64_t n_out, std::initializer_list<const AtenTensorOpaque*> others) {
    if (norm != nullptr) {
      expect(norm->numel() == k && norm->dim() == 1 && (norm->strides[0] == 1 || k == 1) && aligned16(norm->data_ptr()),
             [&] {
               return "norm_weight must be a contiguous, 16-byte aligned [" + std::to_string(k) + "], got " +
                      norm->describe();
             });
      expect(std::isfinite(eps) && eps >= 0, [&] { return "eps must be finite and >= 0, got " + std::to_string(eps); });
    }
    if (residual != nullptr) {
      int64_t residual_rows = 0;
      expect(residual->dim() == x.dim() && residual->sizes[residual->dim() - 1] == n_out &&
                 unit_stride_rows(*residual, &residual_rows, &residual_row_stride) && residual_rows == rows,
             [&] {
               return "residual must have x's leading sizes and " + std::to_string(n_out) +
                      " columns, unit-stride, got " + residual->describe() + " for x " + x.describe();
             });
    }
    for (const AtenTensorOpaque* t : {norm, residual}) {
      if (t == nullptr) continue;
      expect(t->dtype == x.dtype, [&] { return "norm_weight and residual must have x's dtype, got " + t->describe(); });
    }
    expect(x.storage->is_cuda(), [&] { return "x must be a CUDA tensor, got " + x.describe(); });
    device = x.storage->device_index;
    auto on_x_device = [&](const AtenTensorOpaque* t) {
      if (t == nullptr) return;
      expect(t->storage->is_cuda() && t->storage->device_index == device, [&] {
        return "every operand must be on x's device (cuda:" + std::to_string(device) + "), got " + t->describe();
      });
    };
    for (const AtenTensorOpaque* t : others) on_x_device(t);
    on_x_device(norm);
    on_x_device(residual);
  }

  // Allocates the output (x's leading sizes, n_out columns), launches (timed as `label` when kernels are
  // profiled), and hands the output over.
  template <typename Launch>
  void run(int64_t n_out, AtenTensorHandle* ret0, const char* label, const char* what, Launch launch) {
    HandleGuard out;
    std::vector<int64_t> sizes(x.sizes.begin(), x.sizes.end());
    sizes.back() = n_out;
    out.handle = new_empty_strided("fused linear output", static_cast<int64_t>(sizes.size()), sizes.data(), nullptr,
                                   x.dtype, static_cast<int32_t>(aoti_cuda::DeviceType::kCUDA), device, false);
    DeviceSwitch on_device(device);
    void* stream = current_stream(device);
    common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr, label, stream);
    const int err = launch(out.handle->data_ptr(), stream);
    timed.done(err == 0);
    if (err != 0) throw_cuda_error(err, what);
    *ret0 = out.release();
  }
};

void fused_linear_call(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, int32_t swiglu,
                       AtenTensorHandle weight, AtenTensorHandle* residual, AtenTensorHandle* ret0) {
  out_param(ret0, "ret0 (the output)") = nullptr;
  Operands o(x, norm_weight, residual);
  const AtenTensorOpaque& wt = *checked_defined(weight, "weight");
  expect(o.x.dtype == kBFloat16 || o.x.dtype == kFloat16,
         [&] { return "x must be bfloat16 or float16, got " + o.x.describe(); });
  expect(wt.dtype == o.x.dtype, [&] { return "weight must have x's dtype, got " + wt.describe(); });
  fused_linear::Problem p;
  p.rows = o.rows;
  p.x_row_stride = o.x_row_stride;
  p.k = o.k;
  p.swiglu = swiglu != 0;
  expect(wt.dim() == 2 && wt.sizes[1] == p.k && (wt.strides[1] == 1 || wt.sizes[1] == 1),
         [&] { return "weight must be [N, " + std::to_string(p.k) + "] with unit-stride rows, got " + wt.describe(); });
  p.n = wt.sizes[0];
  p.weight_row_stride = wt.strides[0];
  expect(!p.swiglu || p.n % 2 == 0, [&] {
    return "with swiglu, weight's rows (the gate projection's, then the up projection's) must be even in number, "
           "got " + wt.describe();
  });
  expect(p.k <= fused_linear::kMaxK && p.weight_row_stride % 8 == 0 && aligned16(wt.data_ptr()), [&] {
    return "the kernel takes K up to " + std::to_string(fused_linear::kMaxK) +
           " and 16-byte aligned weight rows, got weight " + wt.describe();
  });
  expect(p.rows <= 65535, [&] { return "too many rows for the kernel's grid: " + std::to_string(p.rows); });
  const int64_t n_out = p.swiglu ? p.n / 2 : p.n;
  o.check(eps, n_out, {&wt});
  p.x = o.x.data_ptr();
  p.weight = wt.data_ptr();
  p.norm_weight = o.norm != nullptr ? o.norm->data_ptr() : nullptr;
  p.eps = static_cast<float>(eps);
  p.residual = o.residual != nullptr ? o.residual->data_ptr() : nullptr;
  p.residual_row_stride = o.residual_row_stride;
  p.fp16 = o.x.dtype == kFloat16;
  p.weights_early = is_program_constant(wt);  // with dependent launch: loaded while the previous kernel ends
  p.norm_after = fused_linear::norm_after_enabled();
  o.run(n_out, ret0, "aoti_cuda fused linear", "fused linear kernel launch", [&](void* out, void* stream) {
    p.out = out;
    return fused_linear::launch(p, stream, multiprocessor_count(o.device));
  });
}

void fused_linear_int4_call(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, int32_t swiglu,
                            AtenTensorHandle qdata, AtenTensorHandle scale_and_zero, int64_t group_size, int64_t n,
                            AtenTensorHandle* residual, AtenTensorHandle* ret0) {
  out_param(ret0, "ret0 (the output)") = nullptr;
  Operands o(x, norm_weight, residual);
  const AtenTensorOpaque& qt = *checked_defined(qdata, "qdata");
  const AtenTensorOpaque& st = *checked_defined(scale_and_zero, "scale_and_zero");
  expect(o.x.dtype == kBFloat16, [&] { return "x must be bfloat16 (the int4 form's dtype), got " + o.x.describe(); });
  expect(qt.dtype == kInt32 && qt.dim() == 4 && qt.is_contiguous() && qt.sizes[2] == 32 &&
             (qt.sizes[3] == 1 || qt.sizes[3] == 2 || qt.sizes[3] == 4) && aligned16(qt.data_ptr()),
         [&] {
           return "qdata must be a contiguous int32 [N/8, K/(innerKTiles*16), 32, innerKTiles/2] (innerKTiles 2, 4 "
                  "or 8; torchao's tile_packed_to_4d), got " + qt.describe();
         });
  fused_linear::Int4Problem p;
  p.inner_k_tiles = static_cast<int>(qt.sizes[3] * 2);
  p.k = qt.sizes[1] * 16 * p.inner_k_tiles;
  p.n_packed = qt.sizes[0] * 8;
  p.group = group_size;
  expect(group_size == 32 || group_size == 64 || group_size == 128 || group_size == 256,
         [&] { return "group_size must be 32, 64, 128 or 256, got " + std::to_string(group_size); });
  expect(p.k % group_size == 0 && o.k <= p.k, [&] {
    return "qdata " + qt.describe() + " packs K = " + std::to_string(p.k) +
           ", which must be a multiple of group_size " +
           std::to_string(group_size) + " and at least x's " + std::to_string(o.k);
  });
  expect(st.dtype == kBFloat16 && st.dim() == 3 && st.is_contiguous() && st.sizes[0] == p.k / group_size &&
             st.sizes[1] == p.n_packed && st.sizes[2] == 2,
         [&] {
           return "scale_and_zero must be a contiguous bfloat16 [" + std::to_string(p.k / group_size) + ", " +
                  std::to_string(p.n_packed) + ", 2], got " + st.describe();
         });
  p.swiglu = swiglu != 0;
  expect(n >= 1 && n <= p.n_packed && (!p.swiglu || n % 32 == 0), [&] {
    return "n (the weight's output features) must be in [1, " + std::to_string(p.n_packed) + "]" +
           (p.swiglu ? " and a multiple of 32 (gate and up halves of whole n-tile pairs)" : "") + ", got " +
           std::to_string(n);
  });
  expect(p.k < (int64_t{1} << 30) && p.n_packed < (int64_t{1} << 30) && o.rows <= int64_t{65535} * 8,
         [&] { return "the kernel takes K and N below 2^30 and at most 524280 rows, got " + o.x.describe(); });
  const int64_t n_out = p.swiglu ? n / 2 : n;
  o.check(eps, n_out, {&qt, &st});
  p.x = o.x.data_ptr();
  p.x_row_stride = o.x_row_stride;
  p.k_x = o.k;
  p.norm_weight = o.norm != nullptr ? o.norm->data_ptr() : nullptr;
  p.eps = static_cast<float>(eps);
  p.qdata = qt.data_ptr();
  p.scale_and_zero = st.data_ptr();
  p.residual = o.residual != nullptr ? o.residual->data_ptr() : nullptr;
  p.residual_row_stride = o.residual_row_stride;
  p.rows = o.rows;
  p.n = n;
  p.weights_early = is_program_constant(qt) && is_program_constant(st);
  p.norm_early = o.norm != nullptr && is_program_constant(*o.norm);
  p.small_blocks = int4_small_blocks();
  p.norm_after = fused_linear::norm_after_enabled();
  o.run(n_out, ret0, "aoti_cuda fused linear (int4)", "int4 fused linear kernel launch", [&](void* out, void* stream) {
    p.out = out;
    return fused_linear::launch_int4(p, stream);
  });
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

AOTITorchError aoti_torch_cuda_aoti_cuda_fused_linear_int4(AtenTensorHandle x, AtenTensorHandle* norm_weight,
                                                           double eps, int32_t swiglu, AtenTensorHandle qdata,
                                                           AtenTensorHandle scale_and_zero, int64_t group_size,
                                                           int64_t n, AtenTensorHandle* residual,
                                                           AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__, [&] {
    fused_linear_int4_call(x, norm_weight, eps, swiglu, qdata, scale_and_zero, group_size, n, residual, ret0);
  });
}

}  // extern "C"
