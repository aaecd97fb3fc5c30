// The one benchmark engine of aoti_cuda: load-time and per-call latency
// measurement, percentiles and their JSON form. Used by `aoti_cuda bench`
// (one method, printed) and by bench/aoti_cuda_bench (every fixture, a table).
// Not part of the SDK: a tool-side helper linked into the programs.
//
// Thread-compatibility: no shared state; run one measurement at a time per
// Module (timings of concurrent calls would mix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aoti_cuda/aoti_cuda.hpp"

namespace aoti_cuda_bench {

/// Order statistics of a set of timings in milliseconds (nearest rank).
struct Percentiles {
  std::size_t count = 0;
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};
Percentiles summarize(std::vector<double> ms);
/// The `p`-th percentile (0..100, nearest rank) of `ms`; 0 for an empty set.
double percentile(std::vector<double> ms, double p);

/// Loads of one program: the first (which pays one-time process costs such as
/// the CUDA context) and the median of the others.
struct LoadStats {
  int loads = 0;
  double cold_ms = 0;               ///< wall time of the first load
  aoti_cuda::LoadTimings cold;      ///< its phases
  double median_ms = 0;             ///< median wall time of loads 2..N (0 when N == 1)
  aoti_cuda::LoadTimings median;    ///< phases of the load closest to that median
};
/// Loads `pte` `loads` times (>= 1) with `options`. Throws aoti_cuda::Error.
LoadStats measure_loads(const std::string& pte, const aoti_cuda::LoadOptions& options, int loads);

struct RunConfig {
  int warmup = 10;  ///< untimed calls per mode
  int runs = 100;   ///< timed calls per mode
  std::uint32_t seed = 99;  ///< random inputs: seed + input index
};

/// Latency of one method with random inputs, host I/O and device I/O.
struct MethodStats {
  std::string method;
  double first_call_ms = 0;  ///< first execute() (kernel module load + first run), host I/O
  Percentiles host_io;       ///< inputs and outputs in host memory
  Percentiles device_io;     ///< inputs and outputs stay on the GPU
};
/// Measures `method` of a loaded module: one first call, then per mode
/// `warmup` untimed and `runs` timed calls (each waits for completion).
MethodStats measure_method(aoti_cuda::Module& module, const std::string& method, const RunConfig& config);

/// Median time of one step over profiled calls (RunOptions::profile).
struct StepStats {
  std::string what;
  double gpu_ms = -1;  ///< median GPU time (-1 on CPU)
  double host_ms = 0;  ///< median host wall time
};
/// Runs `runs` profiled calls of `method` (random inputs, host or device I/O)
/// after `warmup` unprofiled ones; per-step medians in execution order, then
/// one "whole call" row.
std::vector<StepStats> profile_method(aoti_cuda::Module& module, const std::string& method, const RunConfig& config,
                                      bool device_io);

/// The program's default method: "forward" when present, else the first.
std::string default_method(const std::vector<std::string>& names);

nlohmann::json to_json(const Percentiles& p);
nlohmann::json to_json(const LoadStats& s);
nlohmann::json to_json(const MethodStats& s);
nlohmann::json to_json(const std::vector<StepStats>& steps);

/// Resident set size of this process in KiB (-1 when unknown) and device
/// memory in use on the current device in bytes (0 when unknown).
long rss_kib();
std::size_t device_bytes_used();

}  // namespace aoti_cuda_bench
