// aoti_cuda_bench: load time, first-call time, per-call latency and memory
// footprint for every program in one or more fixture directories, as one
// table (and JSON). The measuring is the benchmark engine that `aoti_cuda
// bench` uses (tools/common/bench_engine.hpp); this program only walks the
// fixture folders, sums per-method numbers per program and prints the table.
//
//   aoti_cuda_bench [--runs N] [--loads N] [--json out.json] DIR [DIR...]
//
// Each DIR holds model folders <name>/<name>.pte (the layout of tests/fixtures).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "aoti_cuda/aoti_cuda.hpp"
#include "bench_engine.hpp"

namespace {

struct Row {
  std::string model, error;
  aoti_cuda_bench::LoadStats load;
  double first = 0, host_p50 = 0, host_p99 = 0, dev_p50 = 0, dev_p99 = 0, dev_mib = 0, rss_mib = 0;
};

std::vector<std::string> model_dirs(const std::string& root) {
  std::vector<std::string> out;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      struct stat st {};
      if (name != "." && name != ".." && stat((root + "/" + name + "/" + name + ".pte").c_str(), &st) == 0) {
        out.push_back(root + "/" + name);
      }
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Row measure(const std::string& dir, int runs, int loads) {
  Row r;
  r.model = dir.substr(dir.find_last_of('/') + 1);
  const std::string pte = dir + "/" + r.model + ".pte";
  try {
    r.load = aoti_cuda_bench::measure_loads(pte, {}, loads);
    const std::size_t dev0 = aoti_cuda_bench::device_bytes_used();
    const long rss0 = aoti_cuda_bench::rss_kib();
    aoti_cuda::Module m(pte);
    aoti_cuda_bench::RunConfig rc;
    rc.runs = runs;
    rc.seed = 7;
    for (const std::string& method : m.method_names()) {
      const aoti_cuda_bench::MethodStats s = aoti_cuda_bench::measure_method(m, method, rc);
      r.first += s.first_call_ms;
      r.host_p50 += s.host_io.p50;
      r.host_p99 += s.host_io.p99;
      r.dev_p50 += s.device_io.p50;
      r.dev_p99 += s.device_io.p99;
    }
    r.dev_mib = (static_cast<double>(aoti_cuda_bench::device_bytes_used()) - static_cast<double>(dev0)) / 1048576.0;
    r.rss_mib = static_cast<double>(aoti_cuda_bench::rss_kib() - rss0) / 1024.0;
  } catch (const aoti_cuda::Error& e) {
    r.error = e.what();
  }
  return r;
}

void write_json(const std::string& path, const std::vector<Row>& rows) {
  nlohmann::json doc = nlohmann::json::array();
  for (const Row& r : rows) {
    doc.push_back({{"model", r.model}, {"error", r.error.empty() ? "" : "failed"}, {"error_message", r.error},
                   {"load_cold_ms", r.load.cold_ms}, {"context_init_ms", r.load.cold.device_init_ms},
                   {"load_median_ms", r.load.median_ms}, {"parse_ms", r.load.median.parse_ms},
                   {"library_ms", r.load.median.library_ms}, {"container_ms", r.load.median.container_ms},
                   {"weights_ms", r.load.median.weights_ms}, {"first_call_ms", r.first}, {"host_io_p50_ms", r.host_p50},
                   {"host_io_p99_ms", r.host_p99}, {"device_io_p50_ms", r.dev_p50}, {"device_io_p99_ms", r.dev_p99},
                   {"device_mib", r.dev_mib}, {"rss_mib", r.rss_mib}});
  }
  std::ofstream(path) << doc.dump(2) << "\n";
}

bool parse_count(const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

const char* kUsage = "usage: aoti_cuda_bench [--runs N] [--loads N] [--json out.json] FIXTURE_DIR...\n";

}  // namespace

int main(int argc, char** argv) {
  int runs = 200, loads = 5;
  std::string json_path;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "--runs" || a == "--loads" || a == "--json") && i + 1 >= argc) {
      std::fprintf(stderr, "aoti_cuda_bench: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    } else if (a == "--runs" || a == "--loads") {
      if (!parse_count(argv[++i], a == "--runs" ? &runs : &loads)) {
        std::fprintf(stderr, "aoti_cuda_bench: %s needs a whole number from 1 to 1000000, got '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
    } else if (a == "--json") {
      json_path = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "aoti_cuda_bench: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      roots.push_back(a);
    }
  }
  if (roots.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  loads = std::max(2, loads);  // the median needs at least one load after the cold one
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("aoti_cuda_bench: no CUDA device; nothing to measure");
    return 3;
  }
  // No warm-up: the first model's cold load shows the CUDA context cost.
  std::vector<Row> rows;
  for (const std::string& root : roots) {
    for (const std::string& dir : model_dirs(root)) rows.push_back(measure(dir, runs, loads));
  }
  std::printf("%-12s %9s %9s %9s %7s %8s %9s %8s %9s %9s %9s %9s %9s %8s %8s\n", "model", "load_cold", "ctx_init",
              "load_med", "parse", "library", "container", "weights", "first", "host_p50", "host_p99", "dev_p50",
              "dev_p99", "dev_MiB", "rss_MiB");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("%-12s ERROR %s\n", r.model.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-12s %9.2f %9.2f %9.2f %7.2f %8.2f %9.2f %8.2f %9.2f %9.4f %9.4f %9.4f %9.4f %8.1f %8.1f\n",
                r.model.c_str(), r.load.cold_ms, r.load.cold.device_init_ms, r.load.median_ms, r.load.median.parse_ms,
                r.load.median.library_ms, r.load.median.container_ms, r.load.median.weights_ms, r.first, r.host_p50,
                r.host_p99, r.dev_p50, r.dev_p99, r.dev_mib, r.rss_mib);
  }
  std::puts("(times in ms; load_cold = first load of the model in this process, ctx_init = CUDA context creation within it;\n"
            " load_med = median of the later loads, split into parse/library/container/weights; first = first execute();\n"
            " host/dev = per-call latency with host or device-resident I/O, including synchronization; methods summed)");
  if (!json_path.empty()) write_json(json_path, rows);
  return 0;
}
