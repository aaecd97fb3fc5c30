// aoti_runner: the libtorch AOTInductor peer of the benchmarks (torch::inductor::AOTIModelPackageLoader).
//
// Built against the torch installation of the GPU machine (see CMakeLists.txt beside this file); it
// runs .pt2 packages made by torch._inductor.aoti_compile_and_package (bench/peers/llm_peers.py
// aoti-package, bench/peers/call_peers.py). Two modes; each prints one line "@@JSON {...}" (and
// writes it to --json FILE):
//
//   aoti_runner call PACKAGE.pt2 --input DTYPE:D0xD1x... [--input ...] [--runs N] [--warmup N]
//       load time (file -> ready), first call, p50/p90 of a synchronized call with device-resident
//       random inputs (outputs stay on the device).
//   aoti_runner llm PREFILL.pt2 DECODE.pt2 --vocab V --max-ctx L [--prompt-lens 128,512]
//       [--new-tokens 256] [--reps 5] [--share inactive|active] [--decode-graph 1]
//       load time of both packages, GPU memory, time to first token, greedy decode tokens/s. The
//       KV cache (and the weights) of DECODE are bound to PREFILL's tensors (the packages are two
//       separately compiled programs, each with its own constants), the same sharing aoti_cuda
//       does by default. --decode-graph 1: the decode step is captured once in a CUDA graph (its
//       run on a caller stream is capturable) and replayed, with the token and position in static
//       device tensors, as aoti_cuda does with LoadOptions::cuda_graph_methods; this isolates
//       what graph replay buys from the rest of the runtime.
//
// Timings: steady_clock around the call plus cudaDeviceSynchronize (what a caller waiting for a
// result sees).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

namespace {

using Clock = std::chrono::steady_clock;
using torch::inductor::AOTIModelPackageLoader;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5))];
}

void sync() {
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("cudaDeviceSynchronize failed");
}

double used_mib() {
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return static_cast<double>(total_b - free_b) / 1048576.0;
}

// A tiny JSON object writer: enough for flat numbers, strings and number arrays.
class Json {
 public:
  Json& num(const std::string& k, double v) { return raw(k, fmt(v)); }
  Json& str(const std::string& k, const std::string& v) { return raw(k, "\"" + v + "\""); }
  Json& arr(const std::string& k, const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt(v[i]);
    return raw(k, s + "]");
  }
  Json& raw(const std::string& k, const std::string& v) {
    body_ += (body_.empty() ? "" : ", ") + ("\"" + k + "\": ") + v;
    return *this;
  }
  std::string text() const { return "{" + body_ + "}"; }

 private:
  static std::string fmt(double v) {
    std::ostringstream o;
    o.precision(6);
    o << v;
    return o.str();
  }
  std::string body_;
};

void emit(const Json& j, const std::string& path) {
  std::printf("@@JSON %s\n", j.text().c_str());
  if (!path.empty()) std::ofstream(path) << j.text() << "\n";
}

torch::Dtype parse_dtype(const std::string& s) {
  static const std::unordered_map<std::string, torch::Dtype> m = {
      {"float32", torch::kFloat32}, {"bfloat16", torch::kBFloat16}, {"float16", torch::kFloat16},
      {"int64", torch::kInt64},     {"int32", torch::kInt32},       {"bool", torch::kBool},
      {"uint8", torch::kUInt8},     {"int8", torch::kInt8},         {"float64", torch::kFloat64}};
  auto it = m.find(s);
  if (it == m.end()) throw std::runtime_error("unknown dtype " + s);
  return it->second;
}

// "float32:8x64" -> a random CUDA tensor of that dtype and shape ("float32:" = 0-d).
torch::Tensor random_input(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw std::runtime_error("input spec needs DTYPE:SHAPE: " + spec);
  const torch::Dtype dt = parse_dtype(spec.substr(0, colon));
  std::vector<int64_t> shape;
  std::stringstream ss(spec.substr(colon + 1));
  for (std::string d; std::getline(ss, d, 'x');) {
    if (!d.empty()) shape.push_back(std::stoll(d));
  }
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  if (dt == torch::kBool) return torch::rand(shape, opts) > 0.5;
  if (torch::isIntegralType(dt, false)) return torch::randint(0, 4, shape, opts.dtype(dt));  // valid indices
  return torch::randn(shape, opts).to(dt);
}

std::vector<int64_t> parse_ints(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string d; std::getline(ss, d, ',');) out.push_back(std::stoll(d));
  return out;
}

struct Args {
  std::vector<std::string> positional, inputs;
  std::unordered_map<std::string, std::string> opts;
  std::string get(const std::string& k, const std::string& d) const {
    auto it = opts.find(k);
    return it == opts.end() ? d : it->second;
  }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0) {
      if (i + 1 >= argc) throw std::runtime_error("missing value for " + s);
      if (s == "--input") a.inputs.push_back(argv[++i]);
      else a.opts[s.substr(2)] = argv[++i];
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

double cuda_init_ms() {
  auto t0 = Clock::now();
  torch::ones({1}, torch::TensorOptions().device(torch::kCUDA));
  sync();
  return ms_since(t0);
}

int run_call(const Args& a) {
  if (a.positional.size() != 1) throw std::runtime_error("call: PACKAGE.pt2 expected");
  const int runs = std::stoi(a.get("runs", "200")), warmup = std::stoi(a.get("warmup", "20"));
  Json j;
  j.str("peer", "libtorch_aoti").str("package", a.positional[0]).num("cuda_init_ms", cuda_init_ms());
  std::vector<torch::Tensor> inputs;
  for (const auto& s : a.inputs) inputs.push_back(random_input(s));
  sync();
  auto t0 = Clock::now();
  AOTIModelPackageLoader loader(a.positional[0], "model", false, 1, 0);
  sync();
  j.num("load_ms", ms_since(t0));
  t0 = Clock::now();
  loader.run(inputs);
  sync();
  j.num("first_call_ms", ms_since(t0));
  for (int k = 0; k < warmup; ++k) loader.run(inputs);
  sync();
  std::vector<double> lat;
  for (int k = 0; k < runs; ++k) {
    t0 = Clock::now();
    auto out = loader.run(inputs);
    sync();
    lat.push_back(ms_since(t0));
  }
  j.num("p50_ms", pct(lat, 50)).num("p90_ms", pct(lat, 90)).num("min_ms", pct(lat, 0)).num("runs", runs);
  emit(j, a.get("json", ""));
  return 0;
}

// Binds every constant of `dst` whose original FQN `src` also holds to src's tensor (user-managed:
// no copy). Tries the inactive buffer + swap + free first, which also frees dst's own copy; falls
// back to replacing the active buffer (dst's copy then stays allocated). Returns the path taken.
std::string share_constants(AOTIModelPackageLoader& src, AOTIModelPackageLoader& dst, bool via_inactive, size_t& bound) {
  const auto by_fqn = src.get_runner()->extract_constants_map(false);
  const auto names = dst.get_runner()->getConstantNamesToOriginalFQNs();
  std::unordered_map<std::string, at::Tensor> map;
  for (const auto& [name, fqn] : names) {
    auto it = by_fqn.find(fqn);
    if (it != by_fqn.end()) map.emplace(name, it->second);
  }
  bound = map.size();
  if (via_inactive) try {
    dst.get_runner()->update_constant_buffer(map, /*use_inactive=*/true, /*validate_full_updates=*/false,
                                             /*user_managed=*/true);
    dst.get_runner()->swap_constant_buffer();
    dst.get_runner()->free_inactive_constant_buffer();
    return "inactive+swap+free";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inactive-buffer binding failed (%s); binding the active buffer\n", e.what());
  }
  dst.get_runner()->update_constant_buffer(map, /*use_inactive=*/false, /*validate_full_updates=*/false,
                                           /*user_managed=*/true);
  return "active";
}

torch::Tensor prompt(int64_t len, int64_t vocab) {
  auto t = torch::empty({1, len}, torch::kInt64);
  auto* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < len; ++i) p[i] = (7919 * i + 13) % vocab;  // the benchmark's prompt formula
  return t.to(torch::kCUDA);
}

// The decode step captured once in a CUDA graph on a side stream. The graph reads the token and the
// position from two static device tensors and writes its outputs to tensors of the graph's memory
// pool, the same addresses at every replay.
struct DecodeGraph {
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  torch::Tensor token, pos;     // inputs: i64[1, 1], i64[1]
  std::vector<at::Tensor> out;  // outputs of the captured call: logits, next_token

  DecodeGraph(AOTIModelPackageLoader& decode, int64_t warm_pos) {
    const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(torch::kCUDA);
    token = torch::zeros({1, 1}, opts);
    pos = torch::full({1}, warm_pos, opts);
    sync();
    c10::cuda::CUDAStreamGuard guard(stream);
    for (int k = 0; k < 3; ++k) decode.run({token, pos}, stream.stream());  // warm on this stream first
    sync();
    // Relaxed: the container's bookkeeping queries its own events during run(), which the global
    // mode would refuse while this thread captures.
    graph.capture_begin({0, 0}, cudaStreamCaptureModeRelaxed);
    out = decode.run({token, pos}, stream.stream());
    graph.capture_end();
    sync();
  }
};

// One prompt: TTFT (first call and median of `reps`), then `n` greedy decode steps timed as a whole.
void run_prompt(AOTIModelPackageLoader& prefill, AOTIModelPackageLoader& decode, const torch::Tensor& positions,
                int64_t len, int64_t vocab, int n, int reps, Json& j, DecodeGraph* graph) {
  const std::string k = "p" + std::to_string(len) + "_";
  const torch::Tensor tokens = prompt(len, vocab);
  std::vector<double> ttft, queued;
  std::vector<at::Tensor> out;
  for (int r = 0; r < reps + 1; ++r) {
    sync();
    auto t0 = Clock::now();
    out = prefill.run({tokens});
    queued.push_back(ms_since(t0));  // host time until run() returned with the work queued
    sync();
    ttft.push_back(ms_since(t0));
  }
  j.num(k + "ttft_first_ms", ttft[0]);
  ttft.erase(ttft.begin());
  queued.erase(queued.begin());
  j.num(k + "ttft_ms", pct(ttft, 50));
  j.num(k + "prefill_queued_ms", pct(queued, 50));
  at::Tensor tok = out[1];
  std::vector<at::Tensor> generated{tok};
  if (graph != nullptr) {  // replay: static inputs updated on the graph's stream, outputs copied out
    c10::cuda::CUDAStreamGuard guard(graph->stream);
    torch::Tensor ids = torch::empty({n + 1}, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCUDA));
    ids.narrow(0, 0, 1).copy_(tok.view({1}));
    graph->token.copy_(tok);
    sync();
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      graph->pos.fill_(len + i);
      graph->graph.replay();
      graph->token.copy_(graph->out[1]);  // step i's output is step i + 1's input, on the device
      ids.narrow(0, i + 1, 1).copy_(graph->out[1].view({1}));
    }
    sync();
    const double ms = ms_since(t0);
    j.num(k + "decode_ms", ms).num(k + "decode_tok_s", n / (ms / 1000.0));
    const torch::Tensor host = ids.cpu();
    std::vector<double> first;
    for (int64_t i = 0; i < std::min<int64_t>(n + 1, 32); ++i) first.push_back(host[i].item<int64_t>());
    j.arr(k + "tokens", first);
    return;
  }
  // Each step's position as its own tensor, made before timing: a one-element slice of `positions`
  // is not 16-byte aligned, and the runner then copies it to an aligned tensor on every step
  // (warning "Input 1 was compiled as 16-bytes aligned ..."), which is not the runner's own cost.
  std::vector<at::Tensor> step_positions;
  for (int i = 0; i < n; ++i) step_positions.push_back(positions.narrow(0, len + i, 1).clone());
  sync();
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto o = decode.run({tok, step_positions[static_cast<size_t>(i)]});
    tok = o[1];
    generated.push_back(tok);
  }
  sync();
  const double ms = ms_since(t0);
  j.num(k + "decode_ms", ms).num(k + "decode_tok_s", n / (ms / 1000.0));
  std::vector<double> first;
  for (size_t i = 0; i < std::min<size_t>(generated.size(), 32); ++i) first.push_back(generated[i].item<int64_t>());
  j.arr(k + "tokens", first);
}

int run_llm(const Args& a) {
  if (a.positional.size() != 2) throw std::runtime_error("llm: PREFILL.pt2 DECODE.pt2 expected");
  const int64_t vocab = std::stoll(a.get("vocab", "32000")), max_ctx = std::stoll(a.get("max-ctx", "1024"));
  const int n = std::stoi(a.get("new-tokens", "256")), reps = std::stoi(a.get("reps", "5"));
  Json j;
  j.str("peer", "libtorch_aoti").num("cuda_init_ms", cuda_init_ms());
  const double mem0 = used_mib();
  auto t0 = Clock::now();
  AOTIModelPackageLoader prefill(a.positional[0], "model", false, 1, 0);
  AOTIModelPackageLoader decode(a.positional[1], "model", false, 1, 0);
  size_t bound = 0;
  const bool via_inactive = a.get("share", "inactive") == "inactive";
  j.str("share_path", share_constants(prefill, decode, via_inactive, bound)).num("shared_constants", static_cast<double>(bound));
  sync();
  j.num("load_ms", ms_since(t0)).num("gpu_mem_after_load_mib", used_mib() - mem0);
  const torch::Tensor positions = torch::arange(max_ctx, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCUDA));
  {  // warm-up: kernels loaded, allocator primed (not timed)
    auto o = prefill.run({prompt(16, vocab)});
    decode.run({o[1], positions.narrow(0, 16, 1).clone()});
    sync();
  }
  const std::string graph_flag = a.get("decode-graph", "0");
  if (graph_flag != "0" && graph_flag != "1") throw std::runtime_error("--decode-graph takes 0 or 1");
  std::unique_ptr<DecodeGraph> graph;
  if (graph_flag == "1") {
    auto t_cap = Clock::now();
    graph = std::make_unique<DecodeGraph>(decode, 17);  // the warm-up's next position: its cache rows are rewritten by each prompt's prefill
    j.num("graph_capture_ms", ms_since(t_cap));
  }
  j.num("graphs", graph ? 1 : 0);
  for (int64_t len : parse_ints(a.get("prompt-lens", "128,512"))) {
    if (len + n > max_ctx) throw std::runtime_error("prompt + new tokens exceed max-ctx");
    run_prompt(prefill, decode, positions, len, vocab, n, reps, j, graph.get());
  }
  j.num("gpu_mem_mib", used_mib() - mem0).num("new_tokens", n);
  emit(j, a.get("json", ""));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s call|llm ... (see the comment at the top of aoti_runner.cpp)\n", argv[0]);
    return 2;
  }
  try {
    torch::NoGradGuard no_grad;
    const std::string mode = argv[1];
    const Args a = parse(argc, argv);
    if (mode == "call") return run_call(a);
    if (mode == "llm") return run_llm(a);
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoti_runner error: %s\n", e.what());
    std::printf("@@JSON {\"peer\": \"libtorch_aoti\", \"error\": \"%s\"}\n", "see stderr");
    return 1;
  }
}
