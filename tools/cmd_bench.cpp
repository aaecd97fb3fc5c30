// `aoti_cuda bench`: load time by phase, first-call time and steady-state
// latency percentiles of one method.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "aoti_cuda/aoti_cuda.hpp"
#include "cli.hpp"
#include "tensor_io.hpp"

namespace {

const char* kBenchHelp =
    "usage: aoti_cuda bench MODEL.pte [options]\n"
    "\n"
    "Measures load time by phase (parse, library load, container create, weights\n"
    "upload), first-call time, and steady-state latency p50/p90/p99 of one method\n"
    "with random inputs, for host I/O (inputs and outputs in host memory) and device\n"
    "I/O (inputs and outputs stay on the GPU).\n"
    "\n"
    "options:\n"
    "  --data FILE.ptd   data file (repeatable; default: aoti_cuda_blob.ptd beside the .pte)\n"
    "  --method NAME     method (default: forward, or the only method)\n"
    "  --runs N          timed runs per mode (default 100)\n"
    "  --warmup N        untimed runs before timing (default 10)\n"
    "  --loads N         load the program N times and report the median load (default 3)\n"
    "  --device N        CUDA device ordinal (default 0)\n"
    "  -h, --help        this help\n";

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t idx = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[idx];
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  std::string model, method;
  aoti_cuda::LoadOptions load;
  int runs = 100, warmup = 10, loads = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kBenchHelp, stdout);
      return 0;
    } else if (a == "--data") {
      load.data_files.push_back(aoti_cuda_cli::option_value("bench", i, argc, argv));
    } else if (a == "--method") {
      method = aoti_cuda_cli::option_value("bench", i, argc, argv);
    } else if (a == "--runs") {
      runs = std::max(1, static_cast<int>(aoti_cuda_cli::int_option("bench", i, argc, argv)));
    } else if (a == "--warmup") {
      warmup = std::max(0, static_cast<int>(aoti_cuda_cli::int_option("bench", i, argc, argv)));
    } else if (a == "--loads") {
      loads = std::max(1, static_cast<int>(aoti_cuda_cli::int_option("bench", i, argc, argv)));
    } else if (a == "--device") {
      load.device = aoti_cuda::Device::cuda(static_cast<int>(aoti_cuda_cli::int_option("bench", i, argc, argv)));
    } else if (const int rc = aoti_cuda_cli::take_program_arg("bench", a, model, kBenchHelp)) {
      return rc;
    }
  }
  if (model.empty()) {
    std::fputs(kBenchHelp, stderr);
    return 2;
  }
  const bool tty = isatty(STDERR_FILENO);

  // Loads: the first one pays one-time process costs (CUDA context, driver
  // JIT caches); report it separately from the median of the rest.
  std::vector<aoti_cuda::LoadTimings> timings;
  std::vector<double> wall;
  for (int k = 0; k < loads; ++k) {
    if (tty) load.on_progress = aoti_cuda_cli::terminal_progress;
    const auto t0 = Clock::now();
    aoti_cuda::Module m(model, load);
    wall.push_back(ms_since(t0));
    timings.push_back(m.load_timings());
  }
  std::printf("%s\n", model.c_str());
  std::printf("  load #1 (cold process): %8.2f ms  parse %.2f  device init %.2f  library %.2f  container %.2f  weights %.2f\n", wall[0],
              timings[0].parse_ms, timings[0].device_init_ms, timings[0].library_ms, timings[0].container_ms, timings[0].weights_ms);
  if (loads > 1) {
    std::vector<size_t> order;
    for (int k = 1; k < loads; ++k) order.push_back(static_cast<size_t>(k));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return wall[a] < wall[b]; });
    const size_t med = order[order.size() / 2];
    std::printf("  load median of %d more: %8.2f ms  parse %.2f  library %.2f  container %.2f  weights %.2f\n",
                loads - 1, wall[med], timings[med].parse_ms, timings[med].library_ms, timings[med].container_ms,
                timings[med].weights_ms);
  }

  aoti_cuda::Module module(model, load);
  if (method.empty()) method = aoti_cuda_cli::default_method(module);
  const aoti_cuda::MethodMeta meta = module.method_meta(method);
  std::vector<aoti_cuda::Tensor> host_in, dev_in;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    host_in.push_back(aoti_cuda_cli::random_tensor(meta.inputs[i], 99u + static_cast<uint32_t>(i)));
    dev_in.push_back(host_in.back().to(load.device));
  }
  aoti_cuda::RunOptions host_io;
  host_io.outputs = aoti_cuda::OutputLocation::kHost;
  aoti_cuda::RunOptions dev_io;
  dev_io.outputs = aoti_cuda::OutputLocation::kDevice;

  auto t_first = Clock::now();
  module.execute(method, host_in, host_io);
  const double first_ms = ms_since(t_first);
  std::printf("  first call (kernel load + first run): %.3f ms\n", first_ms);

  struct Mode {
    const char* name;
    const std::vector<aoti_cuda::Tensor>* inputs;
    aoti_cuda::RunOptions options;
  } modes[] = {{"host I/O", &host_in, host_io}, {"device I/O", &dev_in, dev_io}};
  for (const Mode& mode : modes) {
    for (int k = 0; k < warmup; ++k) module.execute(method, *mode.inputs, mode.options);
    std::vector<double> lat;
    lat.reserve(runs);
    for (int k = 0; k < runs; ++k) {
      const auto t0 = Clock::now();
      module.execute(method, *mode.inputs, mode.options);  // waits for completion (Module stream)
      lat.push_back(ms_since(t0));
    }
    std::printf("  %-10s latency over %d runs: p50 %.4f ms  p90 %.4f ms  p99 %.4f ms  min %.4f ms\n", mode.name, runs,
                percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), percentile(lat, 0));
  }
  const aoti_cuda::MemoryStats ms = aoti_cuda::device_memory_stats(load.device.index);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("  shim allocator: in use %.2f MiB, peak %.2f MiB, %zu allocations, pool reserved %.2f MiB; device used %.1f MiB\n",
              ms.bytes_in_use / 1048576.0, ms.peak_bytes_in_use / 1048576.0, ms.total_allocations,
              ms.pool_reserved_bytes / 1048576.0, (total_b - free_b) / 1048576.0);
  return 0;
}
