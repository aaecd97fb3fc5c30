// The read floors of fused_linear_bench --chain: kernels that do only what bounds a decode layer's projections (read
// their weight bytes, wait, read the row, store, and for the persistent forms count finished tiles), so that the
// chain's measured layers can be put beside the fastest a layer's projections could run in each structure
// (docs/benchmarks/llm.md, "The targets with dependent launch on" and "A persistent layer kernel's floor"); and the
// kernels of the L2 prefetch rows ("The next projection's weights prefetched into L2").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "stream_read.cuh"
#include "shim/ops/dependent_launch.hpp"
#include "shim/ops/ptx.cuh"

namespace aoti_cuda_bench {

// Byte ranges to prefetch into L2 (a later projection's weight and scales), for the prefetch rows below.
struct PrefetchSet {
  const char* base[4];
  std::size_t bytes[4];  // multiples of 16
  int count;
};
constexpr std::size_t kPrefetchChunk = 64 * 1024;

// Asks the L2 for bytes [begin, end) of `base`, the calling thread's part: chunks first, first + step, ... of
// kPrefetchChunk bytes, each one bulk prefetch (cp.async.bulk.prefetch.L2: one instruction, no registers or
// shared memory held while the bytes come) on sm_90; below it, a 128-byte line a chunk (prefetch.global.L2).
__device__ __forceinline__ void prefetch_range(const char* base, std::size_t begin, std::size_t end, unsigned first,
                                               unsigned step) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (std::size_t off = begin + first * kPrefetchChunk; off < end; off += step * kPrefetchChunk) {
    const unsigned size = static_cast<unsigned>(end - off < kPrefetchChunk ? end - off : kPrefetchChunk);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(size) : "memory");
  }
#else
  for (std::size_t off = begin + first * 128; off < end; off += step * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
  }
#endif
}

// --chain's L2 prefetch branch: one warp that asks the L2 for every range of `set` and exits (older GPUs' line
// prefetches make it far slower there). The question its rows answer: does HBM kept busy during another kernel's
// ramp, tail and the attention feed the next projection from L2 faster than its own loads from HBM
// (docs/benchmarks/llm.md, "The next projection's weights prefetched into L2").
__global__ void __launch_bounds__(32) l2_prefetch_kernel(PrefetchSet set) {
  for (int r = 0; r < set.count; ++r) prefetch_range(set.base[r], 0, set.bytes[r], threadIdx.x, 32);
}

// The in-kernel form: this block's share of `set` (each range cut into gridDim.x slices of whole 16-byte vectors),
// asked of the L2 by the block's threads, so that every SM's copy engine takes a part.
__device__ __forceinline__ void prefetch_block_share(const PrefetchSet& set) {
  for (int r = 0; r < set.count; ++r) {
    const std::size_t slice = (set.bytes[r] / 16 + gridDim.x - 1) / gridDim.x * 16;
    const std::size_t begin = blockIdx.x * slice;
    const std::size_t end = begin + slice < set.bytes[r] ? begin + slice : set.bytes[r];
    prefetch_range(set.base[r], begin, end, threadIdx.x, blockDim.x);
  }
}

// --chain's read floor: a projection replaced by a kernel that only reads its weight bytes (and int4 scales), once,
// with the contract of dependent_launch.hpp at its most favourable: every load issued before the wait (the weights
// are constants), dependents allowed right after it. A projection kernel cannot beat this while it is one kernel
// per projection; the chain's floor rows put the measured layers beside it.
constexpr int kFloorThreads = 256, kFloorLoads = 8;
constexpr std::size_t kFloorTile = static_cast<std::size_t>(kFloorThreads) * kFloorLoads;  // vectors a block or tile

// `row` non-null: after the wait every thread also reads one vector of the row (as a projection reads its input
// row, and as each stage of the persistent floor below does) and the kernel stores one vector a thread. Before the
// wait the block also asks the L2 for its share of `next` (prefetch_block_share).
__global__ void __launch_bounds__(kFloorThreads) floor_read_kernel(const uint4* a, std::size_t na, const uint4* b,
                                                                   std::size_t nb, const uint4* row, uint4* out,
                                                                   uint4* sink, PrefetchSet next) {
  // Thread t of the grid reads vectors t, t + T, ... (T threads): coalesced, kFloorLoads in flight per thread.
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  uint4 v[kFloorLoads];
#pragma unroll
  for (int i = 0; i < kFloorLoads; ++i) {
    const std::size_t j = t + i * threads;
    v[i] = j < na ? load_stream(a + j)
                  : (j - na < nb ? load_stream(b + (j - na)) : make_uint4(0, 0, 0, 0));
  }
  prefetch_block_share(next);  // `next`: the following projection's bytes (none: count 0)
  aoti_cuda::shim::pdl::wait_for_predecessor();
  aoti_cuda::shim::pdl::allow_dependents();
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < kFloorLoads; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  if (row != nullptr) {
    const uint4 x = row[threadIdx.x];
    out[threadIdx.x] = make_uint4(acc ^ x.x ^ x.y, x.z, x.w, 0);
  }
  if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 1, 2, 3);  // practically never: keeps the loads
}

// --chain's persistent floor: what a layer's projections would cost if they were stages of one kernel instead of
// one kernel each (the GPU machine README's plan, "a persistent layer kernel"). Each projection's bytes are cut
// into tiles of kFloorThreads x kFloorLoads vectors (32 KB); the tiles of every stage, in order, are dealt round
// robin to a grid of resident blocks. A block issues its tile's loads, waits until the previous stage has counted
// all of its tiles finished (an acquire load polled by one thread), reads the row the previous stage "wrote" (one
// vector a thread, as a real stage reads its input row), stores one vector and counts its tile finished (a release
// add). Dependent launch orders the kernels; the counters are zeroed by a memset at the start of the step. Only the
// bytes and the synchronization, as floor_read_kernel is for one kernel a projection.
struct FloorStage {
  const uint4 *a, *b;  // weight and (int4) scale vectors
  std::size_t na, nb;
  int tiles, first_tile;  // tiles of this stage; tile index of its first among all of the kernel's stages
};

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void wait_count(const unsigned* counter, unsigned need) {
  while (load_acquire(counter) < need) {
  }
}

// Counters sit kCounterWords apart (128 bytes): stage s's count is word kCounterWords s of a kernel's counters (the
// spread form: word kCounterWords (Spread s + i) for its counter i).
constexpr int kCounterWords = 32;

// The stage of tile g (of the kernel's tiles), searching forward from stage s: a block meets its tiles in order.
__device__ __forceinline__ int stage_of(const FloorStage* stages, int count, int s, int g) {
  while (s + 1 < count && g >= stages[s + 1].first_tile) ++s;
  return s;
}

// A stage's count is kept in `Spread` counters 32 words apart (tile t adds to counter t % Spread), so that the
// finished tiles' adds do not all queue on one address; thread i < Spread of a waiting block polls counter i.
template <int Spread>
__global__ void __launch_bounds__(kFloorThreads) persistent_floor_kernel(const FloorStage* stages, int count,
                                                                         int total_tiles, unsigned* counters,
                                                                         const uint4* row, uint4* out, uint4* sink) {
  int s = 0;
  bool waited = false;
  uint32_t acc = 0;
  for (int g = blockIdx.x; g < total_tiles; g += gridDim.x) {
    s = stage_of(stages, count, s, g);  // the table is a program constant, read before the wait too
    const FloorStage st = stages[s];
    const int t = g - st.first_tile;
    const std::size_t base = static_cast<std::size_t>(t) * kFloorTile + threadIdx.x;
    uint4 v[kFloorLoads];
#pragma unroll
    for (int i = 0; i < kFloorLoads; ++i) {
      const std::size_t j = base + static_cast<std::size_t>(i) * kFloorThreads;
      v[i] = j < st.na ? load_stream(st.a + j)
                       : (j - st.na < st.nb ? load_stream(st.b + (j - st.na))
                                            : make_uint4(0, 0, 0, 0));
    }
    if (!waited) {
      aoti_cuda::shim::pdl::wait_for_predecessor();
      aoti_cuda::shim::pdl::allow_dependents();
      waited = true;
    }
    if (s > 0) {
      if (threadIdx.x < Spread) {
        const int tiles = stages[s - 1].tiles;
        const unsigned need = static_cast<unsigned>(tiles / Spread + (static_cast<int>(threadIdx.x) < tiles % Spread));
        wait_count(counters + ((s - 1) * Spread + threadIdx.x) * kCounterWords, need);
      }
      __syncthreads();
    }
    const uint4 x = row[threadIdx.x];
    acc ^= x.x ^ x.y;
#pragma unroll
    for (int i = 0; i < kFloorLoads; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    out[threadIdx.x] = make_uint4(acc, x.z, x.w, 0);
    __syncthreads();  // every thread's store before the count
    if (threadIdx.x == 0) add_release(counters + (s * Spread + t % Spread) * kCounterWords, 1);
  }
  if (!waited) aoti_cuda::shim::pdl::wait_for_predecessor();
  if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 1, 2, 3);  // practically never: keeps the loads
}

// The ring form of the persistent floor: Blocks blocks an SM, each with Slots tiles of shared memory (Blocks x
// Slots x 32 KB <= 192 KB an SM). A block copies its next tiles (cp.async, one group a tile) while it waits on and
// reads the current one, so every tile of a layer is in flight from the start when the slots cover them (an int4
// layer: 748 tiles; 132 SMs x 6 slots = 792), which persistent_floor_kernel's registers could not do (50 registers:
// four blocks an SM, 528 tiles at once). A block reads the row once a stage, as a real stage would.
template <int Slots, int Blocks>
__global__ void __launch_bounds__(kFloorThreads, Blocks) ring_floor_kernel(const FloorStage* stages, int count,
                                                                           int total_tiles, unsigned* counters,
                                                                           const uint4* row, uint4* out,
                                                                           uint4* sink) {
  extern __shared__ uint4 ring[];
  namespace ptx = aoti_cuda::shim::ptx;
  int issue_stage = 0;
  auto issue = [&](int i) {  // tile i of this block into slot i % Slots; an empty group past the last tile
    const int g = blockIdx.x + i * gridDim.x;
    if (g < total_tiles) {
      issue_stage = stage_of(stages, count, issue_stage, g);
      const FloorStage st = stages[issue_stage];
      const std::size_t base = static_cast<std::size_t>(g - st.first_tile) * kFloorTile + threadIdx.x;
      uint4* slot = ring + (i % Slots) * kFloorTile + threadIdx.x;
#pragma unroll
      for (int k = 0; k < kFloorLoads; ++k) {
        const std::size_t j = base + static_cast<std::size_t>(k) * kFloorThreads;
        const uint4* src = j < st.na ? st.a + j : (j - st.na < st.nb ? st.b + (j - st.na) : st.a);
        ptx::cp_async16(ptx::shared_address(slot + k * kFloorThreads), src, j < st.na + st.nb ? 16 : 0);
      }
    }
    ptx::cp_async_commit();
  };
  for (int i = 0; i < Slots; ++i) issue(i);  // weights only: allowed before the wait
  aoti_cuda::shim::pdl::wait_for_predecessor();
  aoti_cuda::shim::pdl::allow_dependents();
  int s = 0, row_stage = -1;
  uint32_t acc = 0;
  uint4 x = make_uint4(0, 0, 0, 0);
  for (int i = 0;; ++i) {
    const int g = blockIdx.x + i * gridDim.x;
    if (g >= total_tiles) break;
    s = stage_of(stages, count, s, g);
    ptx::cp_async_wait<Slots - 1>();  // one group a tile, committed in order: tile i has landed
    if (s > 0 && threadIdx.x == 0) {
      wait_count(counters + (s - 1) * kCounterWords, static_cast<unsigned>(stages[s - 1].tiles));
    }
    __syncthreads();  // every thread's copies of tile i, and the previous stage complete
    const uint4* slot = ring + (i % Slots) * kFloorTile + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kFloorLoads; ++k) {
      const uint4 v = slot[k * kFloorThreads];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (s != row_stage) {  // the stage's input row, once a stage
      x = row[threadIdx.x];
      row_stage = s;
    }
    out[threadIdx.x] = make_uint4(acc ^ x.x ^ x.y, x.z, x.w, 0);
    __syncthreads();  // the stores before the count, the slot's reads before its next copy
    if (threadIdx.x == 0) add_release(counters + s * kCounterWords, 1);
    issue(i + Slots);
  }
  ptx::cp_async_wait<0>();
  if (acc == 0x9E3779B9u) sink[0] = make_uint4(acc, 1, 2, 3);  // practically never: keeps the loads
}

}  // namespace aoti_cuda_bench
