// aoti_cuda_bench: load time, first-call time, per-call latency and memory
// footprint for every program in one or more fixture directories.
//
//   aoti_cuda_bench [--runs N] [--loads N] [--json out.json] DIR [DIR...]
//
// Each DIR holds model folders with manifest.json, <name>.pte and the .ptd
// (the layout of tests/fixtures). Numbers are printed as a table and, with
// --json, written for later comparison.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "aoti_cuda/aoti_cuda.hpp"
#include "tensor_io.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5))];
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

size_t device_used() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return total_b - free_b;
}

struct Row {
  std::string model;
  double load_cold = 0, cold_init = 0, load_med = 0, parse = 0, library = 0, container = 0, weights = 0, first = 0;
  double host_p50 = 0, host_p99 = 0, dev_p50 = 0, dev_p99 = 0;
  double dev_mib = 0, rss_mib = 0;
  std::string error;
};

std::vector<std::string> model_dirs(const std::string& root) {
  std::vector<std::string> out;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (stat((root + "/" + name + "/" + name + ".pte").c_str(), &st) == 0) out.push_back(root + "/" + name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 200, loads = 5;
  std::string json_path;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--runs" || a == "--loads") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 1 || v > 1000000) {
        std::fprintf(stderr, "aoti_cuda_bench: %s needs a whole number from 1 to 1000000, got '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--runs" ? runs : loads) = a == "--runs" ? static_cast<int>(v) : std::max(2, static_cast<int>(v));
    }
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "-h" || a == "--help") {
      std::puts("usage: aoti_cuda_bench [--runs N] [--loads N] [--json out.json] FIXTURE_DIR...");
      return 0;
    } else roots.push_back(a);
  }
  if (roots.empty()) {
    std::fputs("usage: aoti_cuda_bench [--runs N] [--loads N] [--json out.json] FIXTURE_DIR...\n", stderr);
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("aoti_cuda_bench: no CUDA device; nothing to measure");
    return 0;
  }
  // No warm-up here: the first model's cold load shows the CUDA context cost
  // (reported separately as ctx_init); later models reuse the context.
  std::vector<Row> rows;
  for (const std::string& root : roots) {
    for (const std::string& dir : model_dirs(root)) {
      Row r;
      r.model = dir.substr(dir.find_last_of('/') + 1);
      const std::string pte = dir + "/" + r.model + ".pte";
      try {
        std::vector<double> wall;
        std::vector<aoti_cuda::LoadTimings> lt;
        for (int k = 0; k < loads; ++k) {
          const auto t0 = Clock::now();
          aoti_cuda::Module m(pte);
          wall.push_back(ms_since(t0));
          lt.push_back(m.load_timings());
        }
        r.load_cold = wall[0];
        r.cold_init = lt[0].device_init_ms;
        std::vector<double> warm(wall.begin() + 1, wall.end());
        r.load_med = pct(warm, 50);
        const size_t med = 1 + static_cast<size_t>(std::min_element(warm.begin(), warm.end(), [&](double a, double b) {
                                 return std::abs(a - r.load_med) < std::abs(b - r.load_med);
                               }) - warm.begin());
        r.parse = lt[med].parse_ms;
        r.library = lt[med].library_ms;
        r.container = lt[med].container_ms;
        r.weights = lt[med].weights_ms;

        const size_t dev0 = device_used();
        const long rss0 = rss_kib();
        aoti_cuda::Module m(pte);
        for (const std::string& method : m.method_names()) {
          const aoti_cuda::MethodMeta meta = m.method_meta(method);
          std::vector<aoti_cuda::Tensor> hin, din;
          for (size_t i = 0; i < meta.inputs.size(); ++i) {
            hin.push_back(aoti_cuda_cli::random_tensor(meta.inputs[i], 7u + static_cast<uint32_t>(i)));
            din.push_back(hin.back().to_device());
          }
          aoti_cuda::RunOptions host_io, dev_io;
          host_io.outputs = aoti_cuda::OutputLocation::kHost;
          dev_io.outputs = aoti_cuda::OutputLocation::kDevice;
          const auto t0 = Clock::now();
          m.execute(method, hin, host_io);
          r.first += ms_since(t0);
          for (int k = 0; k < 10; ++k) m.execute(method, din, dev_io);
          std::vector<double> h, d;
          for (int k = 0; k < runs; ++k) {
            auto t = Clock::now();
            m.execute(method, hin, host_io);
            h.push_back(ms_since(t));
            t = Clock::now();
            m.execute(method, din, dev_io);
            d.push_back(ms_since(t));
          }
          r.host_p50 += pct(h, 50);
          r.host_p99 += pct(h, 99);
          r.dev_p50 += pct(d, 50);
          r.dev_p99 += pct(d, 99);
        }
        r.dev_mib = (static_cast<double>(device_used()) - static_cast<double>(dev0)) / 1048576.0;
        r.rss_mib = (rss_kib() - rss0) / 1024.0;
      } catch (const aoti_cuda::Error& e) {
        r.error = e.what();
      }
      rows.push_back(r);
    }
  }
  std::printf("%-12s %9s %9s %9s %7s %8s %9s %8s %9s %9s %9s %9s %9s %8s %8s\n", "model", "load_cold", "ctx_init", "load_med",
              "parse", "library", "container", "weights", "first", "host_p50", "host_p99", "dev_p50", "dev_p99",
              "dev_MiB", "rss_MiB");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("%-12s ERROR %s\n", r.model.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-12s %9.2f %9.2f %9.2f %7.2f %8.2f %9.2f %8.2f %9.2f %9.4f %9.4f %9.4f %9.4f %8.1f %8.1f\n",
                r.model.c_str(), r.load_cold, r.cold_init, r.load_med, r.parse, r.library, r.container, r.weights, r.first,
                r.host_p50, r.host_p99, r.dev_p50, r.dev_p99, r.dev_mib, r.rss_mib);
  }
  std::puts("(times in ms; load_cold = first load of the model in this process, ctx_init = CUDA context creation within it;\n"
            " load_med = median of the later loads, split into parse/library/container/weights; first = first execute();\n"
            " host/dev = per-call latency with host or device-resident I/O, including synchronization; methods summed)");
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << "  {\"model\": \"" << r.model << "\", \"error\": \"" << (r.error.empty() ? "" : "failed")
        << "\", \"load_cold_ms\": " << r.load_cold << ", \"context_init_ms\": " << r.cold_init << ", \"load_median_ms\": " << r.load_med
        << ", \"parse_ms\": " << r.parse << ", \"library_ms\": " << r.library << ", \"container_ms\": " << r.container
        << ", \"weights_ms\": " << r.weights << ", \"first_call_ms\": " << r.first << ", \"host_io_p50_ms\": "
        << r.host_p50 << ", \"host_io_p99_ms\": " << r.host_p99 << ", \"device_io_p50_ms\": " << r.dev_p50
        << ", \"device_io_p99_ms\": " << r.dev_p99 << ", \"device_mib\": " << r.dev_mib << ", \"rss_mib\": "
        << r.rss_mib << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    f << "]\n";
  }
  return 0;
}
