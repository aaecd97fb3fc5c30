// generate: greedy decoding with an LLM program (prefill + decode methods), everything on the GPU.
//
//   generate llm.pte [--prompt-ids 1,2,3 | --prompt-lens 128,512] [--new-tokens 256] [--reps 5]
//                    [--expect-tokens 5,9,... [--expect-top 5:12.5,9:12.4;...]] [--no-graphs] [--profile-kernels]
//                    [--json OUT]
//                    [--decode-at 128,1024,4000 [--decode-window 64] [--max-ctx 4096]]
//
// The program is what tools/export/llm/export_llm.py writes (ExecuTorch 1.2 CUDA backend):
//   prefill(tokens i64[1,T])         -> (logits bf16[1,V], next_token i64[1,1])
//   decode(token i64[1,1], pos i64[1]) -> (logits bf16[1,V], next_token i64[1,1])
// The argmax is inside the program, so each decode step takes the previous step's next_token
// output as its input without a copy to the host; the positions are slices of one device array.
// Steps are queued on our own CUDA stream without waiting, and we synchronize once at the end.
//
// The KV cache is a buffer both methods hold under the same name; LoadOptions::share_state binds
// it to one copy, so decode reads what prefill wrote. Decode runs as a CUDA graph (--no-graphs:
// plain calls), and every step writes into memory allocated once (Module::execute_into): the
// generated ids go straight into one device array, step i reading element i and writing i + 1.
//
// Without --prompt-ids, each length in --prompt-lens makes the benchmark's prompt,
// id_i = (7919 * i + 13) mod V. Printed: load time by phase, GPU memory, time to first token
// (prefill -> next token ready; first call and median of --reps) and decode tokens/s.
// --profile-kernels: afterwards, one more prefill and decode step with RunOptions::profile_kernels,
// printing where each spends its GPU time (the kernels, largest first, and by kind).
// --decode-at P1,P2,...: afterwards, decode tokens/s at those cache positions (decode_plan.hpp): the first prompt
// again, untimed steps up to each P (the model's own continuation fills the cache), then --decode-window timed
// steps at P..P+window-1 (JSON keys at<P>_decode_tok_s ...); with --profile-kernels also one profiled step at each
// P (at<P>_decode_kernel_kinds, and every kernel by name in at<P>_decode_kernels). --max-ctx: the program's cache
// length, checked before any step runs (a position past the cache would index outside it on the GPU).
// --expect-tokens: the first prompt's generated ids are compared with these (how many lead the same), and then
// each decode step is fed the expected previous id (teacher forcing): how many steps give the expected next one.
// --expect-top: eager's highest logits at each of those steps ("id:logit" by ',', steps by ';'; the exporter's
// manifest has them): each teacher-forced miss is then told apart into a near tie or a clear miss
// (reference_check.hpp).
#include <aoti_cuda/aoti_cuda.hpp>
#include <cuda_runtime_api.h>

#include "decode_plan.hpp"
#include "reference_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using aoti_cuda::DType;
using aoti_cuda::Tensor;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

double used_mib() {
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return static_cast<double>(total_b - free_b) / 1048576.0;
}

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoll(x));
  return out;
}

struct Options {
  std::string program, json;
  std::vector<int64_t> prompt_ids, prompt_lens{128, 512}, expect, decode_at;
  std::vector<std::vector<reference_check::Candidate>> expect_top;  // eager's highest logits per expected id
  int new_tokens = 256, reps = 5;
  int64_t decode_window = 64, max_ctx = 0;
  bool graphs = true;
  bool profile_kernels = false;
};

// Results as "key": value pairs, printed as one JSON object at the end.
struct Report {
  std::string body;
  void num(const std::string& k, double v) { add(k, std::to_string(v)); }
  void ids(const std::string& k, const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    add(k, s + "]");
  }
  void add(const std::string& k, const std::string& v) { body += (body.empty() ? "" : ", ") + ("\"" + k + "\": ") + v; }
};

// The generation state: the loaded program, our stream, and device memory allocated once:
// positions 0..n-1, the generated ids, and one logits buffer every call overwrites.
struct Generator {
  aoti_cuda::Module& module;
  cudaStream_t stream;
  Tensor positions;  // i64[n]
  Tensor ids;        // i64[n]: ids[0] from prefill, ids[i + 1] from decode step i
  Tensor logits;     // the methods' first output, unused here
  aoti_cuda::RunOptions run;

  Generator(aoti_cuda::Module& m, cudaStream_t s, int64_t n, int64_t vocab, DType logits_dtype)
      : module(m), stream(s) {
    Tensor host = Tensor::empty({n}, DType::kInt64);
    for (int64_t i = 0; i < n; ++i) host.data_ptr<int64_t>()[i] = i;
    positions = host.to_device(0);
    ids = host.to_device(0);
    logits = Tensor::empty({1, vocab}, logits_dtype, aoti_cuda::Device::cuda(0));
    run.stream = stream;  // queue without waiting
  }
  // Borrowed views of one element: no copy, no allocation.
  Tensor at(const Tensor& array, int64_t i, std::vector<int64_t> shape) const {
    return Tensor::from_blob(array.data_ptr<int64_t>() + i, std::move(shape), DType::kInt64, aoti_cuda::Device::cuda(0));
  }
  void prefill(const Tensor& tokens_on_device) {
    module.execute_into("prefill", {tokens_on_device}, {logits, at(ids, 0, {1, 1})}, run);
  }
  // Decode step `i` at position `p`: reads ids[i], writes ids[i + 1].
  void decode(int64_t i, int64_t p, aoti_cuda::RunProfile* profile = nullptr) {
    aoti_cuda::RunOptions ro = run;
    ro.profile = profile;
    ro.profile_kernels = profile != nullptr;
    module.execute_into("decode", {at(ids, i, {1, 1}), at(positions, p, {1})}, {logits, at(ids, i + 1, {1, 1})}, ro);
  }
  // Teacher forcing: decode step `i` at position `p` reads forced[i] (not its own previous output), writes ids[i + 1].
  void decode_forced(const Tensor& forced, int64_t i, int64_t p) {
    module.execute_into("decode", {at(forced, i, {1, 1}), at(positions, p, {1})}, {logits, at(ids, i + 1, {1, 1})}, run);
  }
  void prefill_profiled(const Tensor& tokens_on_device, aoti_cuda::RunProfile* profile) {
    aoti_cuda::RunOptions ro = run;
    ro.profile = profile;
    ro.profile_kernels = true;
    module.execute_into("prefill", {tokens_on_device}, {logits, at(ids, 0, {1, 1})}, ro);
  }
  std::vector<int64_t> generated(int64_t n) const {
    std::vector<int64_t> out(static_cast<size_t>(n));
    check(cudaMemcpyAsync(out.data(), ids.data(), out.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return out;
  }
  void wait() { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
};

Tensor device_prompt(const std::vector<int64_t>& ids) {
  Tensor host = Tensor::empty({1, static_cast<int64_t>(ids.size())}, DType::kInt64);
  std::copy(ids.begin(), ids.end(), host.data_ptr<int64_t>());
  return host.to_device(0);
}

std::vector<int64_t> benchmark_prompt(int64_t len, int64_t vocab) {
  std::vector<int64_t> ids(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) ids[static_cast<size_t>(i)] = (7919 * i + 13) % vocab;
  return ids;
}

// The median of all but the first (untimed warm-up) sample; the first when there is no other.
double steady_median(const std::vector<double>& samples) {
  std::vector<double> steady(samples.begin() + 1, samples.end());
  if (steady.empty()) return samples.at(0);
  std::sort(steady.begin(), steady.end());
  return steady[steady.size() / 2];
}

// One prompt: time to first token (first call, then the median of `reps`) and the host time of queuing
// the prefill (close to the TTFT: the host, not the GPU, sets the pace), then `n` decode steps.
std::vector<int64_t> run_prompt(Generator& g, const std::vector<int64_t>& ids, const Options& o, Report& r) {
  const int64_t len = static_cast<int64_t>(ids.size());
  const std::string key = "p" + std::to_string(len) + "_";
  const Tensor tokens = device_prompt(ids);
  std::vector<double> ttft, queued;
  for (int k = 0; k <= o.reps; ++k) {
    g.wait();
    const auto t0 = Clock::now();
    g.prefill(tokens);
    queued.push_back(ms_since(t0));  // the host's share: the call returns once its work is queued
    g.wait();
    ttft.push_back(ms_since(t0));
  }
  const double ttft_ms = steady_median(ttft);
  const double queued_ms = steady_median(queued);

  const auto t0 = Clock::now();
  for (int i = 0; i < o.new_tokens; ++i) g.decode(i, len + i);  // step i's output is step i + 1's input
  g.wait();
  const double decode_ms = ms_since(t0);
  const std::vector<int64_t> out = g.generated(o.new_tokens + 1);
  std::printf("prompt %4lld tokens: time to first token %.2f ms (first call %.2f ms; queuing the call took %.2f ms), "
              "decode %d tokens in %.1f ms = %.1f tokens/s\n",
              static_cast<long long>(len), ttft_ms, ttft[0], queued_ms, o.new_tokens, decode_ms,
              o.new_tokens / (decode_ms / 1000.0));
  r.num(key + "ttft_ms", ttft_ms);
  r.num(key + "prefill_queued_ms", queued_ms);
  r.num(key + "ttft_first_ms", ttft[0]);
  r.num(key + "decode_ms", decode_ms);
  r.num(key + "decode_tok_s", o.new_tokens / (decode_ms / 1000.0));
  r.ids(key + "tokens", std::vector<int64_t>(out.begin(), out.begin() + std::min<size_t>(out.size(), 32)));
  return out;
}

// How many of the expected ids come out when every decode step is fed the expected previous id (teacher
// forcing): the first from prefill, then step i from expect[i]. Free-running greedy generation parts from the
// expected ids for good at the first near tie (random weights make them common); this counts each step on its own,
// so a runtime or kernel error shows as many misses, a near tie as one.
void teacher_forced(Generator& g, const std::vector<int64_t>& prompt, std::vector<int64_t> expect,
                    const std::vector<std::vector<reference_check::Candidate>>& top, int64_t slots, Report& r) {
  if (static_cast<int64_t>(expect.size()) > slots - 1) expect.resize(static_cast<size_t>(slots - 1));
  const int64_t len = static_cast<int64_t>(prompt.size());
  Tensor host = Tensor::empty({static_cast<int64_t>(expect.size())}, DType::kInt64);
  std::copy(expect.begin(), expect.end(), host.data_ptr<int64_t>());
  const Tensor forced = host.to_device(0);
  g.prefill(device_prompt(prompt));
  for (size_t i = 0; i + 1 < expect.size(); ++i) g.decode_forced(forced, static_cast<int64_t>(i), len + static_cast<int64_t>(i));
  const std::vector<int64_t> out = g.generated(static_cast<int64_t>(expect.size()));
  size_t agree = 0;
  std::string missed;
  for (size_t i = 0; i < expect.size(); ++i) {
    if (out[i] == expect[i]) ++agree;
    else missed += (missed.empty() ? "" : ", ") + std::to_string(i);
  }
  std::printf("teacher-forced: %zu of %zu steps give the expected id%s%s\n", agree, expect.size(),
              missed.empty() ? "" : "; missed at steps ", missed.c_str());
  r.num("forced_match", static_cast<double>(agree));
  r.num("forced_count", static_cast<double>(expect.size()));
  if (top.empty()) return;
  // With eager's highest logits: each miss a near tie (eager's own margin within bf16's precision) or not.
  size_t ties = 0, clear = 0;
  for (size_t i = 0; i < expect.size(); ++i) {
    if (out[i] == expect[i]) continue;  // top has an entry per expected id (main checks it)
    const reference_check::Miss m = reference_check::classify(i, expect[i], out[i], top[i]);
    if (m.near_tie) ++ties;
    else ++clear;
    if (m.known) {
      std::printf("  step %zu: %lld instead of eager's %lld, eager's margin %.4f: %s\n", i, static_cast<long long>(m.got),
                  static_cast<long long>(m.expected), m.margin, m.near_tie ? "a near tie" : "a clear miss");
    } else {
      std::printf("  step %zu: %lld instead of eager's %lld, not among eager's %zu highest logits: a clear miss\n", i,
                  static_cast<long long>(m.got), static_cast<long long>(m.expected), top[i].size());
    }
  }
  std::printf("teacher-forced misses: %zu near ties, %zu clear\n", ties, clear);
  r.num("forced_near_ties", static_cast<double>(ties));
  r.num("forced_clear_misses", static_cast<double>(clear));
}

// The kind of a kernel, from its name: Triton kernels as Inductor names them
// (triton_tem = a matmul template, red/per = reductions, poi = pointwise), else the name.
std::string kernel_kind(const std::string& name) {
  if (name.rfind("triton_tem_", 0) == 0) return "triton matmul templates (triton_tem_*)";
  if (name.rfind("triton_red_", 0) == 0 || name.rfind("triton_per_", 0) == 0) return "triton reductions (triton_red/per_*)";
  if (name.rfind("triton_poi_", 0) == 0) return "triton pointwise (triton_poi_*)";
  if (name.rfind("triton_", 0) == 0) return "other triton kernels";
  return name;
}

// JSON string contents: kernel names are identifiers, but a quote or backslash must not break the line.
std::string json_escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

// Prints one profiled call: its kernels by kind, then the largest ones; adds the kinds to `r`.
// with_list: also every kernel by name ([name, launches, ms] under key + "kernels"), for the post-processing
// that sorts decode's kernels into attention and the rest by name (tools/contrib/gpu-machine/llm_job.py).
void report_kernels(const char* what, const aoti_cuda::RunProfile& p, const std::string& key, Report& r,
                    bool with_list = false) {
  double sum = 0;
  int launches = 0;
  std::vector<std::pair<std::string, std::pair<double, int>>> kinds;
  for (const aoti_cuda::KernelProfile& k : p.kernels) {
    sum += k.gpu_ms;
    launches += k.launches;
    const std::string kind = kernel_kind(k.name);
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {kind, {0.0, 0}});
    it->second.first += k.gpu_ms;
    it->second.second += k.launches;
  }
  std::sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("kernels of one %s call: %d launches, %.3f ms of kernel time (call: %.3f ms GPU, %.3f ms host)\n", what,
              launches, sum, p.gpu_ms, p.host_ms);
  std::string json = "{";
  for (const auto& [kind, v] : kinds) {
    std::printf("  %-45s %4d launches %8.3f ms %5.1f%%\n", kind.c_str(), v.second, v.first, sum > 0 ? 100 * v.first / sum : 0);
    json += (json.size() > 1 ? ", \"" : "\"") + kind + "\": [" + std::to_string(v.second) + ", " + std::to_string(v.first) + "]";
  }
  std::printf("  largest:\n");
  for (size_t i = 0; i < p.kernels.size() && i < 8; ++i) {
    const aoti_cuda::KernelProfile& k = p.kernels[i];
    std::printf("  %-60.60s %4d x %7.4f ms = %7.3f ms\n", k.name.c_str(), k.launches, k.gpu_ms / k.launches, k.gpu_ms);
  }
  r.add(key + "kernel_kinds", json + "}");
  r.num(key + "kernel_ms", sum);
  r.num(key + "kernel_launches", launches);
  if (with_list) {
    std::string list = "[";
    for (const aoti_cuda::KernelProfile& k : p.kernels) {
      list += (list.size() > 1 ? ", [\"" : "[\"") + json_escaped(k.name) + "\", " + std::to_string(k.launches) + ", " +
              std::to_string(k.gpu_ms) + "]";
    }
    r.add(key + "kernels", list + "]");
  }
}

// --decode-at: decode tokens/s at chosen cache positions, after the first prompt (see decode_plan.hpp).
void run_decode_at(Generator& g, const std::vector<int64_t>& prompt, const std::vector<decode_plan::DecodeWindow>& plan,
                   const Options& o, Report& r) {
  const int64_t len = static_cast<int64_t>(prompt.size());
  g.prefill(device_prompt(prompt));
  for (const decode_plan::DecodeWindow& w : plan) {
    for (int64_t p = w.fill_from; p < w.start; ++p) g.decode(p - len, p);  // untimed: fills the cache
    g.wait();
    const auto t0 = Clock::now();
    for (int64_t p = w.start; p < w.start + w.steps; ++p) g.decode(p - len, p);
    g.wait();
    const double ms = ms_since(t0);
    const std::string key = "at" + std::to_string(w.start) + "_";
    std::printf("decode at positions %lld..%lld: %lld steps in %.2f ms = %.1f tokens/s (%lld untimed steps before)\n",
                static_cast<long long>(w.start), static_cast<long long>(w.start + w.steps - 1),
                static_cast<long long>(w.steps), ms, w.steps / (ms / 1000.0),
                static_cast<long long>(w.start - w.fill_from));
    r.num(key + "decode_ms", ms);
    r.num(key + "decode_steps", static_cast<double>(w.steps));
    r.num(key + "decode_tok_s", w.steps / (ms / 1000.0));
  }
  if (o.profile_kernels) {  // one profiled step at each position (it rewrites that position's cache entry alike)
    for (const decode_plan::DecodeWindow& w : plan) {
      aoti_cuda::RunProfile profile;
      g.decode(w.start - len, w.start, &profile);
      report_kernels(("decode at position " + std::to_string(w.start)).c_str(), profile,
                     "at" + std::to_string(w.start) + "_decode_", r, true);
    }
  }
  r.ids("decode_at", o.decode_at);
  r.num("decode_window", static_cast<double>(o.decode_window));
}

void report_load(const aoti_cuda::Module& m, double wall_ms, double mem_mib, Report& r) {
  const aoti_cuda::LoadTimings t = m.load_timings();
  std::printf("load %.1f ms: parse %.1f, device init %.1f, libraries %.1f, containers %.1f, weights %.1f ms\n", wall_ms,
              t.parse_ms, t.device_init_ms, t.library_ms, t.container_ms, t.weights_ms);
  std::printf("GPU memory after load %.0f MiB;", mem_mib);
  r.num("load_ms", wall_ms);
  r.num("parse_ms", t.parse_ms);
  r.num("device_init_ms", t.device_init_ms);
  r.num("library_ms", t.library_ms);
  r.num("container_ms", t.container_ms);
  r.num("weights_ms", t.weights_ms);
  r.num("gpu_mem_after_load_mib", mem_mib);
  const aoti_cuda::LoadStats st = m.load_stats();
  std::printf(" weights uploaded %.1f MiB in %.1f ms (%.1f GB/s; %.0f MiB through pinned staging, %.0f MiB "
              "page-locked), %zu buffers shared, %zu read-only constants\n",
              st.weight_bytes / 1048576.0, st.upload_ms, st.upload_gb_per_s, st.staged_bytes / 1048576.0,
              st.page_locked_bytes / 1048576.0, st.shared_state_constants, st.read_only_constants);
  r.num("weights_uploaded_mib", st.weight_bytes / 1048576.0);
  r.num("weights_not_uploaded_mib", st.deduplicated_bytes / 1048576.0);
  r.num("shared_state_constants", static_cast<double>(st.shared_state_constants));
  r.num("read_only_constants", static_cast<double>(st.read_only_constants));
  r.num("upload_ms", st.upload_ms);
  r.num("upload_gb_per_s", st.upload_gb_per_s);
  r.num("page_locked_mib", st.page_locked_bytes / 1048576.0);
  r.num("staged_mib", st.staged_bytes / 1048576.0);
  r.num("state_mib", m.state_bytes() / 1048576.0);
  // The decode kernels' settings this load resolved (from LoadOptions::tuning or the AOTI_CUDA_* variables), so that
  // a run's figures say which form they measured.
  const aoti_cuda::TuningOptions tuning = m.tuning();
  const bool dependent = tuning.dependent_launch.value_or(true);
  const int cluster = tuning.attention_cluster.value_or(aoti_cuda::kAttentionClusterAuto);
  const std::string attention =
      cluster == aoti_cuda::kAttentionClusterAuto
          ? "by cache length (one kernel over clusters of 8 for caches of at most 512 positions, else two kernels)"
      : cluster > 0 ? "one kernel over clusters of " + std::to_string(cluster) + " blocks where the GPU has them"
                    : "two kernels";
  std::printf("decode kernels: dependent launch %s, attention %s\n", dependent ? "on" : "off", attention.c_str());
  r.num("dependent_launch", dependent ? 1 : 0);
  r.num("attention_cluster", cluster);
}

// Exit status 3: this machine cannot run the program (no usable GPU), as the other examples.
constexpr int kCannotRunHere = 3;

int generate(const Options& o) {
  Report r;
  // --decode-at: planned, and refused with the reason, before the GPU is touched.
  std::vector<decode_plan::DecodeWindow> plan;
  if (!o.decode_at.empty()) {
    const int64_t first_len = o.prompt_ids.empty() ? (o.prompt_lens.empty() ? 0 : o.prompt_lens.front())
                                                   : static_cast<int64_t>(o.prompt_ids.size());
    try {
      plan = decode_plan::plan_decode_windows(first_len, o.decode_at, o.decode_window, o.max_ctx);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "generate: %s\n", e.what());
      return 2;
    }
  }
  auto t0 = Clock::now();
  if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {  // the context first: load time is the program's
    std::fprintf(stderr, "generate: cannot run here: no usable CUDA device (%s)\n", cudaGetErrorString(e));
    return kCannotRunHere;
  }
  r.num("cuda_init_ms", ms_since(t0));
  const double mem0 = used_mib();

  aoti_cuda::LoadOptions load;
  load.share_state = aoti_cuda::StateSharing::all();  // one KV cache, read and written by both methods
  // Sessions (Module::create_session, RunOptions::session) would hold several conversations'
  // caches on one copy of the weights; this example runs one conversation.
  if (o.graphs) load.cuda_graph_methods = {"decode"};  // one shape set: token [1,1], position [1]
  std::printf("KV cache shared (share_state); decode graphs %s\n", o.graphs ? "on" : "off");
  t0 = Clock::now();
  aoti_cuda::Module module(o.program, load);
  report_load(module, ms_since(t0), used_mib() - mem0, r);
  r.num("graphs", o.graphs ? 1 : 0);

  const aoti_cuda::TensorSpec logits_spec = module.method_meta("decode").outputs.at(0);
  const int64_t vocab = logits_spec.sizes.back();
  std::vector<std::vector<int64_t>> prompts;
  if (!o.prompt_ids.empty()) prompts.push_back(o.prompt_ids);
  else for (int64_t len : o.prompt_lens) prompts.push_back(benchmark_prompt(len, vocab));
  size_t longest = 16;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  int64_t slots = static_cast<int64_t>(std::max<size_t>(longest, 19)) + o.new_tokens + 2;
  if (!plan.empty()) slots = std::max(slots, plan.back().start + plan.back().steps + 2);  // positions and ids index to there

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    Generator g(module, stream, slots, vocab, logits_spec.dtype);
    // Warm-up, untimed: the first calls load the kernels; with graphs, the second decode call
    // captures the graph and later ones replay it.
    g.prefill(device_prompt(benchmark_prompt(16, vocab)));
    for (int i = 0; i < 3; ++i) g.decode(i, 16 + i);
    g.wait();
    module.reset_state();  // the warm-up's cache entries are not part of any prompt
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int64_t> ids = run_prompt(g, prompts[i], o, r);
      if (i == 0 && !o.expect.empty()) {
        size_t same = 0;
        while (same < o.expect.size() && same < ids.size() && ids[same] == o.expect[same]) ++same;
        std::printf("first %zu of %zu generated ids match the expected ones\n", same, o.expect.size());
        r.num("expect_match", static_cast<double>(same));
        r.num("expect_count", static_cast<double>(o.expect.size()));
      }
    }
    if (!o.expect.empty()) teacher_forced(g, prompts.front(), o.expect, o.expect_top, slots, r);
    if (o.profile_kernels) {  // after the measurements: profiling slows the calls it profiles
      int64_t len = 0;
      for (const std::vector<int64_t>& prompt : prompts) {  // keys: prefill_ for the last prompt, as before
        len = static_cast<int64_t>(prompt.size());
        aoti_cuda::RunProfile prefill_profile;
        g.prefill_profiled(device_prompt(prompt), &prefill_profile);
        const bool last = &prompt == &prompts.back();
        report_kernels(("prefill (" + std::to_string(len) + " tokens)").c_str(), prefill_profile,
                       last ? "prefill_" : "prefill" + std::to_string(len) + "_", r);
      }
      aoti_cuda::RunProfile decode_profile;
      g.decode(0, len, &decode_profile);
      report_kernels("decode", decode_profile, "decode_", r);
    }
    if (!plan.empty()) run_decode_at(g, prompts.front(), plan, o, r);
  }
  const aoti_cuda::GraphStatus gs = module.graph_status("decode");
  if (!gs.requested) std::printf("decode CUDA graphs: off\n");
  else if (!gs.available) std::printf("decode CUDA graphs: unavailable: %s\n", gs.reason.c_str());
  else std::printf("decode CUDA graphs: captured %zu, replays %zu\n", gs.captures, gs.replays);
  r.num("graph_replays", static_cast<double>(gs.replays));
  const aoti_cuda::MemoryStats ms = aoti_cuda::device_memory_stats(0);
  std::printf("GPU memory: %.0f MiB in use by this program (shim pool peak %.1f MiB)\n", used_mib() - mem0,
              ms.peak_bytes_in_use / 1048576.0);
  r.num("gpu_mem_mib", used_mib() - mem0);
  r.num("pool_peak_mib", ms.peak_bytes_in_use / 1048576.0);
  r.num("new_tokens", o.new_tokens);
  cudaStreamDestroy(stream);
  std::printf("@@JSON {\"peer\": \"aoti_cuda\", %s}\n", r.body.c_str());
  if (!o.json.empty()) std::ofstream(o.json) << "{\"peer\": \"aoti_cuda\", " << r.body << "}\n";
  return 0;
}

// Reads the command line into `o`: -1 to go on, else the exit status (0 after --help, 2 for a usage error).
int parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      std::printf("usage: %s llm.pte [--prompt-ids 1,2,3 | --prompt-lens 128,512] [--new-tokens 256] [--reps 5]\n"
                  "                  [--expect-tokens ids [--expect-top id:logit,...;...]] [--no-graphs]\n"
                  "                  [--profile-kernels] [--json OUT]\n"
                  "                  [--decode-at P1,P2,... [--decode-window 64] [--max-ctx N]]\n", argv[0]);
      return 0;
    } else if (a == "--prompt-ids" && has_value) o.prompt_ids = parse_ids(argv[++i]);
    else if (a == "--prompt-lens" && has_value) o.prompt_lens = parse_ids(argv[++i]);
    else if (a == "--expect-tokens" && has_value) o.expect = parse_ids(argv[++i]);
    else if (a == "--expect-top" && has_value) o.expect_top = reference_check::parse_top(argv[++i]);
    else if (a == "--new-tokens" && has_value) o.new_tokens = std::stoi(argv[++i]);
    else if (a == "--reps" && has_value) o.reps = std::stoi(argv[++i]);
    else if (a == "--json" && has_value) o.json = argv[++i];
    else if (a == "--decode-at" && has_value) o.decode_at = parse_ids(argv[++i]);
    else if (a == "--decode-window" && has_value) o.decode_window = std::stoll(argv[++i]);
    else if (a == "--max-ctx" && has_value) o.max_ctx = std::stoll(argv[++i]);
    else if (a == "--no-graphs") o.graphs = false;
    else if (a == "--profile-kernels") o.profile_kernels = true;
    else if (o.program.empty() && a.rfind("--", 0) != 0) o.program = a;
    else {
      std::fprintf(stderr, "unknown or incomplete option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (o.program.empty()) {
    std::fprintf(stderr, "usage: %s llm.pte [options] (see --help)\n", argv[0]);
    return 2;
  }
  if (!o.expect_top.empty() && o.expect_top.size() != o.expect.size()) {
    std::fprintf(stderr, "--expect-top lists %zu steps but --expect-tokens %zu ids: give both from one reference\n",
                 o.expect_top.size(), o.expect.size());
    return 2;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also through a pipe
  Options o;
  try {  // a value that does not parse (std::stoi, --expect-top) is a usage error, not a crash
    const int status = parse_options(argc, argv, o);
    if (status >= 0) return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bad option value: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return generate(o);
  } catch (const aoti_cuda::Error& e) {
    std::fprintf(stderr, "aoti_cuda error (%s): %s\n", aoti_cuda::to_string(e.code()), e.what());
    return e.code() == aoti_cuda::ErrorCode::kNoDevice ? kCannotRunHere : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
