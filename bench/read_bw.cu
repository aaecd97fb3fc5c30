// aoti_cuda_read_bw: the GPU's streaming-read bandwidth (stream_read.cuh), for the LLM benchmark's
// roofline (bench/llm/bench_llm.py runs it in the same job as the decode measurements).
//
//   aoti_cuda_read_bw [--gib G] [--reps N]      prints one JSON object on stdout
//   aoti_cuda_read_bw --per-call MB[,MB...]     per size, what one call reading that many MB costs at the least
//                                               (call_floors.cuh: back to back in a graph, after an L2 flush);
//                                               one JSON object: {"device", "per_call": [{"mb", "empty_us",
//                                               "read_us", "gbps"}, ...]}
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "call_floors.cuh"
#include "stream_read.cuh"

namespace {

// The per-call floors of each size, as one JSON object; 0 on success.
int per_call(const std::vector<double>& mbs, const char* device) {
  const std::size_t flush_bytes = std::size_t{512} << 20;
  void* flush = nullptr;
  aoti_cuda_bench::check_or_exit(cudaMalloc(&flush, flush_bytes), "cudaMalloc(flush)");
  aoti_cuda_bench::check_or_exit(cudaMemset(flush, 0x3C, flush_bytes), "cudaMemset(flush)");
  std::printf("{\"device\": \"%s\", \"per_call\": [", device);
  for (std::size_t i = 0; i < mbs.size(); ++i) {
    const std::size_t bytes = static_cast<std::size_t>(mbs[i] * 1e6) / 16 * 16;
    const auto f = aoti_cuda_bench::measure_call_floors(bytes, aoti_cuda_bench::copies_for(static_cast<double>(bytes)),
                                                        7, flush, flush_bytes);
    std::printf("%s{\"mb\": %.2f, \"empty_us\": %.2f, \"read_us\": %.2f, \"gbps\": %.0f}", i ? ", " : "",
                bytes / 1e6, f.empty_us, f.read_us, bytes / (f.read_us * 1e-6) / 1e9);
  }
  std::printf("]}\n");
  cudaFree(flush);
  return 0;
}

// "12.5,8.4" as sizes in MB, each in (0, 1024]; empty on a malformed list.
std::vector<double> parse_sizes(const std::string& list) {
  std::vector<double> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double mb = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(mb > 0 && mb <= 1024)) return {};
    out.push_back(mb);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 2;
  int reps = 15;
  std::vector<double> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gib" && i + 1 < argc) gib = std::atof(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--per-call" && i + 1 < argc && !(sizes = parse_sizes(argv[++i])).empty()) continue;
    else {
      std::fprintf(stderr, "usage: %s [--gib G (>= 1)] [--reps N] | --per-call MB[,MB...] (each in (0, 1024])\n",
                   argv[0]);
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
  if (!sizes.empty()) return per_call(sizes, prop.name);
  const auto r = aoti_cuda_bench::measure_read_bandwidth(static_cast<std::size_t>(gib * (1 << 30)) / 64 * 64, reps);
  if (r.median_gbps <= 0) {
    std::fprintf(stderr, "aoti_cuda_read_bw: the read failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("{\"device\": \"%s\", \"bytes\": %zu, \"reps\": %d, \"read_gbps\": %.1f, \"best_gbps\": %.1f}\n", prop.name,
              r.bytes, r.reps, r.median_gbps, r.best_gbps);
  return 0;
}
