// The decode attention's two-kernel form and the dispatch; see decode_attention.hpp for what it computes and how.
//
// Pass 1, one block of kWarps warps per (chunk, query head, batch); at long positions the first block of every
// kHeads query heads of a KV group serves them all (chunk_kernel below says when). Its work on a chunk
// (decode_attention_chunk.cuh) ends with, per query head, the chunk's normalized output and max + log2(sum) in
// scratch. Pass 2, one block of head_dim threads per (query head, batch): the chunks below n, weighted
// by 2^(lse_c - max lse) (in one pass, with a running maximum) and normalized; thread d writes column d.
// The one-kernel form is in decode_attention_cluster.cu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "shim/op_settings.hpp"
#include "shim/ops/decode_attention.hpp"
#include "shim/ops/decode_attention_chunk.cuh"
#include "shim/ops/dependent_launch.hpp"

namespace aoti_cuda {
namespace shim {
namespace decode_attention {
namespace {

using namespace detail;

// Pass 1's sink in the two-kernel form: per (batch, query head, chunk), the chunk's normalized output and its
// log2-sum-exp, to the scratch the merge kernel reads.
template <int kDim>
struct ToScratch {
  const Problem& p;
  float* part_out;
  float* part_lse;
  int64_t b, head0, chunk;  // the block's batch, first query head and chunk
  __device__ __forceinline__ void operator()(int h, int d, float o, float max, float sum) const {
    // Computed here, not held through the chunk's work: fewer live registers in pass 1.
    const int64_t slot = (b * p.heads + head0 + h) * chunk_count(p.cache_len) + chunk;
    part_out[slot * kDim + d] = o / sum;
    if (d == 0) part_lse[slot] = max + log2f(sum);
  }
};

// Pass 1. The grid's y runs over the query heads (kv_head x g + hq). At short positions each block serves one query
// head: the fewest dependent instructions per thread, and every KV row read by g blocks (from L2). When the
// visible chunks reach `grouped_from`, there are enough blocks for several waves, and the first block of every
// kGroupHeads serves all of them from one read of K and V (the others return); see launch_heads().
// Attention bench, qkv form, 4096-position cache, 16 query / 4 KV heads, 2026-12-04 20:44 UTC (µs per call in a
// graph at positions 128 / 1024 / 2048 / 4000): one head a block 6.00 / 7.88 / 9.86 / 15.71, four 8.01 / 9.35 /
// 10.69 / 13.49.
template <bool kHalf, int kDim, int kGroupHeads>
__global__ void __launch_bounds__(kWarps * 32) chunk_kernel(Problem p, float* part_out, float* part_lse,
                                                            bool q_vectors, int64_t grouped_from) {
  // Launched with programmatic dependent launch (dependent_launch.hpp): nothing is read before the
  // wait, not even the position (the step that wrote it may be the kernel before).
  pdl::wait_for_predecessor();
  // The position first: everything the block reads depends on it.
  const int64_t b = blockIdx.z;
  const int64_t pos_b = p.pos[b * p.pos_stride];
  const int64_t chunk = blockIdx.x;
  // 32-bit division (64-bit division is a long software sequence): the grid's y is at most 65,535.
  const int group_size = static_cast<int>(p.heads) / static_cast<int>(p.kv_heads);
  const int64_t kv_head = static_cast<int>(blockIdx.y) / group_size;
  const int hq = static_cast<int>(blockIdx.y) % group_size;  // the query head within the group
  const int64_t n = visible_at(pos_b, p.cache_len);
  if (chunk * kChunk >= n) return;  // the whole block: no thread has reached a barrier
  const int64_t head = kv_head * group_size + hq;
  ToScratch<kDim> sink{p, part_out, part_lse, b, head, chunk};
  if (kGroupHeads > 1 && chunk_count(n) >= grouped_from) {
    if (hq % kGroupHeads != 0) return;  // served by the group's first block
    chunk_body<kHalf, kDim, kGroupHeads>(p, q_vectors, b, pos_b, n, chunk, kv_head, head, hq == 0, sink);
  } else {
    chunk_body<kHalf, kDim, 1>(p, q_vectors, b, pos_b, n, chunk, kv_head, head, hq == 0, sink);
  }
}

// kSlices (OpSettings::merge_slices, on by default): past kSliceFrom chunks, the block's head_dim threads split the
// chunks among kMergeSlices slices (chunk c to slice c mod kMergeSlices), each thread of a slice merging 4 columns with
// one float4 load a chunk; the slices are then merged through shared memory. Why: one column a thread walks the chunks
// in order with at most 4 in flight, 5.9 us a layer at position 4,000 on the H200 (llm.md, "Main on the H200"). A split
// at every position was 1.5-2.6 % slower from 128 (llm.md, "The merge's second form"), so up to kSliceFrom chunks this
// kernel runs the one-column loop either way. In the 1.1 B model (two H100s, 2026-12-07 10:41 and 10:53) the split
// past 8 chunks made decode 4.9-6.9 % faster at 4,000 and 0.3-1.1 % at 1,024, and left 128 within 0.3 % (llm.md,
// "The merge in slices on").
constexpr int kMergeSlices = 4;
constexpr int64_t kSliceFrom = 8;

// combine_kernel's sliced form for one (query head, batch) block: the `used` chunks from scratch row `first` on, split
// among kMergeSlices slices of the block (chunk c to slice c mod kMergeSlices, 4 columns a thread, one float4 load a
// chunk), each slice a running merge, then the slices merged through shared memory; thread d writes out[at + d].
template <bool kHalf, int kDim>
__device__ __forceinline__ void merge_in_slices(const Problem& p, const float* part_out, const float* part_lse,
                                                int64_t first, int64_t used, int64_t at) {
  constexpr int kLanes = kDim / kMergeSlices;  // threads a slice: 4 columns each cover the head
  __shared__ float max_s[kMergeSlices], sum_s[kMergeSlices];
  __shared__ float out_s[kMergeSlices][kDim];
  const int d = threadIdx.x;
  const int slice = d / kLanes, col = 4 * (d % kLanes);
  float m = -INFINITY, sum = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
  for (int64_t c = slice; c < used; c += kMergeSlices) {  // used > kSliceFrom: every slice has a chunk
    const float lse = part_lse[first + c];
    const float4 x = *reinterpret_cast<const float4*>(part_out + (first + c) * kDim + col);  // 16-byte aligned
    const float m_new = fmaxf(m, lse);
    const float rescale = exp2f(m - m_new), w = exp2f(lse - m_new);
    sum = fmaf(sum, rescale, w);
    o[0] = fmaf(o[0], rescale, w * x.x);
    o[1] = fmaf(o[1], rescale, w * x.y);
    o[2] = fmaf(o[2], rescale, w * x.z);
    o[3] = fmaf(o[3], rescale, w * x.w);
    m = m_new;
  }
  if (d % kLanes == 0) {
    max_s[slice] = m;
    sum_s[slice] = sum;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) out_s[slice][col + e] = o[e];
  __syncthreads();
  float big = -INFINITY;
#pragma unroll
  for (int s = 0; s < kMergeSlices; ++s) big = fmaxf(big, max_s[s]);
  float total = 0.f, out = 0.f;
#pragma unroll
  for (int s = 0; s < kMergeSlices; ++s) {
    const float w = exp2f(max_s[s] - big);
    total = fmaf(sum_s[s], w, total);
    out = fmaf(out_s[s][d], w, out);
  }
  store<kHalf>(p.out, at + d, out / total);
}

template <bool kHalf, int kDim, bool kSlices>
__global__ void __launch_bounds__(kDim) combine_kernel(Problem p, const float* part_out, const float* part_lse) {
  const int64_t h = blockIdx.x, b = blockIdx.y;
  const int d = threadIdx.x;
  // Launched right after pass 1 (launch_heads): the position is an input of the operator, final before pass 1
  // started, so it is read while pass 1 finishes (with dependent launch); pass 1's results only after the wait.
  const int64_t n = visible(p, b);
  pdl::wait_for_predecessor();
  pdl::allow_dependents();
  const int64_t used = chunk_count(n);  // chunks pass 1 wrote
  const int64_t chunks_total = chunk_count(p.cache_len);
  const int64_t first = (b * p.heads + h) * chunks_total;
  if (kSlices && used > kSliceFrom) {
    merge_in_slices<kHalf, kDim>(p, part_out, part_lse, first, used, (b * p.heads + h) * kDim);
    return;
  }
  // One pass with a running maximum, so that each chunk's log-sum-exp and output are requested together (unrolled,
  // several chunks in flight) instead of a pass for the maximum and a second for the sums.
  float m = -INFINITY, sum = 0.f, o = 0.f;
#pragma unroll 4
  for (int64_t c = 0; c < used; ++c) {
    const float lse = part_lse[first + c];
    const float x = part_out[(first + c) * kDim + d];
    const float m_new = fmaxf(m, lse);
    const float rescale = exp2f(m - m_new);  // 0 on the first chunk (m = -inf), 1 while the maximum holds
    const float w = exp2f(lse - m_new);
    sum = fmaf(sum, rescale, w);
    o = fmaf(o, rescale, w * x);
    m = m_new;
  }
  store<kHalf>(p.out, (b * p.heads + h) * kDim + d, used == 0 ? 0.f : o / sum);
}
template <bool kHalf, int kDim, int kGroupHeads>
int launch_heads(const Problem& p, float* part_out, float* part_lse, int64_t grouped_from, bool merge,
                 cudaStream_t stream) {
  if (p.cache_len > 0) {
    const dim3 grid(static_cast<unsigned>(chunks(p.cache_len)), static_cast<unsigned>(p.heads),
                    static_cast<unsigned>(p.batch));
    const cudaError_t err = pdl::launch(chunk_kernel<kHalf, kDim, kGroupHeads>, grid, dim3(kWarps * 32), 0, stream, p,
                                        part_out, part_lse, q_vectors(p), grouped_from);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  if (!merge) return 0;
  const dim3 grid(static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  // With dependent launch, the merge overlaps pass 1's tail (its launch, its blocks' scheduling, its read of the
  // position). It reads the position before its wait, which is right only after pass 1 (dependent_launch.hpp, an
  // operator's second kernel): without pass 1 (an empty cache) it launches plainly.
  // The sliced form only where its path can run: a cache of at most kSliceFrom chunks never takes it, and the
  // kernel that carries it cost about 0.1 us more a call in the decode chain at position 128, where it runs the same
  // one-column loop (llm.md, "The merge in slices on").
  const bool sliced = op_settings().merge_slices && chunks(p.cache_len) > kSliceFrom;
  auto* combine = sliced ? combine_kernel<kHalf, kDim, true> : combine_kernel<kHalf, kDim, false>;
  return static_cast<int>(pdl::launch_with(pdl::allowed() && p.cache_len > 0, combine, grid, dim3(kDim), 0, stream, p,
                                           part_out, part_lse));
}

template <bool kHalf, int kDim>
int launch_dim(const Problem& p, float* part_out, float* part_lse, int64_t grouped_from, bool merge,
               cudaStream_t stream) {
  switch (heads_per_block(p.heads / p.kv_heads)) {
    case 8: return launch_heads<kHalf, kDim, 8>(p, part_out, part_lse, grouped_from, merge, stream);
    case 4: return launch_heads<kHalf, kDim, 4>(p, part_out, part_lse, grouped_from, merge, stream);
    case 2: return launch_heads<kHalf, kDim, 2>(p, part_out, part_lse, grouped_from, merge, stream);
    default: return launch_heads<kHalf, kDim, 1>(p, part_out, part_lse, grouped_from, merge, stream);
  }
}

// Both passes (`merge`) or pass 1 alone, after launch()'s and launch_chunks()'s checks.
int launch_two_kernel(const Problem& p, void* scratch, cudaStream_t s, int sm_count, bool merge) {
  // Outputs first, then the log-sum-exps: the float4-friendly part at the (pool-aligned) start.
  const std::size_t slots = static_cast<std::size_t>(p.batch) * static_cast<std::size_t>(p.heads) *
                            static_cast<std::size_t>(chunks(p.cache_len));
  float* part_out = static_cast<float*>(scratch);
  float* part_lse = part_out + slots * static_cast<std::size_t>(p.head_dim);
  const int64_t grouped_from = grouped_from_chunks(p.heads, p.batch, sm_count);
  if (p.fp16) {
    return p.head_dim == 64 ? launch_dim<true, 64>(p, part_out, part_lse, grouped_from, merge, s)
                            : launch_dim<true, 128>(p, part_out, part_lse, grouped_from, merge, s);
  }
  return p.head_dim == 64 ? launch_dim<false, 64>(p, part_out, part_lse, grouped_from, merge, s)
                          : launch_dim<false, 128>(p, part_out, part_lse, grouped_from, merge, s);
}

bool valid(const Problem& p, int cluster) {
  return supports_head_dim(p.head_dim) && p.kv_heads > 0 && p.heads % p.kv_heads == 0 && aligned(p) &&
         (cluster == 0 || cluster == 8 || cluster == 16);
}

}  // namespace

bool supports_head_dim(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

int heads_per_block(int64_t group) {
  for (int h : {8, 4, 2}) {
    if (group % h == 0) return h;
  }
  return 1;
}

// From the attention bench (chunk_kernel's comment): one head a block wins while its blocks fit about 4 an SM
// (2048 positions, 16 heads: 512 blocks on 132 SMs), grouped heads win at 4000 (1,008 one-head blocks).
int64_t grouped_from_chunks(int64_t heads, int64_t batch, int sm_count) {
  const int64_t blocks_per_chunk = heads * batch > 0 ? heads * batch : 1;
  return 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1) / blocks_per_chunk + 1;
}

int auto_cluster(const Problem& p, int sm_count) {
  constexpr int kBlocks = 8;
  const int64_t blocks = p.heads * p.batch * kBlocks;
  return chunks(p.cache_len) <= kBlocks && blocks <= 4 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1) ? kBlocks
                                                                                                               : 0;
}

bool aligned(const Problem& p) {
  auto ok = [](const void* ptr, const int64_t (&stride)[3]) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 &&
           stride[2] % 8 == 0;
  };
  auto ok_new = [](const void* ptr, const int64_t (&stride)[2]) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0;
  };
  const bool update_ok = p.k_new == nullptr || (ok_new(p.k_new, p.k_new_stride) && ok_new(p.v_new, p.v_new_stride));
  return ok(p.k, p.k_stride) && ok(p.v, p.v_stride) && update_ok;
}

std::size_t scratch_bytes(const Problem& p) {
  const std::size_t slots = static_cast<std::size_t>(p.batch) * static_cast<std::size_t>(p.heads) *
                            static_cast<std::size_t>(chunks(p.cache_len));
  return slots * (static_cast<std::size_t>(p.head_dim) + 1) * sizeof(float);
}

int launch(const Problem& p, void* scratch, void* stream, int sm_count, int cluster) {
  if (p.batch == 0 || p.heads == 0) return 0;
  if (!valid(p, cluster)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (cluster > 0) return launch_one_kernel(p, cluster, s);
  return launch_two_kernel(p, scratch, s, sm_count, true);
}

int launch_chunks(const Problem& p, void* scratch, void* stream, int sm_count) {
  if (p.batch == 0 || p.heads == 0) return 0;
  if (!valid(p, 0)) return cudaErrorInvalidValue;
  return launch_two_kernel(p, scratch, static_cast<cudaStream_t>(stream), sm_count, false);
}

}  // namespace decode_attention
}  // namespace shim
}  // namespace aoti_cuda
