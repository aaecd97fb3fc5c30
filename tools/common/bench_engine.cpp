// The benchmark engine (see bench_engine.hpp).
#include "bench_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include <cuda_runtime_api.h>

#include "tensor_io.hpp"

namespace aoti_cuda_bench {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

nlohmann::json timings_json(const aoti_cuda::LoadTimings& t) {
  return {{"parse_ms", t.parse_ms},         {"device_init_ms", t.device_init_ms}, {"library_ms", t.library_ms},
          {"container_ms", t.container_ms}, {"weights_ms", t.weights_ms},         {"total_ms", t.total_ms}};
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  return v[static_cast<std::size_t>(std::lround(rank))];
}

Percentiles summarize(std::vector<double> ms) {
  Percentiles p;
  p.count = ms.size();
  if (ms.empty()) return p;
  std::sort(ms.begin(), ms.end());
  p.min = ms.front();
  p.max = ms.back();
  p.p50 = percentile(ms, 50);
  p.p90 = percentile(ms, 90);
  p.p99 = percentile(ms, 99);
  double sum = 0;
  for (double x : ms) sum += x;
  p.mean = sum / static_cast<double>(ms.size());
  return p;
}

LoadStats measure_loads(const std::string& pte, const aoti_cuda::LoadOptions& options, int loads) {
  LoadStats s;
  s.loads = std::max(1, loads);
  std::vector<double> wall;
  std::vector<aoti_cuda::LoadTimings> phases;
  for (int k = 0; k < s.loads; ++k) {
    const auto t0 = Clock::now();
    aoti_cuda::Module m(pte, options);
    wall.push_back(ms_since(t0));
    phases.push_back(m.load_timings());
  }
  s.cold_ms = wall[0];
  s.cold = phases[0];
  if (s.loads > 1) {
    const std::vector<double> warm(wall.begin() + 1, wall.end());
    s.median_ms = percentile(warm, 50);
    std::size_t best = 1;
    for (std::size_t k = 1; k < wall.size(); ++k) {
      if (std::fabs(wall[k] - s.median_ms) < std::fabs(wall[best] - s.median_ms)) best = k;
    }
    s.median = phases[best];
  }
  return s;
}

MethodStats measure_method(aoti_cuda::Module& module, const std::string& method, const RunConfig& config) {
  MethodStats s;
  s.method = method;
  const aoti_cuda::MethodMeta meta = module.method_meta(method);
  std::vector<aoti_cuda::Tensor> host_in, dev_in;
  for (std::size_t i = 0; i < meta.inputs.size(); ++i) {
    host_in.push_back(aoti_cuda_cli::random_tensor(meta.inputs[i], config.seed + static_cast<std::uint32_t>(i)));
    dev_in.push_back(host_in.back().to_device());
  }
  aoti_cuda::RunOptions host_io, dev_io;
  host_io.outputs = aoti_cuda::OutputLocation::kHost;
  dev_io.outputs = aoti_cuda::OutputLocation::kDevice;
  const auto t_first = Clock::now();
  module.execute(method, host_in, host_io);
  s.first_call_ms = ms_since(t_first);
  auto timed = [&](const std::vector<aoti_cuda::Tensor>& in, const aoti_cuda::RunOptions& ro) {
    for (int k = 0; k < config.warmup; ++k) module.execute(method, in, ro);
    std::vector<double> lat;
    lat.reserve(static_cast<std::size_t>(config.runs));
    for (int k = 0; k < config.runs; ++k) {
      const auto t0 = Clock::now();
      module.execute(method, in, ro);  // returns when results are ready (Module stream)
      lat.push_back(ms_since(t0));
    }
    return summarize(std::move(lat));
  };
  s.host_io = timed(host_in, host_io);
  s.device_io = timed(dev_in, dev_io);
  return s;
}

std::vector<StepStats> profile_method(aoti_cuda::Module& module, const std::string& method, const RunConfig& config,
                                      bool device_io) {
  const aoti_cuda::MethodMeta meta = module.method_meta(method);
  std::vector<aoti_cuda::Tensor> in;
  for (std::size_t i = 0; i < meta.inputs.size(); ++i) {
    aoti_cuda::Tensor t = aoti_cuda_cli::random_tensor(meta.inputs[i], config.seed + static_cast<std::uint32_t>(i));
    in.push_back(device_io ? t.to_device() : t);
  }
  aoti_cuda::RunOptions ro;
  ro.outputs = device_io ? aoti_cuda::OutputLocation::kDevice : aoti_cuda::OutputLocation::kHost;
  for (int k = 0; k < config.warmup; ++k) module.execute(method, in, ro);
  aoti_cuda::RunProfile prof;
  ro.profile = &prof;
  std::vector<std::string> names;
  std::vector<std::vector<double>> gpu, host;  // per step, per call
  for (int k = 0; k < config.runs; ++k) {
    module.execute(method, in, ro);
    prof.steps.push_back({"whole call", prof.host_ms, prof.gpu_ms});
    for (std::size_t i = 0; i < prof.steps.size(); ++i) {
      if (i >= names.size()) {
        names.push_back(prof.steps[i].what);
        gpu.emplace_back();
        host.emplace_back();
      }
      gpu[i].push_back(prof.steps[i].gpu_ms);
      host[i].push_back(prof.steps[i].host_ms);
    }
  }
  std::vector<StepStats> out;
  for (std::size_t i = 0; i < names.size(); ++i) out.push_back({names[i], percentile(gpu[i], 50), percentile(host[i], 50)});
  return out;
}

std::string default_method(const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), "forward") != names.end() || names.empty()) return "forward";
  return names.front();
}

nlohmann::json to_json(const Percentiles& p) {
  return {{"count", p.count}, {"min_ms", p.min}, {"p50_ms", p.p50}, {"p90_ms", p.p90},
          {"p99_ms", p.p99},  {"max_ms", p.max}, {"mean_ms", p.mean}};
}

nlohmann::json to_json(const LoadStats& s) {
  return {{"loads", s.loads}, {"cold_ms", s.cold_ms}, {"cold", timings_json(s.cold)},
          {"median_ms", s.median_ms}, {"median", timings_json(s.median)}};
}

nlohmann::json to_json(const MethodStats& s) {
  return {{"method", s.method}, {"first_call_ms", s.first_call_ms}, {"host_io", to_json(s.host_io)},
          {"device_io", to_json(s.device_io)}};
}

nlohmann::json to_json(const std::vector<StepStats>& steps) {
  nlohmann::json j = nlohmann::json::array();
  for (const StepStats& s : steps) j.push_back({{"step", s.what}, {"gpu_ms_p50", s.gpu_ms}, {"host_ms_p50", s.host_ms}});
  return j;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

std::size_t device_bytes_used() {
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return total_b - free_b;
}

}  // namespace aoti_cuda_bench
