// `aoti_cuda bench`: load time by phase, first-call time and steady-state
// latency percentiles of one method (the benchmark engine in tools/common).
#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_engine.hpp"
#include "cli.hpp"

namespace aoti_cuda_cli {
namespace {

struct BenchArgs {
  std::string model, method;
  std::vector<std::string> data;
  int runs = 100, warmup = 10, loads = 3, device = 0;
  bool json = false, profile = false, graphs = false, bound_outputs = false;
  aoti_cuda::TuningOptions tuning;
};

void print_text(const std::string& model, const aoti_cuda_bench::LoadStats& ls, const aoti_cuda_bench::MethodStats& ms,
                const aoti_cuda::MemoryStats& mem, std::size_t device_used) {
  std::printf("%s, method '%s'\n", model.c_str(), ms.method.c_str());
  std::printf("  load #1 (cold process): %8.2f ms  parse %.2f  device init %.2f  library %.2f  container %.2f  weights %.2f\n",
              ls.cold_ms, ls.cold.parse_ms, ls.cold.device_init_ms, ls.cold.library_ms, ls.cold.container_ms,
              ls.cold.weights_ms);
  if (ls.loads > 1) {
    std::printf("  load median of %d more: %8.2f ms  parse %.2f  library %.2f  container %.2f  weights %.2f\n", ls.loads - 1,
                ls.median_ms, ls.median.parse_ms, ls.median.library_ms, ls.median.container_ms, ls.median.weights_ms);
  }
  std::printf("  first call (kernel load + first run): %.3f ms\n", ms.first_call_ms);
  const std::pair<const char*, const aoti_cuda_bench::Percentiles*> modes[] = {
      {"host I/O", &ms.host_io},
      {"device I/O", &ms.device_io},
      {"bound host", ms.bound ? &ms.bound_host_io : nullptr},
      {"bound dev", ms.bound ? &ms.bound_device_io : nullptr}};
  for (const auto& [name, p] : modes) {
    if (p == nullptr) continue;
    std::printf("  %-10s latency over %zu runs: p50 %.4f ms  p90 %.4f ms  p99 %.4f ms  min %.4f ms\n", name, p->count,
                p->p50, p->p90, p->p99, p->min);
  }
  std::printf("  shim allocator: in use %.2f MiB, peak %.2f MiB, %zu allocations, pool reserved %.2f MiB; device used %.1f MiB\n",
              mem.bytes_in_use / 1048576.0, mem.peak_bytes_in_use / 1048576.0, mem.total_allocations,
              mem.pool_reserved_bytes / 1048576.0, device_used / 1048576.0);
}

void print_profile(const char* mode, const std::vector<aoti_cuda_bench::StepStats>& steps, int runs) {
  std::printf("  profile, %s (median of %d profiled calls; GPU = CUDA events on the run stream):\n", mode, runs);
  for (const auto& s : steps) {
    std::printf("    %-44s GPU %9.4f ms   host %9.4f ms\n", s.what.c_str(), s.gpu_ms, s.host_ms);
  }
}

int run_bench(const BenchArgs& a) {
  (void)aoti_cuda::resolve_tuning(a.tuning);  // bad tuning flags or variables: exit 2 before reading anything
  aoti_cuda::ProgramOptions popts;
  popts.data_files = a.data;
  const aoti_cuda::Program program = aoti_cuda::Program::open(a.model, popts);
  const std::string method = choose_method(program, a.method);
  check_method_runnable(program, method);

  aoti_cuda::LoadOptions load;
  load.data_files = a.data;
  load.device = aoti_cuda::Device::cuda(a.device);
  load.methods = {method};
  load.tuning = a.tuning;
  if (!a.json && isatty(STDERR_FILENO)) load.on_progress = terminal_progress;
  // The first load pays one-time process costs (CUDA context, driver caches);
  // the engine reports it apart from the median of the others.
  const aoti_cuda_bench::LoadStats ls = aoti_cuda_bench::measure_loads(a.model, load, a.loads);
  load.cuda_graphs = a.graphs;
  aoti_cuda::Module module(a.model, load);
  aoti_cuda_bench::RunConfig rc;
  rc.runs = a.runs;
  rc.warmup = a.warmup;
  rc.bound_outputs = a.bound_outputs;
  const aoti_cuda_bench::MethodStats ms = aoti_cuda_bench::measure_method(module, method, rc);
  const aoti_cuda::GraphStatus gs = module.graph_status(method);
  std::vector<aoti_cuda_bench::StepStats> host_steps, dev_steps;
  if (a.profile) {
    host_steps = aoti_cuda_bench::profile_method(module, method, rc, false);
    dev_steps = aoti_cuda_bench::profile_method(module, method, rc, true);
  }
  const aoti_cuda::MemoryStats mem = aoti_cuda::device_memory_stats(a.device);
  const std::size_t used = aoti_cuda_bench::device_bytes_used();
  if (!a.json) {
    print_text(a.model, ls, ms, mem, used);
    std::printf("  tuning: %s\n", describe_tuning(module.tuning()).c_str());
    if (a.graphs) {
      std::printf("  CUDA graphs: %s (%zu captured, %zu replays)\n",
                  gs.available ? "on" : ("off: " + gs.reason).c_str(), gs.captures, gs.replays);
    }
    if (a.profile) {
      print_profile("host I/O", host_steps, a.runs);
      print_profile("device I/O", dev_steps, a.runs);
    }
    return kExitOk;
  }
  nlohmann::json doc = {{"program", a.model},
                        {"tuning", tuning_json(module.tuning())},
                        {"load", aoti_cuda_bench::to_json(ls)},
                        {"latency", aoti_cuda_bench::to_json(ms)},
                        {"graphs", {{"requested", gs.requested}, {"available", gs.available}, {"reason", gs.reason},
                                    {"captures", gs.captures}, {"replays", gs.replays}}},
                        {"memory", {{"shim_in_use_bytes", mem.bytes_in_use},
                                    {"shim_peak_bytes", mem.peak_bytes_in_use},
                                    {"shim_pool_reserved_bytes", mem.pool_reserved_bytes},
                                    {"device_used_bytes", used}}}};
  if (a.profile) doc["profile"] = {{"host_io", aoti_cuda_bench::to_json(host_steps)}, {"device_io", aoti_cuda_bench::to_json(dev_steps)}};
  std::printf("%s\n", doc.dump(2).c_str());
  return kExitOk;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "load time by phase, first call, latency p50/p90/p99 of one method");
  cmd->footer(
      "Random inputs; host I/O (inputs and outputs in host memory) and device I/O (they stay on the GPU).\n"
      "Exit status: 0 ok, 1 failure, 2 usage error, 3 not runnable here.");
  auto a = std::make_shared<BenchArgs>();
  add_model_option(*cmd, a->model);
  add_data_option(*cmd, a->data);
  cmd->add_option("--method", a->method, "method (default: forward, or the first method)");
  cmd->add_option("--runs", a->runs, "timed runs per mode (default 100)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", a->warmup, "untimed runs before timing (default 10)")->check(CLI::Range(0, 1000000));
  cmd->add_option("--loads", a->loads, "load the program N times; median of loads 2..N (default 3)")
      ->check(CLI::Range(1, 1000));
  add_device_option(*cmd, a->device);
  cmd->add_flag("--profile", a->profile,
                "also time each step of a call (staging, each delegate, its outputs, copies) with CUDA events");
  cmd->add_flag("--graphs", a->graphs,
                "load with LoadOptions::cuda_graphs: calls replay a captured CUDA graph (see graph_status in the output)");
  cmd->add_flag("--bound-outputs", a->bound_outputs,
                "also time execute_into() with preallocated outputs (pinned host and device)");
  add_json_flag(*cmd, a->json);
  add_tuning_options(*cmd, a->tuning);
  return [a] { return run_bench(*a); };
}

}  // namespace aoti_cuda_cli
