// et_runner generate: ExecuTorch's runtime on the LLM, on the protocol of examples/generate (see et_runner.cpp's
// header for the command line and what ExecuTorch 1.2 can and cannot do).
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include <cstdint>
#include <cstring>
#include <sstream>

#include "et_support.hpp"

namespace etpeer {
namespace {

// ---- the LLM: prefill + decode, on examples/generate's protocol -------------------------------------------------

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) {
    size_t used = 0;
    out.push_back(std::stoll(x, &used));
    if (used != x.size()) throw Failure("not a whole number: '" + x + "'");
  }
  return out;
}

int64_t scalar_id(const EValue& v, const char* what) {
  if (!v.isTensor() || v.toTensor().scalar_type() != ScalarType::Long || v.toTensor().numel() != 1) {
    throw Failure(std::string(what) + ": next_token is not one int64");
  }
  return v.toTensor().const_data_ptr<int64_t>()[0];
}

double steady_median(const std::vector<double>& s) {
  if (s.size() < 2) return s.at(0);
  return percentile(std::vector<double>(s.begin() + 1, s.end()), 50);
}

struct GenerateOptions {
  std::string program, data, json_out;
  std::vector<int64_t> lens{128, 512}, expect;
  int new_tokens = 256, reps = 5;
  bool weight_sharing = false;
  std::string graph_methods;
};

// The command line; false (after a message) when it is wrong.
bool parse_options(int argc, char** argv, GenerateOptions& o) {
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--data" && v) o.data = argv[++i];
    else if (a == "--prompt-lens" && v) o.lens = parse_ids(argv[++i]);
    else if (a == "--expect-tokens" && v) o.expect = parse_ids(argv[++i]);
    else if (a == "--new-tokens" && v && parse_count(argv[i + 1], 1, &o.new_tokens)) ++i;
    else if (a == "--reps" && v && parse_count(argv[i + 1], 0, &o.reps)) ++i;
    else if (a == "--json" && v) o.json_out = argv[++i];
    else if (a == "--weight-sharing") o.weight_sharing = true;
    else if (a == "--cuda-graph" && v) o.graph_methods = argv[++i];
    else if (o.program.empty() && a.rfind("--", 0) != 0) o.program = a;
    else {
      std::fprintf(stderr, "et_runner generate: unknown, incomplete or out-of-range option '%s'\n", a.c_str());
      return false;
    }
  }
  if (o.program.empty()) {
    std::fputs("usage: et_runner generate llm.pte [--data blob.ptd] [--prompt-lens 128,512] [--new-tokens N]\n"
               "                          [--reps N] [--expect-tokens ids] [--json OUT]\n", stderr);
    return false;
  }
  for (int64_t l : o.lens) {
    if (l < 2) throw Failure("prompt lengths must be at least 2");
  }
  return true;
}

// The backend options of ExecuTorch >= 1.3, set before the load when asked for.
void set_backend_options(const GenerateOptions& o) {
  if (!o.weight_sharing && o.graph_methods.empty()) return;
  const bool has_13_options = std::strcmp(ET_PEER_TAG, "v1.2.0") != 0;  // both options arrived in v1.3.0
  if (!has_13_options) {
    throw Failure(std::string("--weight-sharing and --cuda-graph need ExecuTorch >= 1.3; this build is ") + ET_PEER_TAG);
  }
  executorch::runtime::BackendOptions<2> opts;
  if (o.weight_sharing) check_et(opts.set_option("weight_sharing_across_methods", true), "BackendOptions");
  if (!o.graph_methods.empty()) {
    check_et(opts.set_option("enable_cuda_graph_for_method", o.graph_methods.c_str()), "BackendOptions");
  }
  check_et(executorch::runtime::set_option("CudaBackend", opts.view()), "set_option(CudaBackend)");
}

// Prefill and decode calls of a loaded program, each returning the next token. The inputs are host tensors:
// ExecuTorch copies planned inputs from them on every call.
class Llm {
 public:
  explicit Llm(Module& m) : m_(m) {
    const auto dmeta = take(m.method_meta("decode"), "method_meta decode");
    const auto logits_info = take(dmeta.output_tensor_meta(0), "decode output 0");
    vocab_ = logits_info.sizes()[logits_info.sizes().size() - 1];
    token_t_ = executorch::extension::from_blob(&token_, {1, 1}, ScalarType::Long);
    pos_t_ = executorch::extension::from_blob(&pos_, {1}, ScalarType::Long);
  }
  int64_t prefill(std::vector<int64_t>& ids) {
    TensorPtr t = executorch::extension::from_blob(ids.data(), {1, static_cast<int>(ids.size())}, ScalarType::Long);
    std::vector<EValue> outs = take(m_.execute("prefill", {EValue(*t)}), "execute prefill");
    // The backend queues the output copy to the host on its own stream (cuda_backend.cpp, utils.h fast path);
    // wait for it before reading the token.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return scalar_id(outs.at(1), "prefill");
  }
  int64_t decode(int64_t tok, int64_t p) {
    token_ = tok;
    pos_ = p;
    std::vector<EValue> outs = take(m_.execute("decode", {EValue(*token_t_), EValue(*pos_t_)}), "execute decode");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // as in prefill
    return scalar_id(outs.at(1), "decode");
  }
  std::vector<int64_t> prompt(int64_t len) const {
    std::vector<int64_t> ids(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) ids[static_cast<size_t>(i)] = (7919 * i + 13) % vocab_;
    return ids;
  }

 private:
  Module& m_;
  int64_t vocab_ = 0;
  int64_t token_ = 0, pos_ = 0;
  TensorPtr token_t_, pos_t_;
};

// One prompt length: time to first token (median of --reps after a first call), then --new-tokens greedy decode
// steps with each token fed back; results under "p<len>_" keys of `r`.
void measure_prompt(Llm& llm, const GenerateOptions& o, int64_t len, bool check_expected, json& r) {
  const std::string key = "p" + std::to_string(len) + "_";
  std::vector<int64_t> ids = llm.prompt(len);
  std::vector<double> ttft;
  int64_t first = 0;
  for (int k = 0; k <= o.reps; ++k) {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const auto s = Clock::now();
    first = llm.prefill(ids);
    ttft.push_back(ms_since(s));
  }
  std::vector<int64_t> out{first};
  const auto s = Clock::now();
  for (int i = 0; i < o.new_tokens; ++i) out.push_back(llm.decode(out.back(), len + i));  // token fed back (host)
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double decode_ms = ms_since(s);
  std::printf("prompt %4lld tokens: time to first token %.2f ms (first call %.2f ms), decode %d tokens in %.1f ms = "
              "%.1f tokens/s\n",
              static_cast<long long>(len), steady_median(ttft), ttft[0], o.new_tokens, decode_ms,
              o.new_tokens / (decode_ms / 1000.0));
  r[key + "ttft_ms"] = steady_median(ttft);
  r[key + "ttft_first_ms"] = ttft[0];
  r[key + "decode_ms"] = decode_ms;
  r[key + "decode_tok_s"] = o.new_tokens / (decode_ms / 1000.0);
  r[key + "tokens"] = std::vector<int64_t>(out.begin(), out.begin() + std::min<size_t>(out.size(), 32));
  if (check_expected && !o.expect.empty()) {
    size_t same = 0;
    while (same < o.expect.size() && same < out.size() && out[same] == o.expect[same]) ++same;
    std::printf("first %zu of %zu generated ids match the expected ones\n", same, o.expect.size());
    r["expect_match"] = same;
    r["expect_count"] = o.expect.size();
  }
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  GenerateOptions o;
  if (!parse_options(argc, argv, o)) return 2;
  set_backend_options(o);
  json r;
  r["peer"] = "executorch";
  r["executorch_version"] = ET_PEER_TAG;
  r["weight_sharing"] = o.weight_sharing;
  r["cuda_graph_methods"] = o.graph_methods;
  auto t0 = Clock::now();
  check_cuda(cudaFree(nullptr), "CUDA context");  // the context first: load time is the program's, as in generate
  r["cuda_init_ms"] = ms_since(t0);
  const double mem0 = gpu_used_mib();
  const long rss0 = rss_kib();
  t0 = Clock::now();
  Module m(o.program, o.data.empty() ? std::vector<std::string>{} : std::vector<std::string>{o.data},
           Module::LoadMode::File);
  check_et(m.load(), "load " + o.program);
  check_et(m.load_method("prefill"), "load_method prefill");
  check_et(m.load_method("decode"), "load_method decode");
  r["load_ms"] = ms_since(t0);
  r["gpu_mem_after_load_mib"] = gpu_used_mib() - mem0;
  r["rss_after_load_mib"] = static_cast<double>(rss_kib() - rss0) / 1024.0;
  r["graphs"] = o.graph_methods.empty() ? 0 : 1;
  // Without weight sharing each method's delegate holds its own buffers (the header says why that matters).
  r["kv_cache_shared"] = o.weight_sharing;
  std::printf("load %.1f ms; GPU memory after load %.0f MiB; host RSS +%.0f MiB\n", r["load_ms"].get<double>(),
              r["gpu_mem_after_load_mib"].get<double>(), r["rss_after_load_mib"].get<double>());

  Llm llm(m);
  {  // warm-up, untimed, as generate's
    std::vector<int64_t> w = llm.prompt(16);
    int64_t t = llm.prefill(w);
    for (int i = 0; i < 3; ++i) t = llm.decode(t, 16 + i);
  }
  for (size_t pi = 0; pi < o.lens.size(); ++pi) measure_prompt(llm, o, o.lens[pi], pi == 0, r);
  r["gpu_mem_mib"] = gpu_used_mib() - mem0;
  r["rss_mib"] = static_cast<double>(rss_kib() - rss0) / 1024.0;
  r["new_tokens"] = o.new_tokens;
  std::printf("@@JSON %s\n", r.dump().c_str());
  if (!o.json_out.empty()) std::ofstream(o.json_out) << r.dump(2) << "\n";
  return 0;
}

}  // namespace etpeer
