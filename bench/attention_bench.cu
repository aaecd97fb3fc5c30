// The flash attention kernel (src/shim/ops/flash_attention.cu, compiled in) at an LLM prefill's shapes,
// every block size and pipeline depth and the default dispatch, timed with CUDA events (median of 9 runs of 50 launches).
//
//   aoti_cuda_attention_bench [--lens 128,512,1024] [--heads 16] [--kv-heads 16,4] [--dim 128]
//
// Prints one line per (shape, block size): microseconds per call and the attention TFLOP/s
// (4 * L * S * D * H multiply-adds as flops, halved for the causal mask).
//
//   aoti_cuda_attention_bench --decode [--cache 4096] [--positions 128,1024,4000] [--heads 16] [--kv-heads 4]
//                             [--dim 128] [--qkv-only]
//
// The decode attention kernel (src/shim/ops/decode_attention.cu, aoti_cuda's
// aoti_torch_cuda_aoti_cuda_decode_attention) for one query row per head over a cache of --cache
// positions, at each position: microseconds per call and the K/V bytes it must read
// (2 * (pos + 1) * Hkv * D * 2) per second. Beside it, what attending over the whole cache costs,
// as a masked decode does whatever the position: the same kernel at the last position, and the
// flash attention kernel with the decode's query heads folded into rows (q [1, Hkv, g, D], no
// mask) over all positions. Each decode line also gives the time per call with 50 calls captured in one CUDA
// graph (as in a decode step's graph), the update form's (aoti_torch_cuda_aoti_cuda_decode_attention_update) and the
// qkv form's (aoti_torch_cuda_aoti_cuda_decode_attention_qkv: q and the step's key row rotated in the kernel).
// --qkv-only times the qkv form alone (the form aoti_cuda's LLM exports use), so that a profiler's first launches
// are that form's; it is then also timed as one kernel over thread-block clusters of 8 and 16 blocks (sm_90 and newer;
// TuningOptions::attention_cluster).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "shim/ops/decode_attention.hpp"
#include "shim/ops/flash_attention.hpp"

namespace {

using aoti_cuda::shim::attention::Problem;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  for (const char* p = s; *p;) {
    out.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return out;
}

// Median time of one call of `launch` (returns a cudaError_t), in microseconds.
template <class Launch>
double time_launch(Launch&& launch, cudaStream_t stream) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> samples;
  for (int round = 0; round < 10; ++round) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < 50; ++i) check(static_cast<cudaError_t>(launch()), "launch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (round > 0) samples.push_back(ms * 1000.0 / 50);  // round 0 warms up
  }
  std::sort(samples.begin(), samples.end());
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  return samples[samples.size() / 2];
}

// The same, with the 50 calls captured in one CUDA graph and replayed (what a decode step's graph sees: no host
// launch cost between the kernels).
template <class Launch>
double time_graph(Launch&& launch, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < 50; ++i) check(static_cast<cudaError_t>(launch()), "launch");
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  const double us = time_launch([&] { return cudaGraphLaunch(exec, stream); }, stream) / 50;
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  return us;
}

void* device_random(size_t elems, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> host(elems);
  for (uint16_t& x : host) {
    const float f = dist(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    x = static_cast<uint16_t>(u >> 16);  // bf16 (truncated: any values do for timing)
  }
  void* d = nullptr;
  check(cudaMalloc(&d, elems * 2), "cudaMalloc");
  check(cudaMemcpy(d, host.data(), elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}

int decode_bench(int64_t cache, const std::vector<int64_t>& positions, int64_t heads, int64_t kvh, int64_t dim,
                 bool qkv_only) {
  namespace da = aoti_cuda::shim::decode_attention;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::mt19937 rng(9);
  const size_t kv_elems = static_cast<size_t>(cache * kvh * dim);
  void* q = device_random(static_cast<size_t>(heads * dim), rng);
  void* k = device_random(kv_elems, rng);
  void* v = device_random(kv_elems, rng);
  void* k_new = device_random(static_cast<size_t>(kvh * dim), rng);
  void* v_new = device_random(static_cast<size_t>(kvh * dim), rng);
  // The qkv form's operands: one projection row (query heads, key heads, value heads) and float32 rotary tables.
  void* qkv = device_random(static_cast<size_t>((heads + 2 * kvh) * dim), rng);
  std::vector<float> table(static_cast<size_t>(cache * dim / 2), 0.5f);
  void *rope_cos = nullptr, *rope_sin = nullptr;
  check(cudaMalloc(&rope_cos, table.size() * 4), "cudaMalloc");
  check(cudaMalloc(&rope_sin, table.size() * 4), "cudaMalloc");
  check(cudaMemcpy(rope_cos, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(rope_sin, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  void *out = nullptr, *pos = nullptr, *scratch = nullptr;
  check(cudaMalloc(&out, static_cast<size_t>(heads * dim) * 2), "cudaMalloc");
  check(cudaMalloc(&pos, 8), "cudaMalloc");
  da::Problem p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.pos = static_cast<const int64_t*>(pos);
  p.batch = 1;
  p.heads = heads;
  p.kv_heads = kvh;
  p.cache_len = cache;
  p.head_dim = static_cast<int>(dim);
  p.q_stride[0] = heads * dim;
  p.q_stride[1] = dim;
  const int64_t kvs[3] = {kvh * cache * dim, cache * dim, dim};
  for (int d = 0; d < 3; ++d) p.k_stride[d] = p.v_stride[d] = kvs[d];
  p.k_new_stride[0] = p.v_new_stride[0] = kvh * dim;
  p.k_new_stride[1] = p.v_new_stride[1] = dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  check(cudaMalloc(&scratch, da::scratch_bytes(p)), "cudaMalloc");
  int device = 0, sm_count = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  std::vector<int64_t> all = positions;
  all.push_back(cache - 1);
  for (int64_t position : all) {
    check(cudaMemcpy(pos, &position, 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    const auto call = [&] { return da::launch(p, scratch, stream, sm_count); };
    if (!qkv_only) {
      const double us = time_launch(call, stream);
      const double graph_us = time_graph(call, stream);
      const double bytes = 2.0 * static_cast<double>(std::min(position + 1, cache)) * kvh * dim * 2;
      std::printf("decode L=%-5lld H=%lld Hkv=%lld D=%lld bf16  pos %-5lld  decode kernel          %8.2f us  %7.1f GB/s"
                  "  (in a graph %.2f us)%s\n",
                  static_cast<long long>(cache), static_cast<long long>(heads), static_cast<long long>(kvh),
                  static_cast<long long>(dim), static_cast<long long>(position), us, bytes / (us * 1e-6) / 1e9,
                  graph_us, position == cache - 1 ? "  (the whole cache)" : "");
      // The update form: the step's K/V row read from k_new / v_new and stored at the position (one more 16-byte
      // store per lane of one block); against the plain form's graph time above.
      p.k_new = k_new;
      p.v_new = v_new;
      const double update_us = time_graph(call, stream);
      p.k_new = p.v_new = nullptr;
      std::printf("decode L=%-5lld H=%lld Hkv=%lld D=%lld bf16  pos %-5lld  update form, in a graph %8.2f us\n",
                  static_cast<long long>(cache), static_cast<long long>(heads), static_cast<long long>(kvh),
                  static_cast<long long>(dim), static_cast<long long>(position), update_us);
    }
    // The qkv form: q, k_new and v_new are views of one projection row, q and k_new rotated as they are read.
    da::Problem f = p;
    f.q = qkv;
    f.q_stride[0] = (heads + 2 * kvh) * dim;
    f.k_new = static_cast<char*>(qkv) + heads * dim * 2;
    f.v_new = static_cast<char*>(qkv) + (heads + kvh) * dim * 2;
    f.k_new_stride[0] = f.v_new_stride[0] = f.q_stride[0];
    f.rope_cos = static_cast<const float*>(rope_cos);
    f.rope_sin = static_cast<const float*>(rope_sin);
    f.rope_rows = cache;
    f.rope_stride = dim / 2;
    const double qkv_us = time_graph([&] { return da::launch(f, scratch, stream, sm_count); }, stream);
    std::printf("decode L=%-5lld H=%lld Hkv=%lld D=%lld bf16  pos %-5lld  qkv form, in a graph    %8.2f us\n",
                static_cast<long long>(cache), static_cast<long long>(heads), static_cast<long long>(kvh),
                static_cast<long long>(dim), static_cast<long long>(position), qkv_us);
    // The same form as one kernel over thread-block clusters (OpSettings::attention_cluster), where the GPU has them.
    for (int cluster : {8, 16}) {
      if (da::cluster_blocks(f, cluster, device) != cluster) {
        std::printf("decode L=%-5lld pos %-5lld  qkv form, one kernel, clusters of %d: not on this GPU\n",
                    static_cast<long long>(cache), static_cast<long long>(position), cluster);
        continue;
      }
      const double one_us = time_graph([&] { return da::launch(f, nullptr, stream, sm_count, cluster); }, stream);
      std::printf("decode L=%-5lld H=%lld Hkv=%lld D=%lld bf16  pos %-5lld  qkv form, one kernel, clusters of %-2d, "
                  "in a graph %8.2f us\n",
                  static_cast<long long>(cache), static_cast<long long>(heads), static_cast<long long>(kvh),
                  static_cast<long long>(dim), static_cast<long long>(position), cluster, one_us);
    }
  }
  if (qkv_only) return 0;
  // Every position, the way a masked decode attends: the flash kernel with the g query heads of a KV head as rows.
  Problem f;
  f.q = q;
  f.k = k;
  f.v = v;
  f.out = out;
  f.batch = 1;
  f.heads = kvh;
  f.kv_heads = kvh;
  f.q_len = heads / kvh;
  f.kv_len = cache;
  f.head_dim = static_cast<int>(dim);
  const int64_t fq[3] = {heads * dim, f.q_len * dim, dim};
  for (int d = 0; d < 3; ++d) {
    f.q_stride[d] = f.out_stride[d] = fq[d];
    f.k_stride[d] = f.v_stride[d] = kvs[d];
  }
  f.scale = p.scale;
  const double us = time_launch([&] { return aoti_cuda::shim::attention::launch(f, stream); }, stream);
  std::printf("decode L=%-5lld H=%lld Hkv=%lld D=%lld bf16  all positions: flash kernel, folded q %8.2f us  %7.1f GB/s\n",
              static_cast<long long>(cache), static_cast<long long>(heads), static_cast<long long>(kvh),
              static_cast<long long>(dim), us, 2.0 * cache * kvh * dim * 2 / (us * 1e-6) / 1e9);
  for (void* ptr : {q, k, v, k_new, v_new, qkv, rope_cos, rope_sin, out, pos, scratch}) cudaFree(ptr);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lens{128, 512, 1024}, kv_heads{16, 4};
  int64_t heads = 16, dim = 128, cache = 4096;
  std::vector<int64_t> positions{128, 1024, 4000};
  bool decode = false, qkv_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--decode") decode = true;
    if (std::string(argv[i]) == "--qkv-only") qkv_only = true;
  }
  if (decode) kv_heads = {4};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--decode" || a == "--qkv-only") {
      --i;  // a flag without a value
      continue;
    }
    if (a == "--lens") lens = parse_list(argv[i + 1]);
    else if (a == "--cache") cache = std::atoll(argv[i + 1]);
    else if (a == "--positions") positions = parse_list(argv[i + 1]);
    else if (a == "--heads") heads = std::atoll(argv[i + 1]);
    else if (a == "--kv-heads") kv_heads = parse_list(argv[i + 1]);
    else if (a == "--dim") dim = std::atoll(argv[i + 1]);
  }
  if (decode) {
    int rc = 0;
    for (int64_t kvh : kv_heads) rc |= decode_bench(cache, positions, heads, kvh, dim, qkv_only);
    return rc;
  }
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t len : lens) {
    for (int64_t kvh : kv_heads) {
      const size_t q_elems = static_cast<size_t>(len * heads * dim), kv_elems = static_cast<size_t>(len * kvh * dim);
      std::vector<uint16_t> host(std::max(q_elems, kv_elems));
      for (uint16_t& x : host) {
        const float f = dist(rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        x = static_cast<uint16_t>(u >> 16);
      }
      void *q, *k, *v, *o;
      check(cudaMalloc(&q, q_elems * 2), "cudaMalloc");
      check(cudaMalloc(&k, kv_elems * 2), "cudaMalloc");
      check(cudaMalloc(&v, kv_elems * 2), "cudaMalloc");
      check(cudaMalloc(&o, q_elems * 2), "cudaMalloc");
      check(cudaMemcpy(q, host.data(), q_elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaMemcpy(k, host.data(), kv_elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaMemcpy(v, host.data(), kv_elems * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      Problem p;
      p.q = q;
      p.k = k;
      p.v = v;
      p.out = o;
      p.batch = 1;
      p.heads = heads;
      p.kv_heads = kvh;
      p.q_len = p.kv_len = len;
      p.head_dim = static_cast<int>(dim);
      // q and out as a prefill's: [1, L, H, D] storage viewed [1, H, L, D]; k and v [1, Hkv, L, D].
      const int64_t qs[3] = {len * heads * dim, dim, heads * dim}, kvs[3] = {len * kvh * dim, len * dim, dim};
      for (int d = 0; d < 3; ++d) {
        p.q_stride[d] = p.out_stride[d] = qs[d];
        p.k_stride[d] = p.v_stride[d] = kvs[d];
      }
      p.scale = 1.0f / std::sqrt(static_cast<float>(dim));
      p.causal = true;
      const double flops = 4.0 * len * len * dim * heads / 2;
      for (int rows : {0, 64, 32, 16}) {
        for (int stages : {4, 2}) {
          if (rows == 0 && stages == 2) continue;  // the default dispatch has one depth
          const double us = time_launch(
              [&] {
                return rows > 0 ? aoti_cuda::shim::attention::launch_rows(p, stream, rows, stages)
                                : aoti_cuda::shim::attention::launch(p, stream);
              },
              stream);
          const std::string variant =
              rows == 0 ? "default(" + std::to_string(aoti_cuda::shim::attention::rows_per_block(p)) + " rows, " +
                              std::to_string(aoti_cuda::shim::attention::kDefaultStages) + " stages)"
                        : "rows " + std::to_string(rows) + ", " + std::to_string(stages) + " stages";
          std::printf("L=%-5lld H=%lld Hkv=%-3lld D=%lld causal bf16  %-28s %8.2f us  %6.1f TFLOP/s\n",
                      static_cast<long long>(len), static_cast<long long>(heads), static_cast<long long>(kvh),
                      static_cast<long long>(dim), variant.c_str(), us, flops / (us * 1e-6) / 1e12);
        }
      }
      cudaFree(q);
      cudaFree(k);
      cudaFree(v);
      cudaFree(o);
    }
  }
  return 0;
}
