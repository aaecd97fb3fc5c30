// aoti_cuda_call_bench: per-call latency of every fixture method in each call
// mode, interleaved in one process (A/B/A/B..., so machine noise hits every
// mode alike), plus the time to first result of a fresh process.
//
//   aoti_cuda_call_bench [--runs N] [--json out.json] DIR...   every model folder in DIR (tests/fixtures layout)
//   aoti_cuda_call_bench --first MODEL_DIR                      one JSON line: load + first call in this process
//
// Modes (random inputs at the methods' upper-bound shapes; every call waits
// for its results):
//   plain_dev / plain_host      execute(), device- or host-resident inputs and outputs
//   graphs_dev / graphs_host    the same with LoadOptions::cuda_graphs (replays)
//   bound_dev / bound_host      execute_into() caller-allocated outputs (device / pinned host)
//   graphs_bound_dev / _host    both
//   floor                       one 4-byte device copy + stream synchronize: the cost of any synchronized call
// Output: a table (p50 / p90 in µs) and, with --json, one row per method with
// "<mode>": {"p50_ms", "p90_ms"} (bench/report.py reads every *p50* field).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "aoti_cuda/aoti_cuda.hpp"
#include "tensor_io.hpp"

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point g_start = Clock::now();
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5))];
}

std::vector<std::string> model_dirs(const std::string& root) {
  std::vector<std::string> out;
  struct stat st {};
  const std::string self = root.substr(root.find_last_of('/') + 1);
  if (stat((root + "/" + self + ".pte").c_str(), &st) == 0) return {root};
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (stat((root + "/" + name + "/" + name + ".pte").c_str(), &st) == 0) out.push_back(root + "/" + name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string pte_of(const std::string& dir) { return dir + "/" + dir.substr(dir.find_last_of('/') + 1) + ".pte"; }

struct Mode {
  std::string name;
  std::function<void()> call;
  std::vector<double> ms;
};

struct Row {
  std::string model, method, graph_note;
  std::vector<Mode> modes;
};

// Every mode of one method, interleaved.
Row measure(aoti_cuda::Module& plain, aoti_cuda::Module& graphs, const std::string& model, const std::string& method,
            int runs) {
  using aoti_cuda::Tensor;
  const aoti_cuda::MethodMeta meta = plain.method_meta(method);
  std::vector<Tensor> hin, din;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    hin.push_back(aoti_cuda_cli::random_tensor(meta.inputs[i], 7u + static_cast<uint32_t>(i)));
    din.push_back(hin.back().to_device());
  }
  aoti_cuda::RunOptions dev, host;
  dev.outputs = aoti_cuda::OutputLocation::kDevice;
  host.outputs = aoti_cuda::OutputLocation::kHost;
  const std::vector<Tensor> ref = plain.execute(method, din, dev);  // output shapes for the bound tensors
  std::vector<Tensor> dout, hout;
  for (const Tensor& t : ref) {
    dout.push_back(Tensor::empty(t.shape(), t.dtype(), t.device()));
    hout.push_back(Tensor::empty(t.shape(), t.dtype(), aoti_cuda::Device::cpu(), /*pinned=*/true));
  }
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* scratch = nullptr;
  cudaMalloc(&scratch, 8);
  Row r{model, method, "", {}};
  r.modes = {
      {"plain_dev", [&] { (void)plain.execute(method, din, dev); }, {}},
      {"graphs_dev", [&] { (void)graphs.execute(method, din, dev); }, {}},
      {"bound_dev", [&] { plain.execute_into(method, din, dout); }, {}},
      {"graphs_bound_dev", [&] { graphs.execute_into(method, din, dout); }, {}},
      {"plain_host", [&] { (void)plain.execute(method, hin, host); }, {}},
      {"graphs_host", [&] { (void)graphs.execute(method, hin, host); }, {}},
      {"bound_host", [&] { plain.execute_into(method, hin, hout); }, {}},
      {"graphs_bound_host", [&] { graphs.execute_into(method, hin, hout); }, {}},
      {"floor", [&] {
         cudaMemcpyAsync(scratch, static_cast<char*>(scratch) + 4, 4, cudaMemcpyDeviceToDevice, s);
         cudaStreamSynchronize(s);
       }, {}},
  };
  for (int k = 0; k < 10; ++k) {
    for (Mode& m : r.modes) m.call();
  }
  for (int k = 0; k < runs; ++k) {
    for (Mode& m : r.modes) {
      const auto t0 = Clock::now();
      m.call();
      m.ms.push_back(ms_since(t0));
    }
  }
  const aoti_cuda::GraphStatus st = graphs.graph_status(method);
  r.graph_note = st.available ? "graphs " + std::to_string(st.graphs) + ", replays " + std::to_string(st.replays)
                              : "graphs off: " + st.reason;
  cudaFree(scratch);
  cudaStreamDestroy(s);
  return r;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

int first_result(const std::string& dir) {
  const std::string model = dir.substr(dir.find_last_of('/') + 1);
  try {
    const auto t0 = Clock::now();
    aoti_cuda::Module m(pte_of(dir));
    const double load = ms_since(t0);
    const std::string method = m.method_names().front();
    const aoti_cuda::MethodMeta meta = m.method_meta(method);
    std::vector<aoti_cuda::Tensor> hin;
    for (size_t i = 0; i < meta.inputs.size(); ++i) hin.push_back(aoti_cuda_cli::random_tensor(meta.inputs[i], 7u));
    const auto t1 = Clock::now();
    (void)m.execute(method, hin);
    const double first = ms_since(t1);
    std::printf("{\"model\": \"%s\", \"method\": \"%s\", \"load_ms\": %.3f, \"first_call_ms\": %.3f, "
                "\"time_to_first_result_ms\": %.3f, \"since_process_start_ms\": %.3f}\n",
                model.c_str(), method.c_str(), load, first, load + first, ms_since(g_start));
    return 0;
  } catch (const aoti_cuda::Error& e) {
    std::printf("{\"model\": \"%s\", \"error\": \"%s\"}\n", model.c_str(), json_escape(e.what()).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 300;
  std::string json_path;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--first" && i + 1 < argc) return first_result(argv[++i]);
    else if (a == "-h" || a == "--help") {
      std::puts("usage: aoti_cuda_call_bench [--runs N] [--json out.json] DIR... | --first MODEL_DIR");
      return 0;
    } else roots.push_back(a);
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("aoti_cuda_call_bench: no CUDA device; nothing to measure");
    return 0;
  }
  std::vector<Row> rows;
  for (const std::string& root : roots) {
    for (const std::string& dir : model_dirs(root)) {
      const std::string model = dir.substr(dir.find_last_of('/') + 1);
      try {
        aoti_cuda::Module plain(pte_of(dir));
        aoti_cuda::LoadOptions go;
        go.cuda_graphs = true;
        aoti_cuda::Module graphs(pte_of(dir), go);
        for (const std::string& method : plain.method_names()) rows.push_back(measure(plain, graphs, model, method, runs));
      } catch (const aoti_cuda::Error& e) {
        std::printf("%-22s ERROR %s\n", model.c_str(), e.what());
      }
    }
  }
  if (rows.empty()) return 1;
  std::printf("%-24s", "p50/p90 us");
  for (const Mode& m : rows[0].modes) std::printf(" %17s", m.name.c_str());
  std::puts("");
  for (const Row& r : rows) {
    std::printf("%-24s", (r.model + "." + r.method).substr(0, 24).c_str());
    for (const Mode& m : r.modes) std::printf(" %8.1f/%-8.1f", pct(m.ms, 50) * 1e3, pct(m.ms, 90) * 1e3);
    std::printf("  (%s)\n", r.graph_note.c_str());
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << "  {\"model\": \"" << r.model << "\", \"method\": \"" << r.method << "\", \"graphs\": \""
        << json_escape(r.graph_note) << "\"";
      for (const Mode& m : r.modes) {
        f << ", \"" << m.name << "\": {\"p50_ms\": " << pct(m.ms, 50) << ", \"p90_ms\": " << pct(m.ms, 90) << "}";
      }
      f << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    f << "]\n";
  }
  return 0;
}
