// fused_linear_bench: the fused linear kernels (src/shim/ops/fused_linear.hpp) against the plain projections they
// replace, bf16 and int4, at the 1.1 B model's decode shapes. Not a test: prints numbers.
//
//   aoti_cuda_fused_linear_bench [--reps N] [--json out.json] [--chain [--position P]]
//
// Why: a decode export takes 5-8 minutes to make on the GPU machine; this times each projection of a layer in a few
// seconds, so a change to the kernels (the norm prologue above all: docs/benchmarks/llm.md, "The fused linear
// operator") can be measured on its own before an export.
//
// Each row is one projection: q/k/v after the attention's RMSNorm, o plus the residual, gate/up after the FFN's
// RMSNorm with the SwiGLU, down plus the residual, the output head after the final RMSNorm. Timed as a decode step
// runs them: R back-to-back launches over R distinct copies of the weights (R x bytes >= 256 MiB, so every call
// reads HBM), captured in a CUDA graph, replayed after an L2 flush; the median per-call time of the replays.
// "plain" is the kernel the unfused export runs for the matmul alone (bf16: the few-row GEMV, int4: the
// _weight_int4pack_mm dispatch), without the RMSNorm / SwiGLU / residual kernels around it. The bf16 projections
// with a norm are also timed with each number of warps per column forced (rows "split N").
//
// --chain instead times whole decode layers: the 22 layers of the 1.1 B model (distinct weights and a 4,096-position
// KV cache each, decode position 128 or P), each layer the six kernels of the fused exports (norm + q/k/v, the decode
// attention's two passes in the qkv form, o + residual, norm + gate/up + SwiGLU, down + residual), captured in one
// graph as a decode step replays them, bf16 and int4. Eight ways first: plain launches; dependent launch
// (OpSettings::dependent_launch); dependent launch with the projections' first weight loads issued before their
// wait (Problem::weights_early, what the shim does for weights that are program constants), and with the attention's
// merge kernel walking every chunk one column a thread (OpSettings::merge_slices off); the decode attention as one
// kernel over thread-block clusters of 16 or 8 (OpSettings::attention_cluster), plainly and with both of the above.
// Then rows that say what bounds a layer: the projections alone (no attention); the read floor (each projection
// replaced by a kernel that only reads its bytes, floor_read_kernel) with and without the attention, and with a row
// read and a store after each wait; and the persistent floor (persistent_floor_kernel, ring_floor_kernel: the same
// bytes and row reads as stages of one kernel a layer or a step, chained by counters instead of kernel boundaries);
// and two ways of fetching the next projection's weights into L2 ahead of it: a graph branch forked where each
// projection is enqueued (l2_prefetch_kernel, one warp) and each block of the read floor taking a share
// (prefetch_block_share). The floor and prefetch kernels are in chain_floors.cuh.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chain_floors.cuh"
#include "l2_flush.cuh"
#include "stream_read.cuh"
#include "shim/op_settings.hpp"
#include "shim/ops/decode_attention.hpp"
#include "shim/ops/dependent_launch.hpp"
#include "shim/ops/fused_linear.hpp"
#include "shim/ops/gemv.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"

namespace {

namespace fl = aoti_cuda::shim::fused_linear;
namespace gemm = aoti_cuda::shim::gemm;
namespace int4mm = aoti_cuda::shim::int4mm;
using aoti_cuda_bench::FloorStage;
using aoti_cuda_bench::kFloorThreads;
using aoti_cuda_bench::kFloorTile;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "fused_linear_bench: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// Device buffer of `bytes` filled with bf16 pairs of small magnitude (also valid packed int4 words).
void* filled(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  std::vector<uint32_t> words((bytes + 3) / 4);
  uint64_t s = 0x9E3779B97F4A7C15ull ^ bytes;
  for (auto& w : words) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    w = (static_cast<uint32_t>(s >> 16) & 0x007F007Fu) | 0x3C003C00u;  // bf16 in [2^-7, 2^-6)
  }
  check(cudaMemcpy(p, words.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

struct Projection {
  const char* name;
  int64_t n, k;  // weight [n, k] (int4: k as the model has it; the packing pads it to a multiple of 1024)
  bool norm, swiglu, residual;
};

// The 1.1 B model's decode layer and head (d 2048, 16 + 2 x 4 heads of 128, FFN 5632, vocab 32000).
const Projection kProjections[] = {
    {"norm + q/k/v", 3072, 2048, true, false, false},
    {"o + residual", 2048, 2048, false, false, true},
    {"norm + gate/up + SwiGLU", 11264, 2048, true, true, false},
    {"down + residual", 2048, 5632, false, false, true},
    {"norm + head", 32000, 2048, true, false, false},
};

constexpr int kGroup = 128;
int64_t padded_k(int64_t k) { return (k + 1023) / 1024 * 1024; }

// Per-call time of `copies` launches of `launch(copy)` in one CUDA graph, replayed after an L2 flush.
double per_call_us(int copies, int reps, const std::function<int(int, cudaStream_t)>& launch, void* flush,
                   std::size_t flush_bytes) {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int r = 0; r < 2; ++r) check(static_cast<cudaError_t>(launch(r, stream)), "warm-up launch");  // attributes
  check(cudaStreamSynchronize(stream), "warm-up");
  const double us = aoti_cuda_bench::captured_per_call_us(stream, copies, reps, flush, flush_bytes,
                                                          [&](int r) { return launch(r, stream); });
  cudaStreamDestroy(stream);
  return us;
}

// One fused projection of weight [n, k] (int4: packed with K padded to kp, scales and zeros in sz), as the shim
// launches it; split forces the bf16 kernel's warps per column (0: launch()'s choice).
struct FusedCall {
  bool int4 = false;
  const void *x = nullptr, *norm = nullptr, *w = nullptr, *sz = nullptr, *residual = nullptr;
  void* out = nullptr;
  int64_t n = 0, k = 0, kp = 0;
  bool swiglu = false, weights_early = false;
  int split = 0;
};

int launch_fused(const FusedCall& c, int sms, cudaStream_t s) {
  const int64_t n_out = c.swiglu ? c.n / 2 : c.n;
  if (!c.int4) {
    fl::Problem p;
    p.x = c.x;
    p.x_row_stride = c.k;
    p.norm_weight = c.norm;
    p.eps = 1e-5f;
    p.swiglu = c.swiglu;
    p.weight = c.w;
    p.weight_row_stride = c.k;
    p.residual = c.residual;
    p.residual_row_stride = n_out;
    p.out = c.out;
    p.rows = 1;
    p.n = c.n;
    p.k = c.k;
    p.split = c.split;
    p.weights_early = c.weights_early;
    p.norm_after = fl::norm_after_enabled();  // as the shim (AOTI_CUDA_NORM_AFTER)
    return fl::launch(p, s, sms);
  }
  fl::Int4Problem p;
  p.x = c.x;
  p.x_row_stride = c.k;
  p.k_x = c.k;
  p.norm_weight = c.norm;
  p.eps = 1e-5f;
  p.swiglu = c.swiglu;
  p.qdata = c.w;
  p.scale_and_zero = c.sz;
  p.k = c.kp;
  p.n_packed = c.n;
  p.group = kGroup;
  p.inner_k_tiles = 8;
  p.residual = c.residual;
  p.residual_row_stride = n_out;
  p.out = c.out;
  p.rows = 1;
  p.n = c.n;
  p.weights_early = c.weights_early;
  p.norm_early = c.weights_early;  // the bench's norm weight is a constant too
  p.norm_after = fl::norm_after_enabled();  // as the shim (AOTI_CUDA_NORM_AFTER)
  return fl::launch_int4(p, s);
}

struct Row {
  std::string weights, name;
  double bytes, plain_us, fused_us;
};

void print(const Row& r) {
  std::printf("%-4s %-34s %7.2f MB  plain %6.2f us (%5.0f GB/s)  fused %6.2f us (%5.0f GB/s)  "
              "fused - plain %+5.2f us\n",
              r.weights.c_str(), r.name.c_str(), r.bytes / 1e6, r.plain_us, r.bytes / r.plain_us / 1e3, r.fused_us,
              r.bytes / r.fused_us / 1e3, r.fused_us - r.plain_us);
}

using Launch = std::function<int(int, cudaStream_t)>;  // launches the call on weight copy r

// One projection's operands on the device: `copies` copies of its weights (int4: packed, K padded as torchao pads
// it, with their scales and zeros), the row, the norm weight, the residual and the output.
struct Operands {
  Projection pr;
  bool int4;
  int64_t kp, n_out;
  std::size_t wstride, sstride;
  double bytes;
  int copies;
  char *w = nullptr, *sz = nullptr;
  void *x = nullptr, *norm = nullptr, *residual = nullptr, *out = nullptr;

  Operands(const Projection& projection, bool int4_weights) : pr(projection), int4(int4_weights) {
    kp = int4 ? padded_k(pr.k) : pr.k;
    n_out = pr.swiglu ? pr.n / 2 : pr.n;
    const std::size_t wbytes = static_cast<std::size_t>(int4 ? pr.n * kp / 2 : pr.n * pr.k * 2);
    const std::size_t sbytes = int4 ? static_cast<std::size_t>(kp / kGroup * pr.n * 4) : 0;
    wstride = (wbytes + 255) / 256 * 256;
    sstride = (sbytes + 255) / 256 * 256;
    bytes = static_cast<double>(wbytes + sbytes);
    copies = static_cast<int>(std::min(2048.0, std::max(8.0, std::floor(256.0 * (1 << 20) / bytes) + 1)));
    w = static_cast<char*>(filled(wstride * copies));
    if (int4) sz = static_cast<char*>(filled(sstride * copies));
    x = filled(static_cast<std::size_t>(kp * 2));  // int4's plain path reads the padded row
    norm = filled(static_cast<std::size_t>(pr.k * 2));
    residual = filled(static_cast<std::size_t>(n_out * 2));
    out = filled(static_cast<std::size_t>(pr.n * 2));
  }
  ~Operands() {
    for (void* p : {static_cast<void*>(w), static_cast<void*>(sz), x, norm, residual, out}) cudaFree(p);
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;

  // The plain matmul the unfused export runs (bf16: the few-row GEMV; int4: the _weight_int4pack_mm dispatch).
  Launch plain(int sms) const {
    if (!int4) {
      return [this](int r, cudaStream_t s) {
        const gemm::Batch a{gemm::Matrix{x, 1, pr.k, pr.k, 1}, 0};
        const gemm::Batch b{gemm::Matrix{w + r * wstride, pr.k, pr.n, 1, pr.k}, 0};
        const gemm::Batch c{gemm::Matrix{out, 1, pr.n, pr.n, 1}, 0};
        return gemm::gemv::launch(gemm::gemv::Kernel::kDot, gemm::gemv::Element::kBFloat16, a, b, c, 1, 1.0f, 0.0f,
                                  s);
      };
    }
    return [this, sms](int r, cudaStream_t s) {
      int4mm::Problem p;
      p.x = x;
      p.w = w + r * wstride;
      p.sz = sz + r * sstride;
      p.out = out;
      p.m = 1;
      p.n = pr.n;
      p.k = kp;
      p.group = kGroup;
      p.inner_k_tiles = 8;
      return int4mm::launch(p, s, sms);
    };
  }

  // The fused projection; `split` forces the bf16 kernel's warps per column (0: launch()'s choice).
  Launch fused(int sms, int split) const {
    return [this, sms, split](int r, cudaStream_t s) {
      FusedCall c;
      c.int4 = int4;
      c.x = x;
      c.norm = pr.norm ? norm : nullptr;
      c.w = w + r * wstride;
      c.sz = int4 ? sz + r * sstride : nullptr;
      c.residual = pr.residual ? residual : nullptr;
      c.out = out;
      c.n = pr.n;
      c.k = pr.k;
      c.kp = kp;
      c.swiglu = pr.swiglu;
      c.split = split;
      return launch_fused(c, sms, s);
    };
  }
};

// --chain: the decode layers of the fused exports back to back (see the top of the file), one row a ChainMode.
struct ChainMode {
  const char* name;
  bool dependent, early;
  int cluster;  // the decode attention as one kernel over clusters of this many blocks (0: two kernels)
  int floor = 0;                // the projections replaced by their read floor (floor_read_kernel); 2: with a row
                                // read and a store after the wait; 3: and each block prefetching its share of the
                                // next projection's bytes into L2 before its wait
  bool with_attention = true;   // false: the projections alone
  int persistent = 0;           // the persistent floor: 1 a kernel a layer, 2 one kernel a step (no attention)
  bool spread = false;          // its counts spread over PersistentFloor::kSpread counters a stage
  int ring = 0;                 // ring_floor_kernel (tiles copied ahead into shared memory): 1, 2 or 3 blocks an SM
  int prefetch_ahead = 0;       // Layers::layer's prefetch branch: the projection this many later
  std::size_t prefetch_cap = 0;  // and only its ranges' first bytes (0: all)
  bool merge = true;            // false: the attention's pass 1 without its merge kernel (launch_chunks; o reads the
                                // row the merge would have written)
  bool slices = true;           // OpSettings::merge_slices (the default): the merge in 4 slices past 8 chunks
};

// `m` with the merge kernel one column a thread at every position (OpSettings::merge_slices off).
ChainMode one_column(ChainMode m) {
  m.slices = false;
  return m;
}

// `m` with the attention's pass 1 alone, no merge kernel.
ChainMode without_merge(ChainMode m) {
  m.merge = false;
  return m;
}

struct Layers {
  static constexpr int kCount = 22;
  static constexpr int64_t kD = 2048, kQkv = 3072, kFfn = 5632, kHeads = 16, kKvHeads = 4, kDim = 128, kCache = 4096;
  bool int4;
  struct Weights {
    char *w = nullptr, *sz = nullptr;
    int64_t n = 0, k = 0, kp = 0;
    std::size_t w_bytes = 0, sz_bytes = 0;  // of w and of sz (0 in bf16)
  };
  std::vector<Weights> qkv, o, gate_up, down;
  std::vector<void*> k_cache, v_cache, owned;
  void *norm = nullptr, *rope_cos = nullptr, *rope_sin = nullptr, *pos = nullptr, *scratch = nullptr;
  void *h[2] = {}, *qkv_out = nullptr, *attn = nullptr, *h2 = nullptr, *act = nullptr;
  std::optional<aoti_cuda_bench::PersistentFloor> persistent;  // the persistent floor rows' tables and counters
  void* floor_out = nullptr;                                    // the floor kernels' stores
  aoti_cuda_bench::PrefetchBranch branch;  // the prefetch rows' graph branch

  void* keep(void* p) {
    owned.push_back(p);
    return p;
  }
  Weights make(int64_t n, int64_t k) {
    Weights w;
    w.n = n;
    w.k = k;
    w.kp = int4 ? padded_k(k) : k;
    w.w_bytes = static_cast<std::size_t>(int4 ? n * w.kp / 2 : n * k * 2);
    w.sz_bytes = int4 ? static_cast<std::size_t>(w.kp / kGroup * n * 4) : 0;
    w.w = static_cast<char*>(keep(filled(w.w_bytes)));
    if (int4) w.sz = static_cast<char*>(keep(filled(w.sz_bytes)));
    return w;
  }
  Layers(bool int4_weights, int64_t position) : int4(int4_weights) {
    for (int l = 0; l < kCount; ++l) {
      qkv.push_back(make(kQkv, kD));
      o.push_back(make(kD, kD));
      gate_up.push_back(make(2 * kFfn, kD));
      down.push_back(make(kD, kFfn));
      k_cache.push_back(keep(filled(static_cast<std::size_t>(kKvHeads * kCache * kDim * 2))));
      v_cache.push_back(keep(filled(static_cast<std::size_t>(kKvHeads * kCache * kDim * 2))));
    }
    norm = keep(filled(static_cast<std::size_t>(kFfn * 2)));
    rope_cos = keep(filled(static_cast<std::size_t>(kCache * kDim / 2 * 4)));
    rope_sin = keep(filled(static_cast<std::size_t>(kCache * kDim / 2 * 4)));
    h[0] = keep(filled(kD * 2));
    h[1] = keep(filled(kD * 2));
    qkv_out = keep(filled(kQkv * 2));
    attn = keep(filled(kD * 2));
    h2 = keep(filled(kD * 2));
    act = keep(filled(static_cast<std::size_t>(padded_k(kFfn) * 2)));
    pos = keep(filled(8));
    check(cudaMemcpy(pos, &position, 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    scratch = keep(filled(aoti_cuda::shim::decode_attention::scratch_bytes(attention(0))));
    make_floors();
  }

  void make_floors() {
    std::vector<FloorStage> stages;
    for (int l = 0; l < kCount; ++l) {
      for (const Weights* w : {&qkv[l], &o[l], &gate_up[l], &down[l]}) {
        stages.push_back({reinterpret_cast<const uint4*>(w->w), reinterpret_cast<const uint4*>(w->sz),
                          w->w_bytes / 16, w->sz_bytes / 16, 0, 0});
      }
    }
    persistent.emplace(std::move(stages));
    floor_out = keep(filled(static_cast<std::size_t>(kFloorThreads) * 16));
  }
  ~Layers() {
    for (void* p : owned) cudaFree(p);
  }
  Layers(const Layers&) = delete;
  Layers& operator=(const Layers&) = delete;

  aoti_cuda::shim::decode_attention::Problem attention(int l) const {
    aoti_cuda::shim::decode_attention::Problem p;
    p.q = qkv_out;
    p.k = k_cache[l];
    p.v = v_cache[l];
    p.k_new = static_cast<char*>(qkv_out) + kHeads * kDim * 2;
    p.v_new = static_cast<char*>(qkv_out) + (kHeads + kKvHeads) * kDim * 2;
    p.out = attn;
    p.pos = static_cast<const int64_t*>(pos);
    p.batch = 1;
    p.heads = kHeads;
    p.kv_heads = kKvHeads;
    p.cache_len = kCache;
    p.head_dim = static_cast<int>(kDim);
    p.q_stride[0] = p.k_new_stride[0] = p.v_new_stride[0] = kQkv;
    p.q_stride[1] = p.k_new_stride[1] = p.v_new_stride[1] = kDim;
    const int64_t kvs[3] = {kKvHeads * kCache * kDim, kCache * kDim, kDim};
    for (int d = 0; d < 3; ++d) p.k_stride[d] = p.v_stride[d] = kvs[d];
    p.rope_cos = static_cast<const float*>(rope_cos);
    p.rope_sin = static_cast<const float*>(rope_sin);
    p.rope_rows = kCache;
    p.rope_stride = kDim / 2;
    p.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
    return p;
  }

  int project(const Weights& w, const void* x, bool with_norm, bool swiglu, const void* residual, void* out,
              bool early, int sms, cudaStream_t s) const {
    FusedCall c;
    c.int4 = int4;
    c.x = x;
    c.norm = with_norm ? norm : nullptr;
    c.w = w.w;
    c.sz = w.sz;
    c.residual = residual;
    c.out = out;
    c.n = w.n;
    c.k = w.k;
    c.kp = w.kp;
    c.swiglu = swiglu;
    c.weights_early = early;
    return launch_fused(c, sms, s);
  }

  // The read floor of projection w (floor_read_kernel over its weight and scale bytes); `with_row`: with a row read
  // and a store after the wait.
  int read_floor(const Weights& w, bool with_row, cudaStream_t s, const Weights* next = nullptr) const {
    const std::size_t na = w.w_bytes / 16, nb = w.sz_bytes / 16;
    const aoti_cuda_bench::PrefetchSet ahead = prefetch_set(next, 0);
    const dim3 grid(static_cast<unsigned>((na + nb + kFloorTile - 1) / kFloorTile));
    return static_cast<int>(aoti_cuda::shim::pdl::launch(
        aoti_cuda_bench::floor_read_kernel, grid, dim3(kFloorThreads), 0, s, reinterpret_cast<const uint4*>(w.w), na,
        reinterpret_cast<const uint4*>(w.sz), nb, with_row ? static_cast<const uint4*>(h[0]) : nullptr,
        static_cast<uint4*>(floor_out), static_cast<uint4*>(act), ahead));
  }

  // Layer l's persistent floor row (aoti_cuda_bench::PersistentFloor::launch), reading the row h[0].
  int persistent_floor(int l, bool whole_step, bool spread, int ring, int sms, cudaStream_t s) const {
    return static_cast<int>(persistent->launch(l, whole_step, spread, ring, static_cast<const uint4*>(h[0]),
                                               static_cast<uint4*>(floor_out), static_cast<uint4*>(act), sms, s));
  }

  // The weights of projection g of the step (layer g / 4; 0 q/k/v, 1 o, 2 gate/up, 3 down), or null past the end.
  const Weights* projection(int g) const {
    if (g >= 4 * kCount) return nullptr;
    const std::vector<Weights>* all[] = {&qkv, &o, &gate_up, &down};
    return &(*all[g % 4])[g / 4];
  }

  // w's weight and scale ranges, each cut to its first `cap` bytes (0: whole); none for a null w.
  static aoti_cuda_bench::PrefetchSet prefetch_set(const Weights* w, std::size_t cap) {
    aoti_cuda_bench::PrefetchSet set{};
    if (w == nullptr) return set;
    for (const auto& [base, bytes] : {std::pair{w->w, w->w_bytes}, std::pair{w->sz, w->sz_bytes}}) {
      if (bytes == 0) continue;
      set.base[set.count] = base;
      set.bytes[set.count++] = cap > 0 ? std::min(cap, bytes) : bytes;
    }
    return set;
  }

  // Layer l's six kernels as row `m` runs them (five with the attention as one kernel: m.cluster 8 or 16); with
  // m.prefetch_ahead d > 0, where each projection is enqueued a branch prefetches the weights of the projection d
  // later into L2, and the last layer joins the branch.
  int layer(int l, const ChainMode& m, int sms, cudaStream_t s) const {
    void* in = h[l % 2];
    void* next = h[(l + 1) % 2];
    int g = 4 * l;  // the step's projection about to be enqueued
    auto proj = [&](const Weights& w, const void* x, bool norm, bool swiglu, const void* residual, void* out) {
      cudaError_t err = cudaSuccess;
      if (m.prefetch_ahead > 0) err = branch.fork(prefetch_set(projection(g + m.prefetch_ahead), m.prefetch_cap), s);
      ++g;  // now the next projection's
      if (err != cudaSuccess) return static_cast<int>(err);
      if (m.floor > 0) return read_floor(w, m.floor >= 2, s, m.floor == 3 ? projection(g) : nullptr);
      return project(w, x, norm, swiglu, residual, out, m.early, sms, s);
    };
    int err = proj(qkv[l], in, true, false, nullptr, qkv_out);
    if (err == 0 && m.with_attention) {
      namespace da = aoti_cuda::shim::decode_attention;
      err = m.merge ? da::launch(attention(l), scratch, s, sms, m.cluster)
                    : da::launch_chunks(attention(l), scratch, s, sms);
    }
    if (err == 0) err = proj(o[l], attn, false, false, in, h2);
    if (err == 0) err = proj(gate_up[l], h2, true, true, nullptr, act);
    if (err == 0) err = proj(down[l], act, false, false, h2, next);
    if (err == 0 && m.prefetch_ahead > 0 && l == kCount - 1) err = static_cast<int>(branch.join(s));
    return err;
  }
};

void chain_bench(int reps, int sms, void* flush, std::size_t flush_bytes, int64_t position) {
  const ChainMode modes[] = {{"plain launches", false, false, 0},
                             {"dependent launch", true, false, 0},
                             {"dependent launch, weights early", true, true, 0},
                             one_column({"early, merge one column a thread", true, true, 0}),
                             {"attention clusters of 16", false, false, 16},
                             {"clusters of 16, dep. launch, early", true, true, 16},
                             {"attention clusters of 8", false, false, 8},
                             {"clusters of 8, dep. launch, early", true, true, 8},
                             {"dep. launch, early, no attention", true, true, 0, false, false},
                             without_merge({"early, attention without its merge", true, true, 0}),
                             {"early, L2 prefetch 1 ahead", true, true, 0, 0, true, 0, false, 0, 1},
                             {"early, L2 prefetch 2 ahead", true, true, 0, 0, true, 0, false, 0, 2},
                             {"early, L2 prefetch 1 ahead, 4 MB", true, true, 0, 0, true, 0, false, 0, 1, 4 << 20},
                             {"early, L2 prefetch 1 ahead, 1 MB", true, true, 0, 0, true, 0, false, 0, 1, 1 << 20},
                             {"clusters of 8, early, prefetch 1", true, true, 8, 0, true, 0, false, 0, 1},
                             {"read floor, dep. launch", true, true, 0, 1, true},
                             {"read floor, no attention", true, true, 0, 1, false},
                             {"read floor + row, no attention", true, true, 0, 2, false},
                             {"floor + row + next into L2, no att.", true, true, 0, 3, false},
                             {"floor + row + next into L2", true, true, 0, 3, true},
                             {"read floor + row", true, true, 0, 2, true},
                             {"persistent floor, a kernel a layer", true, true, 0, 1, false, 1},
                             {"persistent floor, layer, spread", true, true, 0, 1, false, 1, true},
                             {"persistent floor, a kernel a step", true, true, 0, 1, false, 2},
                             {"persistent floor, step, spread", true, true, 0, 1, false, 2, true},
                             {"ring floor, a kernel a layer", true, true, 0, 1, false, 1, false, 1},
                             {"ring floor, a kernel a step", true, true, 0, 1, false, 2, false, 1},
                             {"ring floor, layer, 2 an SM x 3 slots", true, true, 0, 1, false, 1, false, 2},
                             {"ring floor, step, 2 an SM x 3 slots", true, true, 0, 1, false, 2, false, 2},
                             {"ring floor, layer, 3 an SM x 2 slots", true, true, 0, 1, false, 1, false, 3},
                             {"ring floor, step, 3 an SM x 2 slots", true, true, 0, 1, false, 2, false, 3}};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  for (const bool int4 : {false, true}) {
    const Layers layers(int4, position);
    std::printf("chain %-4s decode position %lld\n", int4 ? "int4" : "bf16", static_cast<long long>(position));
    for (int round = 0; round < 2; ++round) {  // twice each, interleaved: drift shows as a difference
      for (const ChainMode& m : modes) {
        namespace da = aoti_cuda::shim::decode_attention;
        if (m.cluster > 0 && da::cluster_blocks(layers.attention(0), m.cluster, device) != m.cluster) {
          std::printf("chain %-4s %-34s not on this GPU\n", int4 ? "int4" : "bf16", m.name);
          continue;
        }
        aoti_cuda::shim::OpSettings settings;
        settings.dependent_launch = m.dependent;
        settings.merge_slices = m.slices;
        const aoti_cuda::shim::OpSettingsScope scope(&settings);
        const double us = per_call_us(Layers::kCount, reps, [&](int l, cudaStream_t s) {
          if (m.persistent > 0) return layers.persistent_floor(l, m.persistent == 2, m.spread, m.ring, sms, s);
          return layers.layer(l, m, sms, s);
        }, flush, flush_bytes);
        std::printf("chain %-4s %-34s %7.2f us a layer  (%7.1f us for %d layers)\n", int4 ? "int4" : "bf16", m.name,
                    us, us * Layers::kCount, Layers::kCount);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  bool chain = false;
  int64_t position = 128;  // --chain's decode position
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!std::strcmp(argv[i], "--chain")) {
      chain = true;
    } else if (!std::strcmp(argv[i], "--position") && i + 1 < argc) {
      position = std::atoll(argv[++i]);
      if (position < 0 || position >= Layers::kCache) {
        std::fprintf(stderr, "--position: 0 to %lld\n", static_cast<long long>(Layers::kCache - 1));
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: aoti_cuda_fused_linear_bench [--reps N] [--json out.json] [--chain [--position P]]\n");
      return 2;
    }
  }
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    std::printf("fused_linear_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  const std::size_t flush_bytes = std::size_t{512} << 20;
  void* flush = filled(flush_bytes);
  if (chain) {
    chain_bench(reps, sms, flush, flush_bytes, position);
    cudaFree(flush);
    return 0;
  }
  std::vector<Row> rows;
  for (const bool int4 : {false, true}) {
    for (const Projection& pr : kProjections) {
      const Operands o(pr, int4);
      const std::string weights = int4 ? "int4" : "bf16";
      const double plain_us = per_call_us(o.copies, reps, o.plain(sms), flush, flush_bytes);
      rows.push_back({weights, pr.name, o.bytes, plain_us, per_call_us(o.copies, reps, o.fused(sms, 0), flush,
                                                                       flush_bytes)});
      print(rows.back());
      // bf16 with a norm: the staging kernel with each number of warps per column launch() can choose from (the
      // prologue's cost depends on how many blocks stage the same row: llm.md, "The fused linear operator").
      if (int4 || !pr.norm) continue;
      for (int split : {1, 2, 4, 8}) {
        rows.push_back({weights, std::string(pr.name) + " (split " + std::to_string(split) + ")", o.bytes, plain_us,
                        per_call_us(o.copies, reps, o.fused(sms, split), flush, flush_bytes)});
        print(rows.back());
      }
    }
  }
  cudaFree(flush);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "fused_linear_bench: cannot write %s\n", json.c_str());
      return 1;
    }
    std::fprintf(f, "[\n");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, " {\"weights\": \"%s\", \"projection\": \"%s\", \"bytes\": %.0f, \"plain_us\": %.3f, "
                   "\"fused_us\": %.3f}%s\n",
                   r.weights.c_str(), r.name.c_str(), r.bytes, r.plain_us, r.fused_us, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
  return 0;
}
