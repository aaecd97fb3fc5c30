// aoti_cuda_read_bw: the GPU's streaming-read bandwidth (stream_read.cuh), for the LLM benchmark's
// roofline (bench/llm/bench_llm.py runs it in the same job as the decode measurements).
//
//   aoti_cuda_read_bw [--gib G] [--reps N]      prints one JSON object on stdout
#include <cstdio>
#include <cstdlib>
#include <string>

#include "stream_read.cuh"

int main(int argc, char** argv) {
  double gib = 2;
  int reps = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) gib = std::atof(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--gib G (>= 1)] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (gib < 1 || reps < 1) {
    std::fprintf(stderr, "aoti_cuda_read_bw: need --gib >= 1 (the read must dwarf the L2) and --reps >= 1\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "aoti_cuda_read_bw: no CUDA device\n");
    return 1;
  }
  const auto r = aoti_cuda_bench::measure_read_bandwidth(static_cast<std::size_t>(gib * (1 << 30)) / 64 * 64, reps);
  if (r.median_gbps <= 0) {
    std::fprintf(stderr, "aoti_cuda_read_bw: the read failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("{\"device\": \"%s\", \"bytes\": %zu, \"reps\": %d, \"read_gbps\": %.1f, \"best_gbps\": %.1f}\n", prop.name,
              r.bytes, r.reps, r.median_gbps, r.best_gbps);
  return 0;
}
