// The decode attention's one-kernel form (decode_attention.hpp; OpSettings::attention_cluster): pass 1's per-chunk work
// (decode_attention_chunk.cuh), its results merged on the fly in each block (RunningMerge) and then across the blocks
// of a thread-block cluster in distributed shared memory.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "shim/ops/decode_attention.hpp"
#include "shim/ops/decode_attention_chunk.cuh"
#include "shim/ops/dependent_launch.hpp"

namespace aoti_cuda {
namespace shim {
namespace decode_attention {
namespace {

using namespace detail;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the one-kernel form's device code exists from sm_90 on
// The one-kernel form's running merge: this thread's column d of one query head, over the chunks its block reads
// (Pass 1's sink when kHeads = 1: thread d receives column d). The maximum and the sum are the same in every thread.
struct RunningMerge {
  float max = -INFINITY, sum = 0.f, out = 0.f;  // out / sum is the block's output; nothing read: max = -inf
  __device__ __forceinline__ void operator()(int, int, float o, float chunk_max, float chunk_sum) {
    const float m = fmaxf(max, chunk_max);  // chunk_max is finite: a chunk holds at least one visible row
    const float keep = exp2f(max - m), add = exp2f(chunk_max - m);  // keep = 0 on the first chunk
    sum = fmaf(sum, keep, chunk_sum * add);
    out = fmaf(out, keep, o * add);
    max = m;
  }
};
#endif

// Brings the K and V rows of chunk `chunk` (below n) of batch b and KV head kv_head into L2, a 128-byte line per
// thread and round (the rows are 16-byte aligned: aligned()), without waiting for them.
template <int kDim>
__device__ __forceinline__ void prefetch_chunk(const Problem& p, int64_t b, int64_t kv_head, int64_t chunk,
                                               int64_t n) {
  constexpr int kLinesPerRow = (kDim * 2 + 127) / 128;
  const int64_t start = chunk * kChunk;
  const int rows = static_cast<int>(n - start < kChunk ? n - start : kChunk);
  const char* k = static_cast<const char*>(p.k) + 2 * (b * p.k_stride[0] + kv_head * p.k_stride[1]);
  const char* v = static_cast<const char*>(p.v) + 2 * (b * p.v_stride[0] + kv_head * p.v_stride[1]);
  for (int i = threadIdx.x; i < rows * kLinesPerRow; i += kWarps * 32) {
    const int64_t row = start + i / kLinesPerRow;
    const int offset = 128 * (i % kLinesPerRow);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(k + 2 * row * p.k_stride[2] + offset));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(v + 2 * row * p.v_stride[2] + offset));
  }
}

// The one-kernel form: a cluster of kCluster blocks per (query head, batch), launched with cluster dimensions
// (kCluster, 1, 1) over a grid of (kCluster, heads, batch). Block r of a cluster reads chunks r, r + kCluster, ...
// below n, one query head a block (as pass 1 does at short positions), and keeps a running merge of them. Then the
// blocks meet at a cluster barrier, and each writes kDim / kCluster columns of the output, merged from every block's
// result in distributed shared memory; a second barrier keeps each block's shared memory alive until the others have
// read it. No scratch and no second kernel: the merge kernel's launch and its wait on pass 1 are gone. sm_90 and
// newer; launch() runs it only where cluster_blocks() says it fits.
template <bool kHalf, int kDim, int kCluster>
__global__ void __launch_bounds__(kWarps * 32) cluster_kernel(Problem p, bool q_vectors) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(kDim % kCluster == 0 && kDim <= kWarps * 32, "whole columns per block; one column per thread");
  __shared__ float merged_out[kDim];
  __shared__ float merged_max, merged_sum;
  // Dependent launch: nothing is read before the wait (the position may come from the kernel before).
  pdl::wait_for_predecessor();
  const int64_t b = blockIdx.z;
  const int64_t pos_b = p.pos[b * p.pos_stride];
  const int group_size = static_cast<int>(p.heads) / static_cast<int>(p.kv_heads);
  const int64_t kv_head = static_cast<int>(blockIdx.y) / group_size;
  const int hq = static_cast<int>(blockIdx.y) % group_size;
  const int64_t head = kv_head * group_size + hq;
  const int64_t n = visible_at(pos_b, p.cache_len);
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());

  RunningMerge merge;
  for (int64_t chunk = rank; chunk * kChunk < n; chunk += kCluster) {
    // A block reading several chunks has the next one's K and V rows brought into L2 while it works on this one:
    // its own loads of that chunk then wait on L2, not on DRAM.
    const int64_t next = chunk + kCluster;
    if (next * kChunk < n) prefetch_chunk<kDim>(p, b, kv_head, next, n);
    chunk_body<kHalf, kDim, 1>(p, q_vectors, b, pos_b, n, chunk, kv_head, head, hq == 0, merge);
  }
  pdl::allow_dependents();  // every K and V row is read (and a block that read none has waited)
  const int tid = threadIdx.x;
  if (tid < kDim) merged_out[tid] = merge.out;
  if (tid == 0) {
    merged_max = merge.max;
    merged_sum = merge.sum;
  }
  cluster.sync();  // every block's result is in its shared memory, visible to the cluster

  constexpr int kColumns = kDim / kCluster;
  if (tid < kColumns) {
    const int d = rank * kColumns + tid;
    float maxes[kCluster], sums[kCluster], outs[kCluster];
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {  // all requested at once
      maxes[r] = *cluster.map_shared_rank(&merged_max, r);
      sums[r] = *cluster.map_shared_rank(&merged_sum, r);
      outs[r] = *cluster.map_shared_rank(&merged_out[d], r);
    }
    float m = -INFINITY;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) m = fmaxf(m, maxes[r]);
    float sum = 0.f, out = 0.f;
    if (n > 0) {  // m is finite: block 0 read chunk 0
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        const float w = exp2f(maxes[r] - m);  // 0 for a block that read nothing
        sum = fmaf(sums[r], w, sum);
        out = fmaf(outs[r], w, out);
      }
    }
    store<kHalf>(p.out, (b * p.heads + head) * kDim + d, n == 0 ? 0.f : out / sum);
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#else
  __trap();  // never launched below sm_90 (cluster_blocks() is 0 there)
#endif
}
// The launch attribute of clusters of `blocks` blocks along x.
cudaLaunchAttribute cluster_dimension(int blocks) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(blocks);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// Launches cluster_kernel with its cluster dimensions and, when allowed, dependent launch.
template <bool kHalf, int kDim, int kCluster>
cudaError_t launch_cluster(const Problem& p, bool q_vectors, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kCluster, static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  config.blockDim = dim3(kWarps * 32);
  config.stream = stream;
  cudaLaunchAttribute attributes[2] = {cluster_dimension(kCluster)};
  config.attrs = attributes;
  config.numAttrs = 1;
  if (pdl::allowed()) {
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 2;
  }
  const cudaError_t err = cudaLaunchKernelEx(&config, cluster_kernel<kHalf, kDim, kCluster>, p, q_vectors);
  const cudaError_t last = cudaGetLastError();
  return err != cudaSuccess ? err : last;
}

// Whether a cluster of kCluster blocks of cluster_kernel<kHalf, kDim, kCluster> can be resident on the current
// device (16 is beyond the portable 8: the kernel must be allowed it first). Asked once per device; a failed query
// (rather than an answer) is not remembered, and reads as "no" this time. A Module asks on its first, uncaptured,
// call of a method (graphs are captured from the second).
template <bool kHalf, int kDim, int kCluster>
bool cluster_fits(int device) {
  constexpr int kDevices = 64;
  static std::atomic<int8_t> known[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  if (device < 0 || device >= kDevices) return false;
  int8_t k = known[device].load(std::memory_order_relaxed);
  if (k == 0) {
    auto kernel = cluster_kernel<kHalf, kDim, kCluster>;
    bool ok = pdl::sm90_or_newer();  // clusters exist from sm_90 on (`device` is the current one)
    if (ok && kCluster > 8) {
      ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
    }
    int clusters = 0;
    cudaError_t asked = cudaSuccess;
    if (ok) {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(kCluster);
      config.blockDim = dim3(kWarps * 32);
      cudaLaunchAttribute attribute = cluster_dimension(kCluster);
      config.attrs = &attribute;
      config.numAttrs = 1;
      asked = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
      ok = asked == cudaSuccess && clusters > 0;
    }
    cudaGetLastError();  // leave no error behind
    if (asked != cudaSuccess) return false;  // no answer: asked again next time
    k = ok ? 2 : 1;
    known[device].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

template <bool kHalf, int kDim>
int cluster_blocks_of(int wanted, int device) {
  if (wanted >= 16 && cluster_fits<kHalf, kDim, 16>(device)) return 16;
  if (wanted >= 8 && cluster_fits<kHalf, kDim, 8>(device)) return 8;
  return 0;
}

}  // namespace

int cluster_blocks(const Problem& p, int wanted, int device) {
  if (wanted < 8 || !supports_head_dim(p.head_dim)) return 0;
  if (p.fp16) return p.head_dim == 64 ? cluster_blocks_of<true, 64>(wanted, device)
                                      : cluster_blocks_of<true, 128>(wanted, device);
  return p.head_dim == 64 ? cluster_blocks_of<false, 64>(wanted, device)
                          : cluster_blocks_of<false, 128>(wanted, device);
}

namespace detail {

int launch_one_kernel(const Problem& p, int cluster, cudaStream_t stream) {
  const bool vectors = q_vectors(p);
  cudaError_t err;
  if (p.fp16) {
    err = p.head_dim == 64 ? (cluster == 16 ? launch_cluster<true, 64, 16>(p, vectors, stream)
                                            : launch_cluster<true, 64, 8>(p, vectors, stream))
                           : (cluster == 16 ? launch_cluster<true, 128, 16>(p, vectors, stream)
                                            : launch_cluster<true, 128, 8>(p, vectors, stream));
  } else {
    err = p.head_dim == 64 ? (cluster == 16 ? launch_cluster<false, 64, 16>(p, vectors, stream)
                                            : launch_cluster<false, 64, 8>(p, vectors, stream))
                           : (cluster == 16 ? launch_cluster<false, 128, 16>(p, vectors, stream)
                                            : launch_cluster<false, 128, 8>(p, vectors, stream));
  }
  return static_cast<int>(err);
}

}  // namespace detail
}  // namespace decode_attention
}  // namespace shim
}  // namespace aoti_cuda
