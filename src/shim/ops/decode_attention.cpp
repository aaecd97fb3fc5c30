// Shim operators: aoti_torch_cuda_aoti_cuda_decode_attention, its update form
// aoti_torch_cuda_aoti_cuda_decode_attention_update (which also stores the step's K and V rows in
// the caches) and its qkv form aoti_torch_cuda_aoti_cuda_decode_attention_qkv (which also rotates q
// and k, taking the projection's output): aoti_cuda's own shims for the custom operators
// aoti_cuda::aoti_cuda_decode_attention, _update and _qkv (tools/export/llm/decode_attention_op.py). An
// exporter that lists such an operator in AOTInductor's aot_inductor.custom_ops_to_c_shims gets this
// call in the generated code instead of a decomposed, masked attention over the whole cache.
// Inductor names a custom op's shim aoti_torch_<device>_<operator name>, dropping the namespace:
// the operator's name repeats "aoti_cuda" so that the C name cannot collide with another
// project's decode_attention. Validation and the output here; the kernels are in
// decode_attention.cu.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/decode_attention.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kFloat16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kInt64 = static_cast<int32_t>(DType::kInt64);
constexpr int64_t kMaxGrid = 65535;  // grid y (kv heads x sub-groups, and query heads) and z (batch)

const AtenTensorOpaque& operand(AtenTensorHandle h, const char* name, const char* layout) {
  const AtenTensorOpaque& t = *checked_defined(h, name);
  expect(t.dim() == 4, [&] { return std::string(name) + " must be 4-d " + layout + ", got " + t.describe(); });
  expect(t.dtype == kBFloat16 || t.dtype == kFloat16,
         [&] { return std::string(name) + " must be bfloat16 or float16, got " + t.describe(); });
  expect(t.strides[3] == 1 || t.sizes[3] == 1, [&] {
    return std::string(name) + " must have a unit-stride last dimension, got " + t.describe();
  });
  return t;
}

// Checked after the metadata, so that CPU tensors get the same diagnostics (unit tests run without a GPU).
void expect_cuda(const AtenTensorOpaque& t, const char* name, int device) {
  expect(t.storage->is_cuda(), [&] { return std::string(name) + " must be a CUDA tensor, got " + t.describe(); });
  expect(t.storage->device_index == device, [&] {
    return std::string(name) + " must be on the query's device (cuda:" + std::to_string(device) + "), got " +
           t.describe();
  });
}

// The query side of a call: `name` (q, or qkv in the qkv form), its batch, query heads, head_dim and dtype.
struct Query {
  const char* name;
  const AtenTensorOpaque& t;
  int64_t batch, heads, dim;
};

decode_attention::Problem validate(const Query& q, const AtenTensorOpaque& k, const AtenTensorOpaque& v,
                                   const AtenTensorOpaque& pos, double scale) {
  expect(k.dtype == q.t.dtype && v.dtype == q.t.dtype, [&] {
    return std::string(q.name) + ", k_cache and v_cache must have one dtype, got " + q.t.describe() + ", " +
           k.describe() + ", " + v.describe();
  });
  const int64_t batch = q.batch, heads = q.heads, dim = q.dim;
  const int64_t kv_heads = k.sizes[1], cache_len = k.sizes[2];
  expect(k.sizes[0] == batch && k.sizes[3] == dim && v.sizes == k.sizes, [&] {
    return "k_cache and v_cache must both be [batch, kv_heads, cache_len, head_dim] with " + std::string(q.name) +
           "'s batch and head_dim, got " + q.name + " " + format_dims(q.t.sizes) + ", k_cache " +
           format_dims(k.sizes) + ", v_cache " + format_dims(v.sizes);
  });
  expect(kv_heads > 0 && heads % kv_heads == 0, [&] {
    return "query heads (" + std::to_string(heads) + ") must be a multiple of key/value heads (" +
           std::to_string(kv_heads) + ")";
  });
  expect(decode_attention::supports_head_dim(dim), [&] {
    return "head_dim " + std::to_string(dim) + " is not supported by aoti_cuda's decode attention kernel (64 or 128)";
  });
  expect(pos.dtype == kInt64, [&] { return "input_pos must be int64, got " + pos.describe(); });
  expect(pos.dim() <= 1 && (pos.numel() == 1 || (pos.dim() == 1 && pos.sizes[0] == batch)), [&] {
    return "input_pos must hold one position ([1], or [batch] for one per sequence), got " + pos.describe() +
           " for batch " + std::to_string(batch);
  });
  expect(std::isfinite(scale), [&] { return "scale must be finite, got " + std::to_string(scale); });
  expect(batch <= kMaxGrid && heads <= kMaxGrid, [&] {
    return "too large for the kernel's grid: batch " + std::to_string(batch) + ", heads " + std::to_string(heads);
  });

  decode_attention::Problem p;
  p.batch = batch;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.cache_len = cache_len;
  p.head_dim = static_cast<int>(dim);
  for (int d = 0; d < 3; ++d) {
    p.k_stride[d] = k.strides[d];
    p.v_stride[d] = v.strides[d];
  }
  p.pos_stride = pos.numel() == 1 ? 0 : pos.strides[0];
  p.scale = static_cast<float>(scale);
  p.fp16 = q.t.dtype == kFloat16;
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  // 16-byte vector reads of K and V rows; a KV cache buffer (contiguous, from the allocator) always qualifies.
  expect(decode_attention::aligned(p), [&] {
    return "k_cache and v_cache must be 16-byte aligned with strides that are multiples of 8 elements, got " +
           k.describe() + ", " + v.describe();
  });
  return p;
}

// The update form's step rows: [batch, kv_heads, 1, head_dim] each, the caches' dtype, 16-byte rows.
void add_step_rows(decode_attention::Problem& p, const AtenTensorOpaque& k_cache, const AtenTensorOpaque& k_new,
                   const AtenTensorOpaque& v_new) {
  for (const AtenTensorOpaque* t : {&k_new, &v_new}) {
    const char* name = t == &k_new ? "k_new" : "v_new";
    expect(t->dtype == k_cache.dtype, [&] {
      return std::string(name) + " must have the caches' dtype, got " + t->describe() + " for " + k_cache.describe();
    });
    expect(t->sizes[0] == p.batch && t->sizes[1] == p.kv_heads && t->sizes[2] == 1 && t->sizes[3] == p.head_dim, [&] {
      return std::string(name) + " must be [batch, kv_heads, 1, head_dim] = [" + std::to_string(p.batch) + ", " +
             std::to_string(p.kv_heads) + ", 1, " + std::to_string(p.head_dim) + "], got " + t->describe();
    });
  }
  p.k_new = k_new.data_ptr();
  p.v_new = v_new.data_ptr();
  p.k_new_stride[0] = k_new.strides[0];
  p.k_new_stride[1] = k_new.strides[1];
  p.v_new_stride[0] = v_new.strides[0];
  p.v_new_stride[1] = v_new.strides[1];
  expect(decode_attention::aligned(p), [&] {
    return "k_new and v_new must be 16-byte aligned with strides that are multiples of 8 elements, got " +
           k_new.describe() + ", " + v_new.describe();
  });
}

AtenTensorHandle run(decode_attention::Problem& p, int32_t dtype, int device);

// The q and update forms: validation, then run(). `update`: the update form (k_new, v_new).
void decode_attention_call(bool update, AtenTensorHandle q, AtenTensorHandle k_new, AtenTensorHandle v_new,
                           AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle input_pos,
                           double scale, AtenTensorHandle* ret0) {
  AtenTensorHandle& out_handle = out_param(ret0, "ret0 (the attention output)");
  out_handle = nullptr;
  if (update) {
    expect(k_new != nullptr && v_new != nullptr, [] { return std::string("k_new and v_new must both be given"); });
  }
  const AtenTensorOpaque& qt = operand(q, "q", "[batch, heads, 1, head_dim]");
  const AtenTensorOpaque& kt = operand(k_cache, "k_cache", "[batch, kv_heads, cache_len, head_dim]");
  const AtenTensorOpaque& vt = operand(v_cache, "v_cache", "[batch, kv_heads, cache_len, head_dim]");
  const AtenTensorOpaque& pt = *checked_defined(input_pos, "input_pos");
  expect(qt.sizes[2] == 1, [&] {
    return "q must hold one query row per head ([batch, heads, 1, head_dim]: decode), got " + qt.describe();
  });
  decode_attention::Problem p = validate({"q", qt, qt.sizes[0], qt.sizes[1], qt.sizes[3]}, kt, vt, pt, scale);
  p.q_stride[0] = qt.strides[0];
  p.q_stride[1] = qt.strides[1];
  const AtenTensorOpaque* knt = update ? &operand(k_new, "k_new", "[batch, kv_heads, 1, head_dim]") : nullptr;
  const AtenTensorOpaque* vnt = update ? &operand(v_new, "v_new", "[batch, kv_heads, 1, head_dim]") : nullptr;
  if (update) add_step_rows(p, kt, *knt, *vnt);
  expect(qt.storage->is_cuda(), [&] { return "q must be a CUDA tensor, got " + qt.describe(); });
  const int device = qt.storage->device_index;
  expect_cuda(kt, "k_cache", device);
  expect_cuda(vt, "v_cache", device);
  if (update) {
    expect_cuda(*knt, "k_new", device);
    expect_cuda(*vnt, "v_new", device);
  }
  // The position stays on the device: the kernels read it, so a CUDA graph replays for any position.
  expect_cuda(pt, "input_pos", device);
  p.q = qt.data_ptr();
  p.pos = reinterpret_cast<const int64_t*>(pt.data_ptr());
  out_handle = run(p, qt.dtype, device);
}

// The qkv form: q, k_new and v_new are views of the projection's output; rope_cos / rope_sin the rotary tables.
void decode_attention_qkv_call(AtenTensorHandle qkv, AtenTensorHandle rope_cos, AtenTensorHandle rope_sin,
                               AtenTensorHandle k_cache, AtenTensorHandle v_cache, AtenTensorHandle input_pos,
                               int64_t n_heads, double scale, AtenTensorHandle* ret0) {
  AtenTensorHandle& out_handle = out_param(ret0, "ret0 (the attention output)");
  out_handle = nullptr;
  const AtenTensorOpaque& qt = *checked_defined(qkv, "qkv");
  expect(qt.dim() == 3 && qt.sizes[1] == 1, [&] {
    return "qkv must be the q/k/v projection's output for one token, [batch, 1, (n_heads + 2 * kv_heads) * "
           "head_dim], got " + qt.describe();
  });
  expect(qt.dtype == kBFloat16 || qt.dtype == kFloat16,
         [&] { return "qkv must be bfloat16 or float16, got " + qt.describe(); });
  expect(qt.strides[2] == 1, [&] { return "qkv must have a unit-stride last dimension, got " + qt.describe(); });
  const AtenTensorOpaque& kt = operand(k_cache, "k_cache", "[batch, kv_heads, cache_len, head_dim]");
  const AtenTensorOpaque& vt = operand(v_cache, "v_cache", "[batch, kv_heads, cache_len, head_dim]");
  const AtenTensorOpaque& pt = *checked_defined(input_pos, "input_pos");
  const int64_t kv_heads = kt.sizes[1], dim = kt.sizes[3];
  expect(n_heads > 0 && n_heads <= kMaxGrid && qt.sizes[2] == (n_heads + 2 * kv_heads) * dim, [&] {
    return "qkv's last dimension must be (n_heads + 2 * kv_heads) * head_dim = (" + std::to_string(n_heads) +
           " + 2 * " + std::to_string(kv_heads) + ") * " + std::to_string(dim) + ", got " + qt.describe();
  });
  decode_attention::Problem p = validate({"qkv", qt, qt.sizes[0], n_heads, dim}, kt, vt, pt, scale);
  // q, then the step's K and V rows: heads of head_dim elements, one after the other within a token.
  p.q_stride[0] = qt.strides[0];
  p.q_stride[1] = dim;
  const std::size_t item = 2;
  char* base = static_cast<char*>(qt.data_ptr());
  p.k_new = base + static_cast<std::size_t>(n_heads * dim) * item;
  p.v_new = base + static_cast<std::size_t>((n_heads + kv_heads) * dim) * item;
  p.k_new_stride[0] = p.v_new_stride[0] = qt.strides[0];
  p.k_new_stride[1] = p.v_new_stride[1] = dim;
  expect(decode_attention::aligned(p), [&] {
    return "qkv must be 16-byte aligned with a batch stride that is a multiple of 8 elements, got " + qt.describe();
  });
  const auto table = [dim](AtenTensorHandle h, const char* name) -> const AtenTensorOpaque& {
    const AtenTensorOpaque& t = *checked_defined(h, name);
    expect(t.dim() == 2 && t.sizes[0] >= 1 && t.sizes[1] * 2 == dim && t.strides[1] == 1 &&
               t.dtype == static_cast<int32_t>(DType::kFloat32),
           [&] {
             return std::string(name) + " must be a float32 [rows, head_dim / 2] = [rows, " + std::to_string(dim / 2) +
                    "] table with unit-stride rows, got " + t.describe();
           });
    return t;
  };
  const AtenTensorOpaque& ct = table(rope_cos, "rope_cos");
  const AtenTensorOpaque& st = table(rope_sin, "rope_sin");
  expect(ct.sizes == st.sizes && ct.strides == st.strides, [&] {
    return "rope_cos and rope_sin must have one shape and layout, got " + ct.describe() + ", " + st.describe();
  });
  expect(qt.storage->is_cuda(), [&] { return "qkv must be a CUDA tensor, got " + qt.describe(); });
  const int device = qt.storage->device_index;
  expect_cuda(kt, "k_cache", device);
  expect_cuda(vt, "v_cache", device);
  expect_cuda(ct, "rope_cos", device);
  expect_cuda(st, "rope_sin", device);
  expect_cuda(pt, "input_pos", device);
  p.q = base;
  p.rope_cos = reinterpret_cast<const float*>(ct.data_ptr());
  p.rope_sin = reinterpret_cast<const float*>(st.data_ptr());
  p.rope_rows = ct.sizes[0];
  p.rope_stride = ct.strides[0];
  p.pos = reinterpret_cast<const int64_t*>(pt.data_ptr());
  out_handle = run(p, qt.dtype, device);
}

// The output (contiguous [batch, heads, 1, head_dim], as the operators' fake implementations declare it to
// Inductor), the scratch and the launch; returns the output's handle.
AtenTensorHandle run(decode_attention::Problem& p, int32_t dtype, int device) {
  HandleGuard out;
  const int64_t sizes[4] = {p.batch, p.heads, 1, p.head_dim};
  out.handle = new_empty_strided("decode attention output", 4, sizes, nullptr, dtype,
                                 static_cast<int32_t>(aoti_cuda::DeviceType::kCUDA), device, false);
  p.out = out.handle->data_ptr();

  DeviceSwitch on_device(device);
  void* stream = current_stream(device);
  // The one-kernel form when the Module asks for it (or, by default, auto_cluster() picks it) and a cluster fits, else
  // two kernels and their stream-ordered scratch (inside a CUDA-graph capture: the capture's arena), freed after.
  const int sms = multiprocessor_count(device);
  const int wanted = op_settings().attention_cluster;
  const int cluster = decode_attention::cluster_blocks(
      p, wanted == OpSettings::kClusterAuto ? decode_attention::auto_cluster(p, sms) : wanted, device);
  StreamScratch scratch(cluster > 0 ? 0 : decode_attention::scratch_bytes(p), device, stream);
  aoti_cuda::common::KernelTimer::Launch timed(aoti_cuda::common::KernelTimer::current(), nullptr,
                                               "aoti_cuda decode attention", stream);
  const int err = decode_attention::launch(p, scratch.get(), stream, sms, cluster);
  timed.done(err == 0);
  if (err != 0) throw_cuda_error(err, "decode attention kernel launch");
  return out.release();
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention(AtenTensorHandle q, AtenTensorHandle k_cache,
                                                          AtenTensorHandle v_cache, AtenTensorHandle input_pos,
                                                          double scale, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__,
                   [&] { decode_attention_call(false, q, nullptr, nullptr, k_cache, v_cache, input_pos, scale, ret0); });
}

AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention_update(AtenTensorHandle q, AtenTensorHandle k_new,
                                                                 AtenTensorHandle v_new, AtenTensorHandle k_cache,
                                                                 AtenTensorHandle v_cache, AtenTensorHandle input_pos,
                                                                 double scale, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__,
                   [&] { decode_attention_call(true, q, k_new, v_new, k_cache, v_cache, input_pos, scale, ret0); });
}

AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention_qkv(AtenTensorHandle qkv, AtenTensorHandle rope_cos,
                                                              AtenTensorHandle rope_sin, AtenTensorHandle k_cache,
                                                              AtenTensorHandle v_cache, AtenTensorHandle input_pos,
                                                              int64_t n_heads, double scale, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return shim_call(__func__, [&] {
    decode_attention_qkv_call(qkv, rope_cos, rope_sin, k_cache, v_cache, input_pos, n_heads, scale, ret0);
  });
}

}  // extern "C"
