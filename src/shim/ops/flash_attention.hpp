// Private: the attention kernel behind aoti_torch_cuda__scaled_dot_product_flash_attention
// (scaled_dot_product_attention.cpp validates the operands, allocates the outputs and calls
// launch()).
//
// What it computes, per batch b, query head h and query row i (PyTorch's flash attention
// forward, inference only: no dropout):
//   s_j    = scale * <q[b,h,i,:], k[b,h/g,j,:]>      for keys j < S (j <= i when causal)
//   out    = sum_j softmax(s)_j * v[b,h/g,j,:]
//   lse    = log(sum_j exp(s_j))                      (float32, written when asked for)
// where g = query heads / key-value heads (grouped-query attention; 1 for plain attention).
// bf16 or fp16 in and out, float32 scores, softmax and accumulation. Rows with no visible key
// give zeros (and lse -inf).
//
// How: one thread block per 16 * warps query rows of one (b, h); each warp keeps its 16
// rows' queries, running maxima, sums and output accumulators in registers and walks the
// keys in tiles (32 keys for head_dim 128, 64 for 64) staged in shared memory (the online
// softmax of FlashAttention): a pipeline of stages, the next tiles copied in (cp.async)
// while the current one is used; tensor-core multiplies (mma.sync m16n8k16) for q.k^T and p.v with
// their K and V operands read by ldmatrix. Causal blocks stop at their last row; key tiles
// past a warp's rows are skipped.
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace attention {

/// One attention call. Strides are in elements, for the batch, head and sequence
/// dimensions; the last (head) dimension is unit-stride for every tensor.
struct Problem {
  const void* q = nullptr;  ///< [batch, heads, q_len, head_dim]
  const void* k = nullptr;  ///< [batch, kv_heads, kv_len, head_dim]
  const void* v = nullptr;  ///< [batch, kv_heads, kv_len, head_dim]
  void* out = nullptr;      ///< [batch, heads, q_len, head_dim], the dtype of q
  float* lse = nullptr;     ///< [batch, heads, q_len] contiguous float32, or null (not written)
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0;
  int head_dim = 0;
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, out_stride[3] = {};
  float scale = 0;
  bool causal = false;  ///< key j visible to row i only when j <= i (q_len == kv_len)
  bool fp16 = false;    ///< fp16 operands; bf16 otherwise
};

/// Whether the kernels are built for this head dimension (64 and 128).
bool supports_head_dim(int64_t head_dim);

/// Query rows one thread block takes: 64, or 16 / 32 for queries that short.
int rows_per_block(const Problem& p);

/// Pipeline depth of launch(): key tiles in shared memory at once (one used, the rest being copied in).
/// 4 stages measured faster than 2 with 64-row blocks (bench/results/attention-2026-12-03.txt).
constexpr int kDefaultStages = 4;

/// launch() with `rows` query rows per block (64, 32 or 16) and `stages` pipeline stages (2 or 4);
/// else cudaErrorInvalidValue. For benchmarks and tests of every configuration.
int launch_rows(const Problem& p, void* stream, int rows, int stages = kDefaultStages);

/// Enqueues the kernel on `stream` (a cudaStream_t) of the current device. Requires
/// supports_head_dim(p.head_dim); q_len == 0 enqueues nothing. Returns the launch's
/// cudaError_t (0 = success).
int launch(const Problem& p, void* stream);

}  // namespace attention
}  // namespace shim
}  // namespace aoti_cuda
