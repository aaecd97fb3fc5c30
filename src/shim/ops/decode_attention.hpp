// Private: the one-row (decode) attention kernel behind aoti_torch_cuda_aoti_cuda_decode_attention
// (decode_attention.cpp validates the operands, allocates the output and the scratch, and calls
// launch()). That shim is aoti_cuda's own: a program reaches it through the custom operator
// aoti_cuda::aoti_cuda_decode_attention that tools/export/llm defines (--sdpa decode-op).
//
// What it computes, per batch b and query head h (one query row), with n = min(pos[b] + 1, L)
// visible cache positions (pos read from device memory at run time; pos < 0 leaves none):
//   s_j = scale * <q[b,h,0,:], k[b,h/g,j,:]>     for j < n
//   out = sum_j softmax(s)_j * v[b,h/g,j,:]       (zeros when n == 0)
// g = query heads / key-value heads. bf16 or fp16 in and out, float32 scores, softmax and sums.
//
// How (split over positions, "flash-decoding"): the L cache positions are cut into chunks of
// kChunk. Pass 1 runs one block per (chunk, query head, batch) -- the grid depends on L, not on
// pos, so a CUDA graph replays it for any position -- and a block whose chunk starts at or past
// n returns at once; the others read their chunk's K and V rows for their query head (at long
// positions, once for heads_per_block() heads of the group) and leave, per query head, the
// chunk's normalized output and its log-sum-exp in float32
// scratch. Pass 2 (one block per query head and batch) merges the chunks below n. So the work
// and the bytes read grow with pos; only the (cheap) empty blocks grow with L.
//
// The one-kernel form (sm_90 and newer, `cluster` 8 or 16 in launch(); OpSettings::attention_cluster): a
// thread-block cluster of that many blocks per (query head, batch). Block r reads chunks r, r + cluster, ... below n
// and keeps a running merge of them; the cluster then merges its blocks' results in distributed shared memory and
// writes the output. No scratch and no second kernel; each block reads ceil(chunks / cluster) chunks one after the
// other, so long positions take more time per block than in pass 1. The same results up to float32 rounding.
//
// The update form (k_new / v_new set, aoti_torch_cuda_aoti_cuda_decode_attention_update) also
// stores the step's own K and V row at pos[b] (when 0 <= pos[b] < L) before anything reads it: pass 1
// takes that row from k_new / v_new, and the block whose chunk holds it (the group's first query head)
// writes it into the cache. No block of the call reads that cache row, so the write needs no
// ordering within the call; the next call sees it. This replaces the two cache-writing kernels an
// exported model otherwise runs before the attention.
//
// The qkv form (rope_cos / rope_sin set, aoti_torch_cuda_aoti_cuda_decode_attention_qkv): q, k_new
// and v_new are views of the fused projection's output, and q and k_new are rotated on the fly,
// where they are read: each block rotates the query heads it stages and, when it holds the step's
// row, that key row (both halves of a head are read, so a lane pairs element d with d +- D/2); the
// storing block writes the rotated row. Rounded to the dtype as the model rounds its rotary output.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace decode_attention {

/// Cache positions per pass-1 block. 64 keeps a 1,024-position cache at 16 chunks per KV head and
/// a block's K and V reads at 16 KiB (head_dim 128), enough to hide the load latency.
constexpr int64_t kChunk = 64;

/// One call. Strides in elements (batch, head, sequence); the head dimension is unit-stride.
struct Problem {
  const void* q = nullptr;        ///< [batch, heads, 1, head_dim]
  void* k = nullptr;              ///< [batch, kv_heads, cache_len, head_dim], 16-byte rows (see aligned());
                                  ///< written only by the update form, at row pos[b]
  void* v = nullptr;              ///< same shape as k
  const void* k_new = nullptr;    ///< update form: [batch, kv_heads, 1, head_dim], the step's K row; else null
  const void* v_new = nullptr;    ///< update form: the step's V row, same shape as k_new
  const int64_t* pos = nullptr;   ///< device int64: pos[b * pos_stride] is the last visible position of batch b
  int64_t pos_stride = 0;         ///< 0: one position for every batch
  void* out = nullptr;            ///< [batch, heads, 1, head_dim] contiguous, the dtype of q
  int64_t batch = 0, heads = 0, kv_heads = 0, cache_len = 0;
  int head_dim = 0;
  int64_t q_stride[2] = {}, k_stride[3] = {}, v_stride[3] = {};  ///< q: batch, head
  int64_t k_new_stride[2] = {}, v_new_stride[2] = {};           ///< k_new / v_new: batch, head
  /// qkv form: float32 rotary tables [rope_rows, head_dim / 2] (row stride rope_stride); q and the step's
  /// K row (k_new) are rotated with row clamp(pos[b], 0, rope_rows - 1) before use. Null otherwise.
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  int64_t rope_rows = 0, rope_stride = 0;
  float scale = 0;
  bool fp16 = false;              ///< fp16 operands; bf16 otherwise
};

/// Whether the kernels are built for this head dimension (64 and 128).
bool supports_head_dim(int64_t head_dim);

/// Pass-1 chunks of a cache of `cache_len` positions.
inline int64_t chunks(int64_t cache_len) { return (cache_len + kChunk - 1) / kChunk; }

/// Query heads one pass-1 block serves from one read of K and V once the visible chunks would make
/// more than 4 one-head blocks per SM: the largest of 8, 4, 2, 1 that divides the group size g (so
/// g = 16 reads each KV head twice, g = 3 three times). Below that, one head a block.
int heads_per_block(int64_t group);

/// The visible chunks from which pass 1 serves heads_per_block() heads a block on a GPU of
/// `sm_count` multiprocessors: one-head blocks would then exceed 4 per SM (heads x batch x chunks
/// > 4 x SMs).
int64_t grouped_from_chunks(int64_t heads, int64_t batch, int sm_count);

/// K and V (and k_new / v_new in the update form) can be read as 16-byte vectors: aligned bases,
/// strides multiples of 8 elements.
bool aligned(const Problem& p);

/// Float32 scratch launch() needs in the two-kernel form: per (batch, head, chunk) a head_dim output and
/// a log-sum-exp. The one-kernel form needs none.
std::size_t scratch_bytes(const Problem& p);

/// Blocks per cluster of the one-kernel form for p's dtype and head_dim on `device` (which must be
/// current), when `wanted` (0, 8 or 16) are asked for: 16 when asked and a 16-block cluster can be
/// resident, else 8 when asked (8 or 16) and an 8-block one can, else 0 (the two-kernel form; always
/// below sm_90). Asked of the driver once per device and kernel.
int cluster_blocks(const Problem& p, int wanted, int device);

/// The cluster size OpSettings::kClusterAuto asks cluster_blocks() for, on a GPU of `sm_count` multiprocessors:
/// 8 when the cache has at most 8 chunks (512 positions: every block of a cluster reads at most one chunk) and the
/// clusters' blocks (heads x batch x 8) make at most 4 a multiprocessor, else 0 (two kernels). Why: with a
/// 512-position cache the 1.1 B model decoded 1.021x (int4) and 1.010x (bf16) faster with clusters of 8, and its
/// decode chain took 1.2-1.6 us a layer less at positions 128-500, where each block reads at most one chunk (H100,
/// 2026-12-07 13:18); from 1,024 positions, where each reads several, clusters were slower. The grid depends on the
/// cache length, not the position, so only the cache length can choose.
int auto_cluster(const Problem& p, int sm_count);

/// Enqueues the attention on `stream` (a cudaStream_t of the current device, whose multiprocessor
/// count is `sm_count`): with `cluster` 0, both passes, using `scratch` of at least scratch_bytes(p)
/// device bytes; with 8 or 16 (a value cluster_blocks() returned), the one-kernel form, which
/// ignores `scratch`. Requires supports_head_dim, aligned, heads % kv_heads == 0. batch or heads 0
/// enqueues nothing. Returns the launch's cudaError_t (0 = success).
int launch(const Problem& p, void* scratch, void* stream, int sm_count, int cluster = 0);

/// Pass 1 of the two-kernel form alone: each visible chunk's normalized output and log2-sum-exp left in `scratch`
/// (outputs [batch, heads, chunks(cache_len), head_dim], then the log-sum-exps [batch, heads, chunks]), p.out not
/// written; the update form still stores the step's K and V row. For a consumer that merges the chunks itself
/// (fused_linear_bench --chain times the step without the merge kernel: the most such a consumer could save).
int launch_chunks(const Problem& p, void* scratch, void* stream, int sm_count);

}  // namespace decode_attention
}  // namespace shim
}  // namespace aoti_cuda
