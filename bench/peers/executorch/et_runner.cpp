// et_runner: ExecuTorch's own runtime (v1.2.0, CUDA backend) driven the way aoti_cuda is benchmarked, so the two can
// be put side by side. A peer only: it links ExecuTorch (built by build.sh), never the SDK.
//
//   et_runner fixtures [--runs N] [--loads N] [--json OUT] DIR...
//       every program of DIR/<name>/manifest.json (or DIR itself when it holds manifest.json): load (file -> every method ready; first load and median of the
//       others), first call, p50/p99 of a synchronized call with host inputs/outputs and, where ExecuTorch can take
//       them, device-resident ones; GPU memory and host RSS after load; agreement of the first call's outputs with
//       the recorded ones (atol/rtol of the manifest). The fields are those of aoti_cuda_bench's JSON.
//   et_runner run MODEL_DIR [--method M]
//       one process, one call: CUDA context, load (timed: file -> M ready), run M on the recorded inputs, check,
//       print. The device script times the whole process (cold start) the same way it times `aoti_cuda run`.
//
// One program per process: the backend writes each method's library to /tmp/<method>_so_blob<pid>.so and the
// AOTInductor libraries cannot be unloaded, so a second program with a method of the same name in the same process
// gets the first program's library back from dlopen (seen: "number of user input 2 and output 1 generated from AOT
// Inductor does not match ET runner's 2"). device_run.py starts one et_runner per program; for the same reason the
// in-process reloads of `fixtures` (loads 2..N) find the library already resident.
//   et_runner generate llm.pte --data aoti_cuda_blob.ptd [--prompt-lens 128,512] [--new-tokens 256] [--reps 5]
//                      [--expect-tokens ids] [--weight-sharing] [--cuda-graph METHODS] [--json OUT]
//       the protocol of examples/generate: load, time to first token (median of --reps after a first call),
//       --new-tokens greedy decode steps, each step's token fed back; prints "@@JSON {"peer": "executorch", ...}"
//       with generate's keys. --weight-sharing and --cuda-graph (ExecuTorch >= 1.3 only) set the backend options
//       weight_sharing_across_methods (one copy of each weight and buffer by FQN: prefill and decode then share the
//       KV cache) and enable_cuda_graph_for_method before the load.
//
// What ExecuTorch 1.2's runtime can and cannot do here (measured as it is, not worked around):
// - Method inputs that the program memory-plans are copied with memcpy on the host (Method::set_input), so a device
//   pointer cannot be passed for them; device I/O is measured only for methods whose inputs are not planned.
// - Outputs are copied to host memory after every call unless the backend option
//   skip_copy_output_to_cpu_for_method names the method; "device I/O" turns that option on.
// - Each method's delegate holds private copies of its buffers (the KV cache of the LLM): decode does not see what
//   prefill wrote (weight_sharing_across_methods arrived in v1.3). Timing is unaffected (same work), tokens after
//   the first are not those of a shared cache, and the report says so.
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include <cuda_runtime_api.h>
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "et_support.hpp"

namespace {

using namespace etpeer;

// ---- tensors of the fixture manifests -------------------------------------------------------------------------

struct DType {
  const char* name;
  ScalarType type;
  size_t size;
};
constexpr DType kDTypes[] = {{"float32", ScalarType::Float, 4}, {"bfloat16", ScalarType::BFloat16, 2},
                             {"float16", ScalarType::Half, 2},  {"int64", ScalarType::Long, 8},
                             {"int32", ScalarType::Int, 4},     {"uint8", ScalarType::Byte, 1},
                             {"bool", ScalarType::Bool, 1}};
const DType& dtype_named(const std::string& name) {
  for (const DType& d : kDTypes) {
    if (name == d.name) return d;
  }
  throw Failure("manifest dtype '" + name + "' is not one this runner reads");
}
const DType& dtype_of(ScalarType t) {
  for (const DType& d : kDTypes) {
    if (t == d.type) return d;
  }
  throw Failure("output scalar type " + std::to_string(static_cast<int>(t)) + " is not one this runner reads");
}

// One recorded tensor: its bytes and shape, owned here; `ptr` views them for ExecuTorch.
struct HostTensor {
  std::vector<unsigned char> bytes;
  std::vector<executorch::aten::SizesType> shape;
  const DType* dtype = nullptr;
  TensorPtr ptr;
};

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Failure("cannot open " + path);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

HostTensor load_tensor(const std::string& dir, const json& spec) {
  HostTensor t;
  t.dtype = &dtype_named(spec.at("dtype").get<std::string>());
  size_t n = 1;
  for (int64_t d : spec.at("shape")) {
    t.shape.push_back(static_cast<executorch::aten::SizesType>(d));
    n *= static_cast<size_t>(d);
  }
  const std::string path = dir + "/" + spec.at("file").get<std::string>();
  t.bytes = read_file(path);
  if (t.bytes.size() != n * t.dtype->size) {
    throw Failure(path + ": " + std::to_string(t.bytes.size()) + " bytes, the manifest's shape and dtype need " +
                  std::to_string(n * t.dtype->size));
  }
  t.ptr = executorch::extension::from_blob(t.bytes.data(), t.shape, t.dtype->type);
  return t;
}

double element(const void* data, ScalarType type, size_t i) {
  switch (type) {
    case ScalarType::Float: return static_cast<const float*>(data)[i];
    case ScalarType::Long: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ScalarType::Int: return static_cast<const int32_t*>(data)[i];
    case ScalarType::Byte: return static_cast<const uint8_t*>(data)[i];
    case ScalarType::Bool: return static_cast<const uint8_t*>(data)[i] != 0;
    case ScalarType::BFloat16: {
      const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(data)[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case ScalarType::Half: {
      const uint16_t h = static_cast<const uint16_t*>(data)[i];
      const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
      const double s = (h & 0x8000) ? -1.0 : 1.0;
      if (e == 0) return s * std::ldexp(m, -24);
      if (e == 31) return m ? NAN : s * INFINITY;
      return s * std::ldexp(1024 + m, e - 25);
    }
    default: throw Failure("unsupported scalar type in comparison");
  }
}

// Compares an output (host memory) with a recorded tensor: |got - want| <= atol + rtol * |want|.
struct Agreement {
  bool ok = true;
  double max_abs_err = 0;
  std::string message;
};
Agreement compare(const executorch::aten::Tensor& got, const HostTensor& want, double atol, double rtol) {
  Agreement a;
  if (got.scalar_type() != want.dtype->type) {
    return {false, INFINITY, std::string("dtype differs from the manifest's ") + want.dtype->name};
  }
  if (static_cast<size_t>(got.numel()) * want.dtype->size != want.bytes.size()) {
    return {false, INFINITY, "element count " + std::to_string(got.numel()) + " differs from the recorded tensor's"};
  }
  size_t bad = 0;
  for (size_t i = 0; i < static_cast<size_t>(got.numel()); ++i) {
    const double g = element(got.const_data_ptr(), got.scalar_type(), i);
    const double w = element(want.bytes.data(), want.dtype->type, i);
    const double err = std::fabs(g - w);
    if (!(err <= atol + rtol * std::fabs(w))) ++bad;  // NaN counts as a mismatch
    if (!(err <= a.max_abs_err)) a.max_abs_err = std::isnan(err) ? INFINITY : std::max(a.max_abs_err, err);
  }
  a.ok = bad == 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu of %zu elements outside atol %g + rtol %g; max abs err %.3g", bad,
                static_cast<size_t>(got.numel()), atol, rtol, a.max_abs_err);
  a.message = buf;
  return a;
}

// ---- the fixtures ---------------------------------------------------------------------------------------------

struct Program {
  std::string name, dir, pte;
  std::vector<std::string> data;
  json manifest;
};

Program read_program(const std::string& dir) {
  Program p;
  p.dir = dir;
  p.name = dir.substr(dir.find_last_of('/') + 1);
  std::ifstream f(dir + "/manifest.json");
  if (!f) throw Failure(dir + "/manifest.json: cannot open");
  p.manifest = json::parse(f);
  p.pte = dir + "/" + p.manifest.at("pte").get<std::string>();
  for (const json& d : p.manifest.value("data_files", json::array())) p.data.push_back(dir + "/" + d.get<std::string>());
  return p;
}

// file -> every method of the program ready (ExecuTorch's Module loads lazily: load() then each load_method()).
std::unique_ptr<Module> load_module(const Program& p, const std::vector<std::string>& methods) {
  auto m = std::make_unique<Module>(p.pte, p.data, Module::LoadMode::File);
  check_et(m->load(), "load " + p.pte);
  for (const std::string& method : methods) check_et(m->load_method(method), "load_method " + method);
  return m;
}

std::vector<std::string> manifest_methods(const Program& p) {
  std::vector<std::string> out;
  for (auto it = p.manifest.at("methods").begin(); it != p.manifest.at("methods").end(); ++it) out.push_back(it.key());
  return out;
}

// The backend option that leaves a method's outputs in device memory (empty: every method copies to the host).
void skip_copy_for(const std::string& method) {
  executorch::runtime::BackendOptions<1> opts;
  check_et(opts.set_option("skip_copy_output_to_cpu_for_method", method.c_str()), "BackendOptions");
  check_et(executorch::runtime::set_option("CudaBackend", opts.view()), "set_option(CudaBackend)");
}

struct MethodRun {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> expected;
  std::vector<std::pair<double, double>> tolerances;
  std::vector<EValue> host_args;
};

MethodRun prepare(const Program& p, const std::string& method) {
  MethodRun r;
  const json& spec = p.manifest.at("methods").at(method);
  for (const json& in : spec.at("inputs")) r.inputs.push_back(load_tensor(p.dir, in));
  for (const json& out : spec.at("outputs")) {
    r.expected.push_back(load_tensor(p.dir, out));
    r.tolerances.emplace_back(out.value("atol", 1e-3), out.value("rtol", 1e-3));
  }
  for (HostTensor& t : r.inputs) r.host_args.emplace_back(*t.ptr);
  return r;
}

// Runs one call and checks its outputs (host memory) against the recorded ones.
json call_and_check(Module& m, const std::string& method, MethodRun& r, bool* all_ok) {
  std::vector<EValue> outs = take(m.execute(method, r.host_args), "execute " + method);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  json doc = json::array();
  if (outs.size() != r.expected.size()) {
    *all_ok = false;
    doc.push_back({{"match", false}, {"message", std::to_string(outs.size()) + " outputs, manifest records " +
                                                      std::to_string(r.expected.size())}});
    return doc;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].isTensor()) throw Failure(method + " output " + std::to_string(i) + " is not a tensor");
    const Agreement a = compare(outs[i].toTensor(), r.expected[i], r.tolerances[i].first, r.tolerances[i].second);
    *all_ok = *all_ok && a.ok;
    doc.push_back({{"match", a.ok}, {"max_abs_err", a.max_abs_err}, {"message", a.message}});
  }
  return doc;
}

struct Row {
  std::string model, error;
  double load_cold = 0, load_median = 0, first = 0, host_p50 = 0, host_p99 = 0, dev_p50 = 0, dev_p99 = 0;
  double dev_mib = 0, rss_mib = 0;
  bool device_io = true, agree = true;
  json checks = json::object(), device_io_notes = json::array();
};

std::vector<double> timed(int warmup, int runs, const std::function<void()>& call) {
  for (int k = 0; k < warmup; ++k) call();
  std::vector<double> lat;
  for (int k = 0; k < runs; ++k) {
    const auto t0 = Clock::now();
    call();
    lat.push_back(ms_since(t0));
  }
  return lat;
}

Row measure_fixture(const std::string& dir, int runs, int loads) {
  Row row;
  row.model = dir.substr(dir.find_last_of('/') + 1);
  try {
    const Program p = read_program(dir);
    const std::vector<std::string> methods = manifest_methods(p);
    std::vector<double> wall;
    for (int k = 0; k < loads; ++k) {  // each load builds and frees a whole Module, as aoti_cuda_bench's loads do
      const auto t0 = Clock::now();
      auto m = load_module(p, methods);
      wall.push_back(ms_since(t0));
    }
    row.load_cold = wall[0];
    row.load_median = percentile(std::vector<double>(wall.begin() + 1, wall.end()), 50);

    const double gpu0 = gpu_used_mib();
    const long rss0 = rss_kib();
    auto m = load_module(p, methods);
    row.dev_mib = gpu_used_mib() - gpu0;
    row.rss_mib = static_cast<double>(rss_kib() - rss0) / 1024.0;
    for (const std::string& method : methods) {
      MethodRun r = prepare(p, method);
      // First call on a fresh module: the recorded outputs are those of a first call (kv_cache keeps state).
      const auto t0 = Clock::now();
      row.checks[method] = call_and_check(*m, method, r, &row.agree);
      row.first += ms_since(t0);
      auto host_call = [&] {
        auto res = m->execute(method, r.host_args);
        check_et(res.error(), "execute " + method);
        check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      };
      const std::vector<double> host = timed(10, runs, host_call);
      row.host_p50 += percentile(host, 50);
      row.host_p99 += percentile(host, 99);

      // Device I/O: inputs already in device memory, outputs left there. Only where no input is memory-planned.
      const auto meta = take(m->method_meta(method), "method_meta " + method);
      bool planned = false;
      for (size_t i = 0; i < meta.num_inputs(); ++i) {
        auto info = meta.input_tensor_meta(i);
        if (info.ok() && info->is_memory_planned()) planned = true;
      }
      if (planned) {
        row.device_io = false;
        row.device_io_notes.push_back(method + ": inputs are memory-planned, ExecuTorch copies them with host memcpy");
        continue;
      }
      std::vector<void*> dev_ptrs;
      std::vector<TensorPtr> dev_tensors;
      std::vector<EValue> dev_args;
      for (HostTensor& t : r.inputs) {
        void* d = nullptr;
        check_cuda(cudaMalloc(&d, std::max<size_t>(t.bytes.size(), 1)), "cudaMalloc");
        check_cuda(cudaMemcpy(d, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        dev_ptrs.push_back(d);
        dev_tensors.push_back(executorch::extension::from_blob(d, t.shape, t.dtype->type));
        dev_args.emplace_back(*dev_tensors.back());
      }
      skip_copy_for(method);
      const std::vector<double> dev = timed(10, runs, [&] {
        auto res = m->execute(method, dev_args);
        check_et(res.error(), "execute " + method + " (device I/O)");
        check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      });
      skip_copy_for("");
      for (void* d : dev_ptrs) cudaFree(d);
      row.dev_p50 += percentile(dev, 50);
      row.dev_p99 += percentile(dev, 99);
    }
  } catch (const std::exception& e) {
    row.error = e.what();
    row.agree = false;
  }
  if (!row.device_io) row.dev_p50 = row.dev_p99 = -1;
  return row;
}

std::vector<std::string> model_dirs(const std::string& root) {
  std::vector<std::string> out;
  if (DIR* d = opendir(root.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      struct stat st {};
      if (name != "." && name != ".." && stat((root + "/" + name + "/manifest.json").c_str(), &st) == 0) {
        out.push_back(root + "/" + name);
      }
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}


int cmd_fixtures(int argc, char** argv) {
  int runs = 200, loads = 5;
  std::string json_path;
  std::vector<std::string> roots;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--runs" || a == "--loads") && i + 1 < argc) {
      if (!parse_count(argv[++i], 1, a == "--runs" ? &runs : &loads)) {
        std::fprintf(stderr, "et_runner: %s needs a whole number from 1 to 1000000, got '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "et_runner fixtures: unknown or incomplete option '%s'\n", a.c_str());
      return 2;
    } else {
      roots.push_back(a);
    }
  }
  if (roots.empty()) {
    std::fputs("usage: et_runner fixtures [--runs N] [--loads N] [--json OUT] FIXTURE_DIR...\n", stderr);
    return 2;
  }
  loads = std::max(2, loads);  // the median needs a load after the cold one
  std::vector<Row> rows;
  for (const std::string& root : roots) {
    struct stat st {};
    if (stat((root + "/manifest.json").c_str(), &st) == 0) {  // one program's folder
      rows.push_back(measure_fixture(root, runs, loads));
      continue;
    }
    for (const std::string& dir : model_dirs(root)) rows.push_back(measure_fixture(dir, runs, loads));
  }
  std::printf("%-12s %9s %9s %9s %9s %9s %9s %9s %8s %8s %s\n", "model", "load_cold", "load_med", "first", "host_p50",
              "host_p99", "dev_p50", "dev_p99", "dev_MiB", "rss_MiB", "agree");
  json doc = json::array();
  int failures = 0;
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("%-12s ERROR %s\n", r.model.c_str(), r.error.c_str());
      ++failures;
    } else {
      std::printf("%-12s %9.2f %9.2f %9.2f %9.4f %9.4f %9.4f %9.4f %8.1f %8.1f %s\n", r.model.c_str(), r.load_cold,
                  r.load_median, r.first, r.host_p50, r.host_p99, r.dev_p50, r.dev_p99, r.dev_mib, r.rss_mib,
                  r.agree ? "yes" : "NO");
      if (!r.agree) ++failures;
    }
    doc.push_back({{"model", r.model}, {"error", r.error.empty() ? "" : "failed"}, {"error_message", r.error},
                   {"load_cold_ms", r.load_cold}, {"load_median_ms", r.load_median}, {"first_call_ms", r.first},
                   {"host_io_p50_ms", r.host_p50}, {"host_io_p99_ms", r.host_p99},
                   {"device_io_p50_ms", r.device_io ? json(r.dev_p50) : json(nullptr)},
                   {"device_io_p99_ms", r.device_io ? json(r.dev_p99) : json(nullptr)},
                   {"device_io_notes", r.device_io_notes}, {"device_mib", r.dev_mib}, {"rss_mib", r.rss_mib},
                   {"agree", r.agree}, {"checks", r.checks}});
  }
  std::puts("(times in ms; load = ExecuTorch Module construction + load() + load_method() of every method, the first\n"
            " in this process and the median of the others; first = first execute(), outputs checked; host/dev =\n"
            " per-call latency with host or device I/O, each call followed by cudaDeviceSynchronize; methods summed;\n"
            " dev -1: a method's inputs are memory-planned, ExecuTorch copies them on the host)");
  if (!json_path.empty()) std::ofstream(json_path) << doc.dump(2) << "\n";
  return failures == 0 ? 0 : 4;
}

// One process, one call: the cold start the device script times from outside.
int cmd_run(int argc, char** argv) {
  std::string dir, method;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--method" && i + 1 < argc) method = argv[++i];
    else if (dir.empty() && a.rfind("--", 0) != 0) dir = a;
    else {
      std::fprintf(stderr, "et_runner run: unknown or incomplete option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fputs("usage: et_runner run MODEL_DIR [--method M]\n", stderr);
    return 2;
  }
  const Program p = read_program(dir);
  if (method.empty()) method = manifest_methods(p).front();
  // The CUDA context first, so that load_ms is the program's (file -> ready), as aoti_cuda reports its load
  // without "device init"; the cold start timed from outside includes both.
  auto t0 = Clock::now();
  check_cuda(cudaFree(nullptr), "CUDA context");
  const double cuda_init_ms = ms_since(t0);
  t0 = Clock::now();
  auto m = load_module(p, {method});
  const double load_ms = ms_since(t0);
  MethodRun r = prepare(p, method);
  bool ok = true;
  const json checks = call_and_check(*m, method, r, &ok);
  std::printf("@@JSON %s\n", json({{"peer", "executorch"}, {"model", p.name}, {"method", method}, {"cuda_init_ms", cuda_init_ms},
                                   {"load_ms", load_ms},
                                   {"agree", ok}, {"checks", checks}})
                                 .dump()
                                 .c_str());
  std::fflush(stdout);
  return ok ? 0 : 4;
}

constexpr int kCannotRunHere = 3;  // as the SDK's tools: no usable GPU

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "-h" || cmd == "--help" || cmd.empty()) {
    std::fputs("usage: et_runner fixtures|run|generate ... (see the comment at the top of et_runner.cpp)\n",
               cmd.empty() ? stderr : stdout);
    return cmd.empty() ? 2 : 0;
  }
  if (cmd != "fixtures" && cmd != "run" && cmd != "generate") {
    std::fprintf(stderr, "et_runner: unknown command '%s' (fixtures, run, generate)\n", cmd.c_str());
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("et_runner: no CUDA device; nothing to measure");
    return kCannotRunHere;
  }
  try {
    if (cmd == "fixtures") return cmd_fixtures(argc - 2, argv + 2);
    if (cmd == "run") return cmd_run(argc - 2, argv + 2);
    return cmd_generate(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_runner %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
