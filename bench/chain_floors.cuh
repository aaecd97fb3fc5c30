// The read floors of fused_linear_bench --chain: kernels that do only what bounds a decode layer's projections (read
// their weight bytes, wait, read the row, store, and for the persistent forms count finished tiles), so that the
// chain's measured layers can be put beside the fastest a layer's projections could run in each structure
// (docs/benchmarks/llm.md, "The targets with dependent launch on" and "A persistent layer kernel's floor"); and the
// kernels of the L2 prefetch rows ("The next projection's weights prefetched into L2").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "l2_flush.cuh"
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

// The branch the prefetch rows fork off the captured stream: fork() makes `side` wait for what `s` has enqueued so
// far and launches l2_prefetch_kernel there; join() makes `s` wait for the branch (a capture must join it before it
// ends). One event does for every fork: each is waited on right after it is recorded.
class PrefetchBranch {
 public:
  PrefetchBranch() {
    check_or_exit(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_or_exit(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    check_or_exit(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~PrefetchBranch() {
    cudaEventDestroy(fork_);
    cudaEventDestroy(join_);
    cudaStreamDestroy(side_);
  }
  PrefetchBranch(const PrefetchBranch&) = delete;
  PrefetchBranch& operator=(const PrefetchBranch&) = delete;

  cudaError_t fork(const PrefetchSet& set, cudaStream_t s) const {
    if (set.count == 0) return cudaSuccess;
    cudaError_t err = cudaEventRecord(fork_, s);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(side_, fork_, 0);
    if (err != cudaSuccess) return err;
    l2_prefetch_kernel<<<1, 32, 0, side_>>>(set);
    return cudaGetLastError();
  }
  cudaError_t join(cudaStream_t s) const {
    const cudaError_t err = cudaEventRecord(join_, side_);
    return err == cudaSuccess ? cudaStreamWaitEvent(s, join_, 0) : err;
  }

 private:
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

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

// The persistent floor rows' state: for a step of stages (four a layer, in order: each with its a, b, na and nb),
// the stage tables (a layer's, tiles counted from the layer's first; and the whole step's, counted from the step's
// first) and the counters (one or kSpread a stage, kCounterWords apart), and launch() for one row.
class PersistentFloor {
 public:
  static constexpr int kStagesPerLayer = 4;
  static constexpr int kSpread = 16;  // the spread form's counters a stage

  explicit PersistentFloor(std::vector<FloorStage> stages) : count_(static_cast<int>(stages.size())) {
    std::vector<FloorStage> step = stages;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      FloorStage& st = stages[i];
      st.tiles = static_cast<int>((st.na + st.nb + kFloorTile - 1) / kFloorTile);
      if (i % kStagesPerLayer == 0) layer_tiles_.push_back(0);
      st.first_tile = layer_tiles_.back();
      layer_tiles_.back() += st.tiles;
      step[i] = st;
      step[i].first_tile = step_tiles_;
      step_tiles_ += st.tiles;
    }
    const std::size_t table_bytes = stages.size() * sizeof(FloorStage);
    counter_bytes_ = stages.size() * kSpread * kCounterWords * sizeof(unsigned);
    check_or_exit(cudaMalloc(&layer_table_, table_bytes), "cudaMalloc");
    check_or_exit(cudaMalloc(&step_table_, table_bytes), "cudaMalloc");
    check_or_exit(cudaMalloc(&counters_, counter_bytes_), "cudaMalloc");
    check_or_exit(cudaMemcpy(layer_table_, stages.data(), table_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    check_or_exit(cudaMemcpy(step_table_, step.data(), table_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~PersistentFloor() {
    cudaFree(layer_table_);
    cudaFree(step_table_);
    cudaFree(counters_);
  }
  PersistentFloor(const PersistentFloor&) = delete;
  PersistentFloor& operator=(const PersistentFloor&) = delete;

  // Layer l's row: one kernel a layer (`whole_step` false) or one for the step, launched with layer 0 (later layers
  // launch nothing; layer 0 also zeroes the counters); as many blocks as fit on the GPU at once; `spread`: each
  // stage's count over kSpread counters; `ring` 1, 2, 3: ring_floor_kernel with 1 block an SM and 6 slots, 2 and 3,
  // 3 and 2 instead (`spread` ignored). `row`, `out`, `sink`: the kernels' row, stores and sink.
  cudaError_t launch(int l, bool whole_step, bool spread, int ring, const uint4* row, uint4* out, uint4* sink,
                     int sms, cudaStream_t s) const {
    if (whole_step && l > 0) return cudaSuccess;
    if (l == 0) {
      const cudaError_t err = cudaMemsetAsync(counters_, 0, counter_bytes_, s);
      if (err != cudaSuccess) return err;
    }
    constexpr int kSlots[] = {0, 6, 3, 2};  // ring form r: r blocks an SM with kSlots[r] tiles of shared memory each
    const auto kernel = ring == 1   ? ring_floor_kernel<6, 1>
                        : ring == 2 ? ring_floor_kernel<3, 2>
                        : ring == 3 ? ring_floor_kernel<2, 3>
                        : spread    ? persistent_floor_kernel<kSpread>
                                    : persistent_floor_kernel<1>;
    const std::size_t smem = kSlots[ring] * kFloorTile * sizeof(uint4);
    int per_sm = ring;
    const cudaError_t err =
        ring > 0 ? cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem))
                 : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kFloorThreads, 0);
    if (err != cudaSuccess) return err;
    const int stage_words = (spread && ring == 0 ? kSpread : 1) * kCounterWords;
    const int first = kStagesPerLayer * l;
    return aoti_cuda::shim::pdl::launch(kernel, dim3(static_cast<unsigned>(per_sm * sms)), dim3(kFloorThreads), smem,
                                        s, whole_step ? step_table_ : layer_table_ + first,
                                        whole_step ? count_ : kStagesPerLayer,
                                        whole_step ? step_tiles_ : layer_tiles_[l],
                                        whole_step ? counters_ : counters_ + first * stage_words, row, out, sink);
  }

 private:
  int count_;
  std::vector<int> layer_tiles_;
  int step_tiles_ = 0;
  FloorStage *layer_table_ = nullptr, *step_table_ = nullptr;
  unsigned* counters_ = nullptr;
  std::size_t counter_bytes_ = 0;
};

}  // namespace aoti_cuda_bench
