// A kernel-level trace of CUDA graph replays, for any program, through CUPTI's activity records:
//
//   AOTI_CUDA_GRAPH_TRACE=trace.json LD_PRELOAD=bench/libaoti_cuda_graph_trace.so PROGRAM ARGS...
//
// Every kernel a graph launch runs is recorded (name, GPU start and end, the launch's correlation id, the graph);
// at exit the last AOTI_CUDA_GRAPH_TRACE_LAUNCHES (default 8) graph launches go to the JSON file: per launch its
// kernel count, the span from the first kernel's start to the last one's end, the sum of the kernels' own
// durations, and (last launch only) every kernel. span / sum is what the replay adds between its kernels
// (docs/benchmarks/llm.md: issue 32's "the runtime adds nothing" target compares the step time with that sum).
// CUPTI's CONCURRENT_KERNEL records do not serialize kernels. Without a GPU, or when CUPTI refuses, the program
// runs untraced and a line on stderr says why.
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  std::string name;
  uint64_t start = 0, end = 0;
  uint32_t correlation = 0, graph = 0;
};

std::mutex& records_mutex() {
  static std::mutex m;
  return m;
}
std::vector<KernelRecord>& records() {
  static auto* r = new std::vector<KernelRecord>();  // never destroyed: read by the exit handler
  return *r;
}
const char* g_path = nullptr;
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

void write_trace();

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Registered here, after the CUDA runtime registered its own exit handler at its start: handlers run in
  // reverse order, so the records are flushed before the runtime tears the context down.
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(write_trace); });
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  {
    std::lock_guard<std::mutex> lock(records_mutex());
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (k->graphId == 0) continue;  // launched outside a graph
      records().push_back({k->name != nullptr ? k->name : "?", k->start, k->end, k->correlationId, k->graphId});
    }
  }
  std::free(buffer);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

struct Launch {
  uint32_t correlation = 0, graph = 0;
  uint64_t first_start = UINT64_MAX, last_end = 0, kernel_ns = 0;
  std::vector<const KernelRecord*> kernels;
};

void write_trace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(records_mutex());
  std::map<uint32_t, Launch> by_launch;  // one graph launch = one correlation id
  for (const KernelRecord& r : records()) {
    Launch& l = by_launch[r.correlation];
    l.correlation = r.correlation;
    l.graph = r.graph;
    l.first_start = std::min(l.first_start, r.start);
    l.last_end = std::max(l.last_end, r.end);
    l.kernel_ns += r.end - r.start;
    l.kernels.push_back(&r);
  }
  std::vector<Launch*> launches;
  for (auto& [corr, l] : by_launch) launches.push_back(&l);
  std::sort(launches.begin(), launches.end(), [](const Launch* a, const Launch* b) { return a->first_start < b->first_start; });
  const char* keep_env = std::getenv("AOTI_CUDA_GRAPH_TRACE_LAUNCHES");
  const std::size_t keep = keep_env != nullptr && std::atoi(keep_env) > 0 ? static_cast<std::size_t>(std::atoi(keep_env)) : 8;
  if (launches.size() > keep) launches.erase(launches.begin(), launches.end() - static_cast<std::ptrdiff_t>(keep));
  FILE* f = std::fopen(g_path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "graph trace: cannot write %s\n", g_path);
    return;
  }
  std::fprintf(f, "{\"graph_launches_traced\": %zu, \"launches\": [", by_launch.size());
  for (std::size_t i = 0; i < launches.size(); ++i) {
    Launch& l = *launches[i];
    std::sort(l.kernels.begin(), l.kernels.end(), [](const KernelRecord* a, const KernelRecord* b) { return a->start < b->start; });
    std::fprintf(f, "%s\n {\"correlation\": %u, \"graph\": %u, \"kernels\": %zu, \"span_ns\": %llu, \"kernel_ns\": %llu",
                 i ? "," : "", l.correlation, l.graph, l.kernels.size(),
                 static_cast<unsigned long long>(l.last_end - l.first_start), static_cast<unsigned long long>(l.kernel_ns));
    if (i + 1 == launches.size()) {  // the last launch kernel by kernel: [name, start from the first, duration]
      std::fprintf(f, ", \"kernel_list\": [");
      for (std::size_t k = 0; k < l.kernels.size(); ++k) {
        const KernelRecord& r = *l.kernels[k];
        std::fprintf(f, "%s[%s, %llu, %llu]", k ? ", " : "", json_string(r.name).c_str(),
                     static_cast<unsigned long long>(r.start - l.first_start),
                     static_cast<unsigned long long>(r.end - r.start));
      }
      std::fprintf(f, "]");
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n]}\n");
  std::fclose(f);
  if (!launches.empty()) {
    const Launch& l = *launches.back();
    std::fprintf(stderr, "graph trace: %zu graph launches; the last: %zu kernels, span %.1f us, kernels %.1f us (%s)\n",
                 by_launch.size(), l.kernels.size(), l.last_end > l.first_start ? (l.last_end - l.first_start) / 1e3 : 0.0,
                 l.kernel_ns / 1e3, g_path);
  } else {
    std::fprintf(stderr, "graph trace: no graph launch was traced (%s)\n", g_path);
  }
}

struct Start {
  Start() {
    g_path = std::getenv("AOTI_CUDA_GRAPH_TRACE");
    if (g_path == nullptr || *g_path == '\0') return;
    CUptiResult rc = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
    if (rc == CUPTI_SUCCESS) rc = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (rc != CUPTI_SUCCESS) {
      const char* why = nullptr;
      cuptiGetResultString(rc, &why);
      std::fprintf(stderr, "graph trace: CUPTI refused (%s); running untraced\n", why != nullptr ? why : "?");
      g_path = nullptr;
    }
  }
} g_start;

}  // namespace
