// Shim operators: aoti_torch_cuda_mm_out, aoti_torch_cuda_addmm_out, aoti_torch_cuda_bmm_out —
// the extern GEMMs of a program exported with Inductor's ATEN GEMM backend (PyTorch's
// mm.out / addmm.out / bmm.out semantics), on cuBLAS, or with at most 8 rows (an LLM's decode
// step) on aoti_cuda's own bandwidth-bound kernels (gemm.hpp, gemv.hpp).
//
// Validation and layout here. Operands cuBLAS can read as they are (one unit stride: the
// row-major tensors and transposed views Inductor passes) go straight through; any other
// layout is first copied to a contiguous temporary (and an output written back), so every
// strided view PyTorch accepts gives the same result.
#include <cuda_runtime_api.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/copy_engine.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/gemm.hpp"
#include "shim/ops/gemm_kernels.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

struct Context {
  const char* op;
  int32_t dtype;
  int device;
  void* stream;
};

// Metadata first (dims, dtype), devices last, so misuse gets the same diagnostics for CPU tensors.
const AtenTensorOpaque& operand(AtenTensorHandle handle, const char* name, int64_t dim, int32_t dtype) {
  const AtenTensorOpaque& t = *checked_defined(handle, name);
  if (dim >= 0 && t.dim() != dim) {
    throw_invalid(std::string(name) + " must be " + std::to_string(dim) + "-d, got " + t.describe());
  }
  if (t.dtype != dtype) {
    throw_invalid(std::string(name) + " must have out's dtype " + dtype_name(dtype) + ", got " + t.describe());
  }
  return t;
}

// The dtype every operand must have (out's), checked to be one cuBLAS multiplies.
int32_t gemm_dtype(AtenTensorHandle out_h) {
  const AtenTensorOpaque& out = *checked_defined(out_h, "out");
  const auto d = static_cast<DType>(out.dtype);
  if (d != DType::kFloat32 && d != DType::kFloat16 && d != DType::kBFloat16) {
    throw Error(ErrorCode::kUnsupported,
                "out is " + out.describe() + ": float32, float16 and bfloat16 matrix multiplies are supported");
  }
  return out.dtype;
}

// After the metadata checks: every operand on out's CUDA device; makes it current.
Context on_device_of(const char* op, const AtenTensorOpaque& out, std::initializer_list<const AtenTensorOpaque*> ins) {
  expect(out.storage->is_cuda(), [&] { return std::string("out must be a CUDA tensor, got ") + out.describe(); });
  for (const AtenTensorOpaque* t : ins) {
    expect(t->storage->is_cuda() && t->storage->device_index == out.storage->device_index, [&] {
      return "every operand must be on out's device cuda:" + std::to_string(out.storage->device_index) + ", got " +
             t->describe();
    });
  }
  return Context{op, out.dtype, out.storage->device_index, nullptr};
}

// The (batch of) matrices of a 2-d or 3-d tensor, or of its elements laid out at `data` with `strides`.
gemm::Batch batch_of(const AtenTensorOpaque& t, void* data, const std::vector<int64_t>& strides) {
  const int64_t d = t.dim();
  gemm::Batch b;
  b.m = gemm::Matrix{data, t.sizes[d - 2], t.sizes[d - 1], strides[d - 2], strides[d - 1]};
  b.batch_stride = d == 3 && t.sizes[0] > 1 ? strides[0] : 0;
  return b;
}
gemm::Batch batch_of(const AtenTensorOpaque& t) { return batch_of(t, t.data_ptr(), t.strides); }

// t's elements as a contiguous tensor at `data` (a scratch copy).
View contiguous_view(const AtenTensorOpaque& t, void* data) {
  View v = view_of(t);
  v.data = static_cast<char*>(data);
  v.strides = contiguous_strides(t.sizes);
  return v;
}

bool readable(const gemm::Batch& b) { return gemm::blas_compatible(b.m) && b.batch_stride >= 0; }

// An operand as cuBLAS can read it: the tensor itself, or a contiguous copy in `copy`.
gemm::Batch readable_input(const AtenTensorOpaque& t, const Context& ctx, std::optional<StreamScratch>& copy) {
  if (const gemm::Batch b = batch_of(t); readable(b)) return b;
  copy.emplace(static_cast<std::size_t>(t.numel()) * t.itemsize(), ctx.device, ctx.stream);
  const View dst = contiguous_view(t, copy->get());
  copy_views(dst, view_of(t), false);
  return batch_of(t, dst.data, dst.strides);
}

// out = beta * self + alpha * (a · b) for each batch; self (2-d: broadcast over the batch of out)
// is only read when beta != 0. The output is written in place when cuBLAS can, else through a
// contiguous temporary.
void run(const Context& ctx, const AtenTensorOpaque& out, const AtenTensorOpaque& a, const AtenTensorOpaque& b,
         const AtenTensorOpaque* self, float beta, float alpha) {
  const int64_t d = out.dim();
  const int64_t count = d == 3 ? out.sizes[0] : 1;
  const int64_t m = out.sizes[d - 2], n = out.sizes[d - 1], k = a.sizes[d - 1];
  if (out.numel() == 0) return;

  gemm::Batch c = batch_of(out);
  std::optional<StreamScratch> out_copy;
  if (!readable(c)) {
    out_copy.emplace(static_cast<std::size_t>(out.numel()) * out.itemsize(), ctx.device, ctx.stream);
    c = batch_of(out, out_copy->get(), contiguous_strides(out.sizes));
  }
  // The addend first: self broadcast into the output, unless it already is the output.
  if (self != nullptr && beta != 0.0f) {
    const bool in_place = out_copy == std::nullopt && self->data_ptr() == out.data_ptr() && self->sizes == out.sizes &&
                          self->strides == out.strides;
    if (!in_place) {
      // self is [], [N], [1, N], [M, 1], [M, N] (PyTorch broadcasting): read with stride 0 where it broadcasts.
      const int64_t sd = self->dim();
      const int64_t s_rows = sd == 2 ? self->sizes[0] : 1;
      const int64_t s_cols = sd >= 1 ? self->sizes[sd - 1] : 1;
      gemm::Matrix src{self->data_ptr(), m, n, sd == 2 && s_rows != 1 ? self->strides[0] : 0,
                       sd >= 1 && s_cols != 1 ? self->strides[sd - 1] : 0};
      for (int64_t i = 0; i < count; ++i) {
        gemm::Matrix dst{static_cast<char*>(c.m.data) + i * c.batch_stride * static_cast<int64_t>(out.itemsize()),
                         m, n, c.m.row_stride, c.m.col_stride};
        const int err = gemm::broadcast_2d(dst, src, static_cast<int>(out.itemsize()), ctx.stream);
        if (err != 0) throw_cuda_error(err, std::string(ctx.op) + ": writing self into out");
      }
    }
  } else {
    beta = 0.0f;  // PyTorch: with beta == 0 self is ignored (NaN/Inf in it do not propagate)
  }

  if (k == 0) {  // no products: out = beta * self
    if (beta == 0.0f) {
      zero_view(out_copy ? contiguous_view(out, out_copy->get()) : view_of(out));
    } else if (beta != 1.0f) {
      throw Error(ErrorCode::kUnsupported, std::string(ctx.op) + " with K = 0 and beta other than 0 or 1");
    }
  } else {
    std::optional<StreamScratch> a_copy, b_copy;
    const gemm::Batch ga = readable_input(a, ctx, a_copy);
    const gemm::Batch gb = readable_input(b, ctx, b_copy);
    // Which path runs only matters to a kernel profile (RunOptions::profile_kernels): not asked otherwise.
    common::KernelTimer* timer = common::KernelTimer::current();
    const char* label = timer == nullptr                                 ? nullptr
                        : gemm::uses_gemv(ctx.dtype, ga, gb, c, count) ? "aoti_cuda GEMV (few rows)"
                                                                         : "aoti_cuda cuBLAS GEMM";
    common::KernelTimer::Launch timed(timer, nullptr, label, ctx.stream);
    gemm::multiply(ctx.dtype, ga, gb, c, count, alpha, beta, ctx.device, ctx.stream);
    timed.done(true);
  }
  if (out_copy) copy_views(view_of(out), contiguous_view(out, out_copy->get()), false);
}

// out = a · b, or (addmm, bias_h given) out = beta * bias + alpha * (a · b).
void mm_out(AtenTensorHandle out_h, AtenTensorHandle a_h, AtenTensorHandle b_h, AtenTensorHandle bias_h, double beta,
            double alpha, const char* op) {
  const int32_t dtype = gemm_dtype(out_h);
  const AtenTensorOpaque& out = operand(out_h, "out", 2, dtype);
  const AtenTensorOpaque& a = operand(a_h, bias_h != nullptr ? "mat1" : "self", 2, dtype);
  const AtenTensorOpaque& b = operand(b_h, "mat2", 2, dtype);
  expect(a.sizes[1] == b.sizes[0] && out.sizes[0] == a.sizes[0] && out.sizes[1] == b.sizes[1], [&] {
    return "shapes " + format_dims(a.sizes) + " x " + format_dims(b.sizes) + " -> out " + format_dims(out.sizes) +
           " do not agree";
  });
  const AtenTensorOpaque* bias = nullptr;
  if (bias_h != nullptr) {
    bias = &operand(bias_h, "self", -1, dtype);
    const int64_t sd = bias->dim();
    const bool ok = sd <= 2 && (sd == 0 || bias->sizes[sd - 1] == 1 || bias->sizes[sd - 1] == out.sizes[1]) &&
                    (sd < 2 || bias->sizes[0] == 1 || bias->sizes[0] == out.sizes[0]);
    expect(ok,
           [&] { return "self " + format_dims(bias->sizes) + " does not broadcast to out " + format_dims(out.sizes); });
  }
  Context ctx = bias != nullptr ? on_device_of(op, out, {&a, &b, bias}) : on_device_of(op, out, {&a, &b});
  DeviceSwitch on_device(ctx.device);
  ctx.stream = current_stream(ctx.device);
  run(ctx, out, a, b, bias, static_cast<float>(beta), static_cast<float>(alpha));
}

void bmm_out(AtenTensorHandle out_h, AtenTensorHandle self_h, AtenTensorHandle mat2_h) {
  const int32_t dtype = gemm_dtype(out_h);
  const AtenTensorOpaque& out = operand(out_h, "out", 3, dtype);
  const AtenTensorOpaque& a = operand(self_h, "self", 3, dtype);
  const AtenTensorOpaque& b = operand(mat2_h, "mat2", 3, dtype);
  expect(a.sizes[0] == b.sizes[0] && out.sizes[0] == a.sizes[0] && a.sizes[2] == b.sizes[1] &&
             out.sizes[1] == a.sizes[1] && out.sizes[2] == b.sizes[2],
         [&] {
           return "shapes " + format_dims(a.sizes) + " x " + format_dims(b.sizes) + " -> out " +
                  format_dims(out.sizes) + " do not agree";
         });
  Context ctx = on_device_of("bmm", out, {&a, &b});
  DeviceSwitch on_device(ctx.device);
  ctx.stream = current_stream(ctx.device);
  run(ctx, out, a, b, nullptr, 0.0f, 1.0f);
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  return aoti_cuda::shim::shim_call(__func__, [&] {
    aoti_cuda::shim::mm_out(out, self, mat2, nullptr, 0.0, 1.0, "mm");
  });
}

AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                         AtenTensorHandle mat2, double beta, double alpha) {
  return aoti_cuda::shim::shim_call(__func__, [&] {
    if (self == nullptr) aoti_cuda::shim::throw_invalid("self is null");
    aoti_cuda::shim::mm_out(out, mat1, mat2, self, beta, alpha, "addmm");
  });
}

AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  return aoti_cuda::shim::shim_call(__func__, [&] { aoti_cuda::shim::bmm_out(out, self, mat2); });
}

}  // extern "C"
