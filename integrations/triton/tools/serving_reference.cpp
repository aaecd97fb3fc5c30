// The in-process side of the serving benchmark (docs/benchmarks/serving.md):
// what the Triton backend does for one request, done here without a server.
//
//   aoti_cuda_serving_reference latency PTE METHOD RUNS [--cpu] [--graphs]
//       p50/p90/mean of one execute_into() call with pageable host inputs and
//       host outputs (what an HTTP request gives the backend), as JSON.
//   aoti_cuda_serving_reference names PTE...
//       every method's input and output names, as the backend names them, as JSON.
//   aoti_cuda_serving_reference llm PTE SEQUENCES STEPS
//       greedy generation of SEQUENCES independent sequences (share_state all,
//       one Session each): prompt token i of sequence s is (7 * s + 3 * i) % V,
//       prefill, then STEPS decode calls; prints each sequence's tokens and the
//       methods' tensor names (as the backend names them) as JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"

namespace {

using aoti_cuda::Tensor;

std::vector<std::string> names(const std::vector<std::string>& given, std::size_t n, const char* prefix) {
  // The backend's rule (integrations/triton/backend.cpp: tensor_names).
  std::vector<std::string> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = i < given.size() ? given[i] : "";
    if (s.empty() || std::find(out.begin(), out.begin() + i, s) != out.begin() + i) s = prefix + std::to_string(i);
    out[i] = s;
  }
  return out;
}

std::string json_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s + "]";
}

int latency(const std::string& pte, const std::string& method, int runs, bool cpu, bool graphs) {
  aoti_cuda::LoadOptions load;
  load.device = cpu ? aoti_cuda::Device::cpu() : aoti_cuda::Device::cuda(0);
  load.methods = {method};
  load.cuda_graphs = graphs;
  aoti_cuda::Module m(pte, load);
  const aoti_cuda::MethodMeta meta = m.method_meta(method);
  std::mt19937 rng(1);
  std::vector<std::vector<unsigned char>> in_bytes, out_bytes;
  std::vector<Tensor> inputs, outputs;
  for (const auto& spec : meta.inputs) {
    int64_t n = 1;
    for (int64_t d : spec.sizes) n *= d;
    in_bytes.emplace_back(n * aoti_cuda::element_size(spec.dtype));
    // Small integers: valid as floats of any width and as token ids.
    for (std::size_t i = 0; i < in_bytes.back().size(); ++i) in_bytes.back()[i] = (i % aoti_cuda::element_size(spec.dtype)) == 0 ? rng() % 8 : 0;
    inputs.push_back(Tensor::from_blob(in_bytes.back().data(), spec.sizes, spec.dtype));
  }
  for (const auto& spec : meta.outputs) {
    int64_t n = 1;
    for (int64_t d : spec.sizes) n *= d;
    out_bytes.emplace_back(n * aoti_cuda::element_size(spec.dtype));
    outputs.push_back(Tensor::from_blob(out_bytes.back().data(), spec.sizes, spec.dtype));
  }
  for (int i = 0; i < 50; ++i) m.execute_into(method, inputs, outputs);
  std::vector<double> us(runs);
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.execute_into(method, inputs, outputs);
    us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  double mean = 0;
  for (double x : us) mean += x / runs;
  std::sort(us.begin(), us.end());
  std::printf("{\"pte\": \"%s\", \"method\": \"%s\", \"runs\": %d, \"p50_us\": %.2f, \"p90_us\": %.2f, \"mean_us\": %.2f}\n",
              pte.c_str(), method.c_str(), runs, us[runs / 2], us[runs * 9 / 10], mean);
  return 0;
}

int print_names(const std::vector<std::string>& ptes) {
  // {"<pte>": {"<method>": {"inputs": [...], "outputs": [...]}}}; a program that
  // cannot load here maps to {"error": "..."}.
  std::printf("{");
  for (std::size_t p = 0; p < ptes.size(); ++p) {
    std::printf("%s\"%s\": {", p ? ", " : "", ptes[p].c_str());
    try {
      aoti_cuda::Module m(ptes[p]);
      bool first = true;
      for (const std::string& method : m.method_names()) {
        const auto meta = m.method_meta(method);
        std::printf("%s\"%s\": {\"inputs\": %s, \"outputs\": %s}", first ? "" : ", ", method.c_str(),
                    json_list(names(meta.input_names, meta.inputs.size(), "input_")).c_str(),
                    json_list(names(meta.output_names, meta.outputs.size(), "output_")).c_str());
        first = false;
      }
    } catch (const std::exception& e) {
      std::string msg = e.what();
      for (char& c : msg)
        if (c == '"' || c == '\\' || c == '\n') c = ' ';
      std::printf("\"error\": \"%s\"", msg.c_str());
    }
    std::printf("}");
  }
  std::printf("}\n");
  return 0;
}

int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

int llm(const std::string& pte, int sequences, int steps) {
  aoti_cuda::LoadOptions load;
  load.share_state = aoti_cuda::StateSharing::all();
  aoti_cuda::Module m(pte, load);
  const auto prefill = m.method_meta("prefill"), decode = m.method_meta("decode");
  const int64_t prompt = prefill.inputs.at(0).sizes.at(0);
  const int64_t vocab = decode.outputs.at(0).sizes.back();
  std::printf("{\"methods\": {");
  for (const auto* meta : {&prefill, &decode}) {
    std::printf("%s\"%s\": {\"inputs\": %s, \"outputs\": %s}", meta == &prefill ? "" : ", ", meta->name.c_str(),
                json_list(names(meta->input_names, meta->inputs.size(), "input_")).c_str(),
                json_list(names(meta->output_names, meta->outputs.size(), "output_")).c_str());
  }
  std::printf("}, \"prompt_len\": %lld, \"vocab\": %lld, \"tokens\": {", static_cast<long long>(prompt), static_cast<long long>(vocab));
  for (int s = 0; s < sequences; ++s) {
    aoti_cuda::Session session = m.create_session();
    aoti_cuda::RunOptions run;
    run.session = &session;
    run.outputs = aoti_cuda::OutputLocation::kHost;
    std::vector<int64_t> tokens(prompt);
    for (int64_t i = 0; i < prompt; ++i) tokens[i] = (7 * s + 3 * i) % vocab;
    auto out = m.execute("prefill", {Tensor::from_blob(tokens.data(), {prompt}, aoti_cuda::DType::kInt64)}, run);
    const float* logits = out[0].data_ptr<float>();
    int64_t next = argmax(logits + (prompt - 1) * vocab, vocab);
    std::vector<int64_t> generated{next};
    for (int k = 0; k < steps; ++k) {
      int64_t tok = next, pos = prompt + k;
      auto o = m.execute("decode", {Tensor::from_blob(&tok, {1}, aoti_cuda::DType::kInt64),
                                    Tensor::from_blob(&pos, {1}, aoti_cuda::DType::kInt64)}, run);
      next = argmax(o[0].data_ptr<float>(), vocab);
      generated.push_back(next);
    }
    std::printf("%s\"%d\": [", s ? ", " : "", s);
    for (std::size_t i = 0; i < generated.size(); ++i) std::printf("%s%lld", i ? ", " : "", static_cast<long long>(generated[i]));
    std::printf("]");
  }
  std::printf("}}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    auto has = [&](const char* f) { return std::find(a.begin(), a.end(), f) != a.end(); };
    if (a.size() >= 4 && a[0] == "latency") return latency(a[1], a[2], std::stoi(a[3]), has("--cpu"), has("--graphs"));
    if (a.size() >= 2 && a[0] == "names") return print_names({a.begin() + 1, a.end()});
    if (a.size() == 4 && a[0] == "llm") return llm(a[1], std::stoi(a[2]), std::stoi(a[3]));
    std::fprintf(stderr, "usage: %s latency PTE METHOD RUNS [--cpu] [--graphs] | names PTE... | llm PTE SEQUENCES STEPS\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoti_cuda_serving_reference: %s\n", e.what());
    return 1;
  }
}
