// int4_bench: aoti_torch_cuda__weight_int4pack_mm kernel time (CUDA events) and effective
// weight bandwidth, for the shapes of docs/benchmarks/int4.md. Not a test: prints numbers.
//
//   aoti_cuda_int4_bench [--json out.json] [--iters N] [--group G] [--inner-k-tiles T] [--variants]
//                        [--shapes NxK,NxK,...] [--m M,M,...] [--no-stream] [--dependent-launch on|off]
//                        [--weights-early]
//
// --shapes/--m replace the default weight shapes (N x K: the 1.1B model's wqkv, wo, w13, w2 and
// output head, then 4096x4096, 11008x4096, 4096x11008) and row counts.
//
// First it measures the GPU's streaming-read bandwidth (stream_read.cuh, 2 GiB): the ceiling the
// "% of read BW" columns divide by. Two timings per shape and M:
//   "us"        one call alone after an L2 flush (below), CUDA events around it: includes the
//               launch latency, as a lone call pays it;
//   "stream us" M <= 16 (unless --no-stream): R back-to-back launches over R distinct copies of the
//               weights (R x bytes >= 256 MiB, so every call reads HBM), captured in a CUDA graph
//               and replayed after a flush; time / R. This is how a decode step runs them (one
//               graph, layer after layer) and what the bandwidth target is measured on.
//
// --dependent-launch on launches the kernels with programmatic dependent launch, which lets each back-to-back
// call start while the one before finishes (OpSettings::dependent_launch; the bench's default is the SDK's,
// on since 2026-12-05: src/shim/ops/dependent_launch.hpp). --weights-early (with it on) also has each
// back-to-back call request its first weights before it waits for the call before (Problem::weights_early:
// what the shim does when the weights are a program's constants), so its memory latency overlaps that call's
// end.
//
// --variants times the kernels' tuning candidates (weight_int4pack_mm.hpp) for M <= 64 directly
// (no shim), innerKTiles 8, and prints one table per candidate.
//
// Each timed call is preceded by a kernel that reads 512 MiB, so the weights come from HBM, not
// L2 (the H200's L2 holds 60 MB, more than a 4096x4096 int4 weight) and L2 holds no dirty lines
// whose write-back would compete with the weight reads (a memset would leave 60 MB of them);
// the call is timed alone
// between two events and the median over the iterations is reported. Bandwidth counts the
// packed weights plus their scales/zeros (what a memory-bound kernel must read once).
// tools/int4/bench_torch.py measures torch's kernel the same way.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "call_floors.cuh"
#include "l2_flush.cuh"
#include "stream_read.cuh"
#include "shim/op_settings.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "int4_bench: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// Deterministic filler (xorshift); any 32-bit pattern is a valid packed weight word.
std::vector<uint32_t> random_words(std::size_t count, uint64_t seed) {
  std::vector<uint32_t> v(count);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& w : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    w = static_cast<uint32_t>(s >> 16);
  }
  return v;
}

// Device tensor (contiguous) holding `bytes` random bytes, or bf16 values of small magnitude.
AtenTensorHandle device_tensor(const std::vector<int64_t>& sizes, int32_t dtype, std::size_t bytes, bool bf16_small,
                               uint64_t seed) {
  std::vector<uint32_t> words = random_words((bytes + 3) / 4, seed);
  if (bf16_small) {
    for (auto& w : words) w = (w & 0x007F007Fu) | 0x3C003C00u;  // bf16 pairs in [2^-7, 2^-6)
  }
  AtenTensorHandle t = nullptr;
  if (aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), nullptr, dtype, 1, 0, &t) != 0) {
    std::fprintf(stderr, "int4_bench: allocation failed: %s\n", aoti_cuda_shim_last_error());
    std::exit(1);
  }
  void* p = nullptr;
  aoti_torch_get_data_ptr(t, &p);
  check(cudaMemcpy(p, words.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return t;
}

struct Result {
  int64_t m, n, k;
  double us, gbps;
  double stream_us = -1, stream_gbps = -1;
  double floor_empty_us = -1, floor_read_us = -1;  // measure_call_floors() at the same copies and bytes
};

// Bytes a call must read: packed weights + (scale, zero) pairs (activations and output are tiny).
double weight_bytes(int64_t n, int64_t k, int group) {
  return static_cast<double>(n) * k / 2 + static_cast<double>(k / group) * n * 4;
}

// Weight copies of a back-to-back measurement: enough for >= 256 MiB, so every call reads HBM.
int stream_copies(int64_t n, int64_t k, int group) { return aoti_cuda_bench::copies_for(weight_bytes(n, k, group)); }

Result measure(int64_t m, int64_t n, int64_t k, int group, int ikt, int iters, void* flush, std::size_t flush_bytes) {
  AtenTensorHandle x = device_tensor({m, k}, 15, static_cast<std::size_t>(m * k * 2), true, 1);
  AtenTensorHandle w = device_tensor({n / 8, k / (16 * ikt), 32, ikt / 2}, 3, static_cast<std::size_t>(n * k / 2), false, 2);
  AtenTensorHandle sz = device_tensor({k / group, n, 2}, 15, static_cast<std::size_t>(k / group * n * 4), true, 3);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = -3; i < iters; ++i) {  // 3 warm-up calls
    aoti_cuda_bench::flush_l2(flush, flush_bytes);
    check(cudaGetLastError(), "flush");
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    AtenTensorHandle out = nullptr;
    if (aoti_torch_cuda__weight_int4pack_mm(x, w, group, sz, &out) != 0) {
      std::fprintf(stderr, "int4_bench: %s\n", aoti_cuda_shim_last_error());
      std::exit(1);
    }
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    aoti_torch_delete_tensor_object(out);
    if (i >= 0) times.push_back(ms * 1000.0);
  }
  std::sort(times.begin(), times.end());
  const double us = times[times.size() / 2];
  const double bytes = weight_bytes(n, k, group);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  aoti_torch_delete_tensor_object(x);
  aoti_torch_delete_tensor_object(w);
  aoti_torch_delete_tensor_object(sz);
  return {m, n, k, us, bytes / (us * 1e-6) / 1e9};
}

// Times tuning candidate `v` on raw device buffers (same flush/median as measure()); < 0 if n/a.
double measure_variant(int v, int64_t m, int64_t n, int64_t k, int group, int iters, void* flush,
                       std::size_t flush_bytes) {
  namespace mm = aoti_cuda::shim::int4mm;
  AtenTensorHandle x = device_tensor({m, k}, 15, static_cast<std::size_t>(m * k * 2), true, 1);
  AtenTensorHandle w = device_tensor({n / 8, k / 128, 32, 4}, 3, static_cast<std::size_t>(n * k / 2), false, 2);
  AtenTensorHandle sz = device_tensor({k / group, n, 2}, 15, static_cast<std::size_t>(k / group * n * 4), true, 3);
  AtenTensorHandle out = device_tensor({m, n}, 15, static_cast<std::size_t>(m * n * 2), true, 4);
  mm::Problem p;
  aoti_torch_get_data_ptr(x, const_cast<void**>(&p.x));
  aoti_torch_get_data_ptr(w, const_cast<void**>(&p.w));
  aoti_torch_get_data_ptr(sz, const_cast<void**>(&p.sz));
  aoti_torch_get_data_ptr(out, &p.out);
  p.m = m; p.n = n; p.k = k; p.group = group; p.inner_k_tiles = 8;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = -3; i < iters; ++i) {
    aoti_cuda_bench::flush_l2(flush, flush_bytes);
    check(cudaEventRecord(start, nullptr), "cudaEventRecord");
    if (mm::launch_variant(p, nullptr, v) != 0) break;
    check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i >= 0) times.push_back(ms * 1000.0);
  }
  (void)cudaGetLastError();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (AtenTensorHandle t : {x, w, sz, out}) aoti_torch_delete_tensor_object(t);
  if (times.empty()) return -1;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// --weights-early: the stream timings' calls set Problem::weights_early.
bool g_weights_early = false;

// Per-call time of R back-to-back launches (the dispatch, no shim) over R copies of the weights,
// replayed as one CUDA graph after a flush; median of `reps` replays.
// `variant` as in launch_variant (0: the dispatch); < 0 if the variant does not apply.
double measure_stream(int64_t m, int64_t n, int64_t k, int group, int ikt, int reps, void* flush,
                      std::size_t flush_bytes, int variant = 0) {
  namespace mm = aoti_cuda::shim::int4mm;
  const std::size_t wbytes = static_cast<std::size_t>(n * k / 2), sbytes = static_cast<std::size_t>(k / group * n * 4);
  const int copies = stream_copies(n, k, group);
  AtenTensorHandle x = device_tensor({m, k}, 15, static_cast<std::size_t>(m * k * 2), true, 1);
  AtenTensorHandle w0 = device_tensor({n / 8, k / (16 * ikt), 32, ikt / 2}, 3, wbytes, false, 2);
  AtenTensorHandle s0 = device_tensor({k / group, n, 2}, 15, sbytes, true, 3);
  void *xp = nullptr, *wp0 = nullptr, *sp0 = nullptr, *ws = nullptr, *ss = nullptr, *out = nullptr;
  aoti_torch_get_data_ptr(x, &xp);
  aoti_torch_get_data_ptr(w0, &wp0);
  aoti_torch_get_data_ptr(s0, &sp0);
  const std::size_t wstride = (wbytes + 255) / 256 * 256, sstride = (sbytes + 255) / 256 * 256;
  check(cudaMalloc(&ws, wstride * copies), "cudaMalloc(weights)");
  check(cudaMalloc(&ss, sstride * copies), "cudaMalloc(scales)");
  check(cudaMalloc(&out, static_cast<std::size_t>(m * n * 2)), "cudaMalloc(out)");
  for (int r = 0; r < copies; ++r) {
    check(cudaMemcpy(static_cast<char*>(ws) + r * wstride, wp0, wbytes, cudaMemcpyDeviceToDevice), "copy");
    check(cudaMemcpy(static_cast<char*>(ss) + r * sstride, sp0, sbytes, cudaMemcpyDeviceToDevice), "copy");
  }
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  mm::Problem p;
  p.x = xp; p.out = out; p.m = m; p.n = n; p.k = k; p.group = group; p.inner_k_tiles = ikt;
  p.weights_early = g_weights_early;
  bool applies = true;
  for (int r = 0; r < 2 && applies; ++r) {  // outside the capture: one-time attribute setting, module load
    p.w = static_cast<char*>(ws) + r * wstride;
    p.sz = static_cast<char*>(ss) + r * sstride;
    applies = mm::launch_variant(p, stream, variant) == 0;
  }
  (void)cudaGetLastError();
  check(cudaStreamSynchronize(stream), "warm-up");
  if (!applies) {
    cudaStreamDestroy(stream);
    cudaFree(ws);
    cudaFree(ss);
    cudaFree(out);
    for (AtenTensorHandle t : {x, w0, s0}) aoti_torch_delete_tensor_object(t);
    return -1;
  }
  const double us = aoti_cuda_bench::captured_per_call_us(stream, copies, reps, flush, flush_bytes, [&](int r) {
    p.w = static_cast<char*>(ws) + r * wstride;
    p.sz = static_cast<char*>(ss) + r * sstride;
    return mm::launch_variant(p, stream, variant);
  });
  cudaStreamDestroy(stream);
  cudaFree(ws);
  cudaFree(ss);
  cudaFree(out);
  for (AtenTensorHandle t : {x, w0, s0}) aoti_torch_delete_tensor_object(t);
  return us;
}

using Shapes = std::vector<std::array<int64_t, 2>>;

void run_variants(int iters, int group, void* flush, std::size_t flush_bytes, const Shapes& shapes,
                  const std::vector<int64_t>& ms) {
  namespace mm = aoti_cuda::shim::int4mm;
  for (int v = 0; v < mm::variant_count(); ++v) {
    std::printf("variant %d: %s\n", v, mm::variant_name(v));
    for (int64_t m : ms) {
      if (m > 64 && v > 0 && v < mm::variant_count() - 4) break;  // the last 4 candidates are for large M
      std::printf("  M=%-3lld", static_cast<long long>(m));
      for (const auto& nk : shapes) {
        // M <= 16: back-to-back throughput (measure_stream), the figure the streaming kernel is tuned for.
        const double us = m <= 16 ? measure_stream(m, nk[0], nk[1], group, 8, 5, flush, flush_bytes, v)
                                  : measure_variant(v, m, nk[0], nk[1], group, iters, flush, flush_bytes);
        const double bytes = static_cast<double>(nk[0]) * nk[1] / 2 + static_cast<double>(nk[1] / group) * nk[0] * 4;
        if (us < 0 && m > 8) break;
        if (us < 0) std::printf("  %5lldx%-5lld      -         ", static_cast<long long>(nk[0]), static_cast<long long>(nk[1]));
        else std::printf("  %5lldx%-5lld %7.2f us %6.0f GB/s", static_cast<long long>(nk[0]), static_cast<long long>(nk[1]), us, bytes / (us * 1e-6) / 1e9);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int iters = 30, group = 128, ikt = 8;
  bool variants = false, stream = true;
  aoti_cuda::shim::OpSettings settings;  // installed below for every call this process makes
  // The 1.1B model (tools/export/llm, config 1b): wqkv, wo, w13 (gate+up), w2 (down), output head.
  Shapes shapes = {{3072, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048},
                   {4096, 4096}, {11008, 4096}, {4096, 11008}};
  std::vector<int64_t> ms;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--shapes" || a == "--m") && i + 1 < argc) {
      // Comma-separated; a shape is NxK with N a multiple of 8 and K of 128.
      if (a == "--shapes") shapes.clear();
      std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, end - at);
        at = end + 1;
        if (a == "--m") {
          ms.push_back(std::atoll(item.c_str()));
          continue;
        }
        const std::size_t x = item.find('x');
        const int64_t n = std::atoll(item.c_str()), k = x == std::string::npos ? 0 : std::atoll(item.c_str() + x + 1);
        if (n <= 0 || k <= 0 || n % 8 != 0 || k % 128 != 0) {
          std::fprintf(stderr, "int4_bench: bad shape '%s' (NxK, N %% 8 == 0, K %% 128 == 0)\n", item.c_str());
          return 2;
        }
        shapes.push_back({n, k});
      }
      continue;
    }
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--group" && i + 1 < argc) group = std::atoi(argv[++i]);
    else if (a == "--inner-k-tiles" && i + 1 < argc) ikt = std::atoi(argv[++i]);
    else if (a == "--variants") variants = true;
    else if (a == "--no-stream") stream = false;
    else if (a == "--dependent-launch" && i + 1 < argc && (std::string(argv[i + 1]) == "on" || std::string(argv[i + 1]) == "off"))
      settings.dependent_launch = std::string(argv[++i]) == "on";
    else if (a == "--weights-early") g_weights_early = true;
    else {
      std::fprintf(stderr, "usage: %s [--json out.json] [--iters N] [--group G] [--inner-k-tiles T] [--variants] [--shapes NxK,...] [--m M,...] [--no-stream] [--dependent-launch on|off] [--weights-early]\n", argv[0]);
      return 2;
    }
  }
  const aoti_cuda::shim::OpSettingsScope scope(&settings);
  const std::size_t flush_bytes = std::size_t{512} << 20;
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  check(cudaMemset(flush, 1, flush_bytes), "cudaMemset(flush)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device %s, %d SMs; group %d, innerKTiles %d, median of %d; dependent launch %s%s\n", prop.name,
              prop.multiProcessorCount, group, ikt, iters, settings.dependent_launch ? "on" : "off",
              g_weights_early ? ", weights early" : "");
  const aoti_cuda_bench::ReadBandwidth bw = aoti_cuda_bench::measure_read_bandwidth();
  if (bw.median_gbps <= 0) {
    std::fprintf(stderr, "int4_bench: the streaming-read measurement failed\n");
    return 1;
  }
  std::printf("streaming read of %.1f GiB: median %.1f GB/s, best %.1f GB/s (%d reps)\n",
              static_cast<double>(bw.bytes) / (1 << 30), bw.median_gbps, bw.best_gbps, bw.reps);
  if (variants) {
    run_variants(iters, group, flush, flush_bytes, shapes,
                 ms.empty() ? std::vector<int64_t>{1, 4, 8, 16, 64, 256, 2048} : ms);
    cudaFree(flush);
    return 0;
  }
  // "us" is the shim op (M >= 65 by default: dequantize + cuBLAS); "kernels us" the int4 kernels
  // alone at the same shape, so the two large-M paths compare side by side.
  std::printf("%6s %6s %6s %10s %8s %12s %10s %8s %6s\n", "M", "N", "K", "us", "GB/s", "kernels us", "stream us",
              "GB/s", "%read");
  std::vector<Result> results;
  if (ms.empty()) ms = {1, 2, 4, 8, 16, 64, 256, 2048};
  for (const auto& nk : shapes) {
    for (int64_t m : ms) {
      Result r = measure(m, nk[0], nk[1], group, ikt, iters, flush, flush_bytes);
      const double kernels_us = ikt == 8 ? measure_variant(0, m, nk[0], nk[1], group, iters, flush, flush_bytes) : -1;
      if (stream && m <= 16) {
        r.stream_us = measure_stream(m, nk[0], nk[1], group, ikt, 7, flush, flush_bytes);
        r.stream_gbps = weight_bytes(nk[0], nk[1], group) / (r.stream_us * 1e-6) / 1e9;
        if (m == 1) {  // the floors depend on the bytes only
          const auto bytes = static_cast<std::size_t>(weight_bytes(nk[0], nk[1], group));
          const auto f = aoti_cuda_bench::measure_call_floors(bytes, stream_copies(nk[0], nk[1], group), 7, flush,
                                                              flush_bytes);
          r.floor_empty_us = f.empty_us;
          r.floor_read_us = f.read_us;
          std::printf("  floors (graph, per call): empty kernel %.2f us, streaming read of the same %.1f MB %.2f us "
                      "(%.0f GB/s)\n", r.floor_empty_us, weight_bytes(nk[0], nk[1], group) / 1e6, r.floor_read_us,
                      weight_bytes(nk[0], nk[1], group) / (r.floor_read_us * 1e-6) / 1e9);
        }
      }
      std::printf("%6lld %6lld %6lld %10.2f %8.1f %12.2f %10.2f %8.1f %6.1f\n", static_cast<long long>(r.m),
                  static_cast<long long>(r.n), static_cast<long long>(r.k), r.us, r.gbps, kernels_us, r.stream_us,
                  r.stream_gbps, r.stream_gbps > 0 ? 100 * r.stream_gbps / bw.median_gbps : -1.0);
      results.push_back(r);
    }
  }
  cudaFree(flush);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "{\"device\": \"%s\", \"group\": %d, \"inner_k_tiles\": %d, \"read_gbps\": %.1f, \"read_bytes\": %zu, \"results\": [\n",
                 prop.name, group, ikt, bw.median_gbps, bw.bytes);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f, "  {\"m\": %lld, \"n\": %lld, \"k\": %lld, \"us\": %.3f, \"gbps\": %.1f", static_cast<long long>(r.m),
                   static_cast<long long>(r.n), static_cast<long long>(r.k), r.us, r.gbps);
      if (r.stream_us > 0) std::fprintf(f, ", \"stream_us\": %.3f, \"stream_gbps\": %.1f", r.stream_us, r.stream_gbps);
      if (r.floor_read_us > 0) {
        std::fprintf(f, ", \"floor_empty_us\": %.3f, \"floor_read_us\": %.3f", r.floor_empty_us, r.floor_read_us);
      }
      std::fprintf(f, "}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
