// Shim operator: aoti_torch_cuda__scaled_dot_product_flash_attention, what AOTInductor calls
// for scaled_dot_product_attention when the program keeps PyTorch's flash attention (a prefill
// lowered with it, e.g. tools/export/llm --sdpa flash). Validation and outputs here; the kernel
// is in flash_attention.cu.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/flash_attention.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kFloat16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kFloat32 = static_cast<int32_t>(DType::kFloat32);
constexpr int32_t kInt64 = static_cast<int32_t>(DType::kInt64);
constexpr int64_t kMaxGrid = 65535;  // grid y (heads) and z (batch)

using Dims4 = std::array<int64_t, 4>;

const AtenTensorOpaque& operand(AtenTensorHandle h, const char* name) {
  const AtenTensorOpaque& t = *checked_defined(h, name);
  expect(t.dim() == 4, [&] {
    return std::string(name) + " must be 4-d [batch, heads, sequence, head_dim], got " + t.describe();
  });
  expect(t.dtype == kBFloat16 || t.dtype == kFloat16,
         [&] { return std::string(name) + " must be bfloat16 or float16, got " + t.describe(); });
  expect(t.strides[3] == 1 || t.sizes[3] == 1, [&] {
    return std::string(name) + " must have a unit-stride last dimension, got " + t.describe();
  });
  return t;
}

// Last: the metadata checks above give CPU tensors the same diagnostics (unit tests run without a GPU).
void expect_cuda(const AtenTensorOpaque& t, const char* name) {
  if (!t.storage->is_cuda()) throw_invalid(std::string(name) + " must be a CUDA tensor, got " + t.describe());
}

// The layout PyTorch gives the attention output (empty_like(query)): query's strides when query
// is dense, else dense strides in the order of query's strides (largest outermost).
Dims4 output_strides(const AtenTensorOpaque& q) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q.strides[a] > q.strides[b]; });
  Dims4 dense{};
  int64_t step = 1;
  for (int i = 3; i >= 0; --i) {
    dense[order[i]] = step;
    step *= q.sizes[order[i]];
  }
  for (int d = 0; d < 4; ++d) {
    if (q.sizes[d] > 1 && q.strides[d] != dense[d]) return dense;
  }
  return {q.strides[0], q.strides[1], q.strides[2], q.strides[3]};
}

attention::Problem validate(const AtenTensorOpaque& q, const AtenTensorOpaque& k, const AtenTensorOpaque& v,
                            double dropout_p, int32_t is_causal, int32_t return_debug_mask) {
  expect(k.dtype == q.dtype && v.dtype == q.dtype, [&] {
    return "query, key and value must have one dtype, got " + q.describe() + ", " + k.describe() + ", " +
           v.describe();
  });
  expect(k.storage->device_index == q.storage->device_index && v.storage->device_index == q.storage->device_index,
         [&] { return "query, key and value must be on one CUDA device, got " + q.describe() + ", " + k.describe() +
                      ", " + v.describe(); });
  const int64_t batch = q.sizes[0], heads = q.sizes[1], q_len = q.sizes[2], dim = q.sizes[3];
  const int64_t kv_heads = k.sizes[1], kv_len = k.sizes[2];
  expect(k.sizes[0] == batch && v.sizes[0] == batch && v.sizes[1] == kv_heads && v.sizes[2] == kv_len &&
             k.sizes[3] == dim && v.sizes[3] == dim,
         [&] {
           return "key and value must be [batch, kv_heads, kv_len, head_dim] with query's batch and head_dim, got "
                  "query " + format_dims(q.sizes) + ", key " + format_dims(k.sizes) + ", value " +
                  format_dims(v.sizes);
         });
  expect(kv_heads > 0 && heads % kv_heads == 0, [&] {
    return "query heads (" + std::to_string(heads) + ") must be a multiple of key/value heads (" +
           std::to_string(kv_heads) + ")";
  });
  expect(attention::supports_head_dim(dim), [&] {
    return "head_dim " + std::to_string(dim) + " is not supported by aoti_cuda's flash attention kernel (64 or 128)";
  });
  expect(dropout_p == 0.0, [&] {
    return "dropout_p must be 0 (inference), got " + std::to_string(dropout_p);
  });
  expect(return_debug_mask == 0, [] { return std::string("return_debug_mask is not supported"); });
  expect(is_causal == 0 || q_len == kv_len, [&] {
    return "is_causal with query length " + std::to_string(q_len) + " != key length " + std::to_string(kv_len) +
           " is not supported (PyTorch routes that case to other SDPA kernels)";
  });
  expect(heads <= kMaxGrid && batch <= kMaxGrid && q_len < (int64_t{1} << 31), [&] {
    return "too large for the kernel's grid: batch " + std::to_string(batch) + ", heads " + std::to_string(heads) +
           ", query length " + std::to_string(q_len);
  });
  attention::Problem p;
  p.batch = batch;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.head_dim = static_cast<int>(dim);
  for (int d = 0; d < 3; ++d) {
    p.q_stride[d] = q.strides[d];
    p.k_stride[d] = k.strides[d];
    p.v_stride[d] = v.strides[d];
  }
  p.causal = is_causal != 0;
  p.fp16 = q.dtype == kFloat16;
  return p;
}

AtenTensorHandle empty_cuda(const char* what, int64_t ndim, const int64_t* sizes, const int64_t* strides,
                            int32_t dtype, int device) {
  return new_empty_strided(what, ndim, sizes, strides, dtype, static_cast<int32_t>(DeviceType::kCUDA), device, false);
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda__scaled_dot_product_flash_attention(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, double dropout_p, int32_t is_causal,
    int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0, AtenTensorHandle* ret1, AtenTensorHandle* ret2,
    AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5, AtenTensorHandle* ret6, AtenTensorHandle* ret7,
    AtenTensorHandle* ret8) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__, [&] {
    AtenTensorHandle& out_handle = out_param(ret0, "ret0 (the attention output)");
    out_handle = nullptr;
    const AtenTensorOpaque& q = operand(query, "query");
    const AtenTensorOpaque& k = operand(key, "key");
    const AtenTensorOpaque& v = operand(value, "value");
    attention::Problem p = validate(q, k, v, dropout_p, is_causal, return_debug_mask);
    expect_cuda(q, "query");
    expect_cuda(k, "key");
    expect_cuda(v, "value");
    p.scale = scale != nullptr ? static_cast<float>(*scale) : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
    const int device = q.storage->device_index;
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.v = v.data_ptr();

    // Outputs as PyTorch's kernel returns them: the attention output laid out like query,
    // logsumexp [batch, heads, q_len] float32; the varlen, RNG and debug outputs are empty
    // (no dropout, no nested tensors). Only the ones asked for (non-null) are made, and none
    // is handed out unless the launch succeeded.
    const Dims4 strides = output_strides(q);
    HandleGuard out, lse, empties[5];
    out.handle = empty_cuda("flash attention output", 4, q.sizes.data(), strides.data(), q.dtype, device);
    p.out = out.handle->data_ptr();
    for (int d = 0; d < 3; ++d) p.out_stride[d] = strides[d];
    if (ret1 != nullptr) {
      const int64_t lse_sizes[3] = {p.batch, p.heads, p.q_len};
      lse.handle = empty_cuda("flash attention logsumexp", 3, lse_sizes, nullptr, kFloat32, device);
      p.lse = reinterpret_cast<float*>(lse.handle->data_ptr());
    }
    const int64_t none[1] = {0};
    AtenTensorHandle* unused[] = {ret2, ret3, ret6, ret7, ret8};
    for (int i = 0; i < 5; ++i) {
      if (unused[i] == nullptr) continue;
      const int32_t dtype = i < 2 ? static_cast<int32_t>(aoti_cuda::DType::kInt32) : (i < 4 ? kInt64 : q.dtype);
      empties[i].handle = empty_cuda("flash attention (unused output)", 1, none, nullptr, dtype, device);
    }

    DeviceSwitch on_device(device);
    void* stream = current_stream(device);
    aoti_cuda::common::KernelTimer::Launch timed(aoti_cuda::common::KernelTimer::current(), nullptr,
                                                 "aoti_cuda flash attention", stream);
    const int err = attention::launch(p, stream);
    timed.done(err == 0);
    if (err != 0) throw_cuda_error(err, "flash attention kernel launch");

    out_handle = out.release();
    if (ret1 != nullptr) *ret1 = lse.release();
    for (int i = 0; i < 5; ++i) {
      if (unused[i] != nullptr) *unused[i] = empties[i].release();
    }
    if (ret4 != nullptr) *ret4 = p.q_len;
    if (ret5 != nullptr) *ret5 = p.kv_len;
  });
}

}  // extern "C"
