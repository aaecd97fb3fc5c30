// The capture diagnostics: the plan as Graphviz text, and where its replay time goes. See graph_probe.hpp.
#include "runtime/graph_probe.hpp"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aoti_cuda/log.hpp"
#include "common/cuda.hpp"
#include "common/env.hpp"

namespace aoti_cuda::runtime {
namespace {

// Thrown inside the probe when CUDA refuses a step; probe_graph logs it and stops.
struct ProbeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw ProbeFailure(std::string(what) + ": " + cudaGetErrorName(err));
  }
}

// The empty kernel that stands in for replaced nodes, loaded from PTX (no parameters, one block of 32 threads does
// nothing), so this diagnostic adds no compiled kernel to the library. Loaded once per process, never unloaded.
void* empty_kernel() {
  static void* kernel = [] () -> void* {
    static const char kPtx[] =
        ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry aoti_cuda_probe_empty()\n{\nret;\n}\n";
    cudaLibrary_t library = nullptr;
    cudaKernel_t k = nullptr;
    if (cudaLibraryLoadData(&library, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess ||
        cudaLibraryGetKernel(&k, library, "aoti_cuda_probe_empty") != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<void*>(k);
  }();
  return kernel;
}

// What the probe reports of a kernel node. The driver is asked, not the runtime: cudaGraphKernelNodeGetParams
// answers cudaErrorInvalidDeviceFunction for the nodes of kernels a library launched through cuLaunchKernel, which
// are all of an AOTInductor container's kernels (seen on the H200, 2026-12-05).
struct NodeKernel {
  const void* key = nullptr;  // the function (or library kernel) the node runs: equal keys, same kernel
  std::string name = "?";
  unsigned grid[3] = {0, 0, 0};
  unsigned threads = 0;
  unsigned shared_bytes = 0;
};

NodeKernel node_kernel(cudaGraphNode_t node) {
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*);
  auto get = reinterpret_cast<GetParams>(common::driver_symbol("cuGraphKernelNodeGetParams_v2"));
  if (get == nullptr) throw ProbeFailure("the driver has no cuGraphKernelNodeGetParams_v2");
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  const CUresult err = get(reinterpret_cast<CUgraphNode>(node), &p);
  if (err != CUDA_SUCCESS) throw ProbeFailure("cuGraphKernelNodeGetParams_v2: error " + std::to_string(err));
  NodeKernel k;
  k.key = p.func != nullptr ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
  k.grid[0] = p.gridDimX;
  k.grid[1] = p.gridDimY;
  k.grid[2] = p.gridDimZ;
  k.threads = p.blockDimX * p.blockDimY * p.blockDimZ;
  k.shared_bytes = p.sharedMemBytes;
  const char* name = nullptr;
  using FuncName = CUresult (*)(const char**, CUfunction);
  using KernelName = CUresult (*)(const char**, CUkernel);
  if (p.func != nullptr) {
    auto f = reinterpret_cast<FuncName>(common::driver_symbol("cuFuncGetName"));
    if (f != nullptr && f(&name, p.func) == CUDA_SUCCESS && name != nullptr) k.name = name;
  } else if (p.kern != nullptr) {
    auto f = reinterpret_cast<KernelName>(common::driver_symbol("cuKernelGetName"));
    if (f != nullptr && f(&name, p.kern) == CUDA_SUCCESS && name != nullptr) k.name = name;
  }
  return k;
}

std::vector<cudaGraphNode_t> kernel_nodes(cudaGraph_t graph) {
  std::size_t n = 0;
  ok(cudaGraphGetNodes(graph, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  ok(cudaGraphGetNodes(graph, nodes.data(), &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> kernels;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ok(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    if (type == cudaGraphNodeTypeKernel) kernels.push_back(node);
  }
  return kernels;
}

// Owners of the CUDA objects a probe step makes, so that a failing step (ProbeFailure) leaves nothing behind.
struct GraphDeleter {
  void operator()(CUgraph_st* g) const { cudaGraphDestroy(g); }
};
struct ExecDeleter {
  void operator()(CUgraphExec_st* e) const { cudaGraphExecDestroy(e); }
};
struct EventDeleter {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
using GraphPtr = std::unique_ptr<CUgraph_st, GraphDeleter>;
using ExecPtr = std::unique_ptr<CUgraphExec_st, ExecDeleter>;
using EventPtr = std::unique_ptr<CUevent_st, EventDeleter>;

EventPtr make_event() {
  cudaEvent_t e = nullptr;
  ok(cudaEventCreate(&e), "cudaEventCreate");
  return EventPtr(e);
}

// Median µs of one replay of `graph` on `stream` (instantiated, uploaded and replayed 3 times first).
double replay_us(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphExec_t raw = nullptr;
  ok(cudaGraphInstantiate(&raw, graph, 0), "cudaGraphInstantiate");
  const ExecPtr exec(raw);
  const EventPtr start = make_event(), stop = make_event();
  for (int i = 0; i < 3; ++i) ok(cudaGraphLaunch(raw, stream), "cudaGraphLaunch");
  std::vector<float> times;
  for (int i = 0; i < 15; ++i) {
    ok(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    ok(cudaGraphLaunch(raw, stream), "cudaGraphLaunch");
    ok(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
    ok(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    times.push_back(ms * 1000.f);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// µs of one replay of a copy of `plan` whose kernel nodes are all the empty kernel, except `keep` (a node of
// `plan`, or nullptr).
double emptied_us(cudaGraph_t plan, const std::vector<cudaGraphNode_t>& kernels, cudaGraphNode_t keep,
                  cudaStream_t stream) {
  cudaGraph_t raw = nullptr;
  ok(cudaGraphClone(&raw, plan), "cudaGraphClone");
  const GraphPtr copy(raw);
  cudaKernelNodeParams empty{};
  empty.func = empty_kernel();
  empty.gridDim = dim3(1);
  empty.blockDim = dim3(32);
  for (cudaGraphNode_t node : kernels) {
    if (node == keep) continue;
    cudaGraphNode_t mine = nullptr;
    ok(cudaGraphNodeFindInClone(&mine, node, raw), "cudaGraphNodeFindInClone");
    ok(cudaGraphKernelNodeSetParams(mine, &empty), "cudaGraphKernelNodeSetParams");
  }
  return replay_us(raw, stream);
}

std::string fixed(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

}  // namespace

// The capture goes on whatever happens here: a file that cannot be written is logged.
void write_graph_dot(cudaGraph_t graph, const std::string& method) {
  const std::optional<std::string> folder = env_text("AOTI_CUDA_GRAPH_DOT");
  if (!folder) return;
  static std::atomic<int> counter{0};
  std::string safe = method;
  for (char& ch : safe) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') ch = '_';
  }
  const std::string path = *folder + "/" + safe + "-" + std::to_string(counter.fetch_add(1)) + ".dot";
  const cudaError_t err = cudaGraphDebugDotPrint(graph, path.c_str(), cudaGraphDebugDotFlagsVerbose);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    log(LogLevel::kWarning, "AOTI_CUDA_GRAPH_DOT: could not write " + path + ": " + cudaGetErrorName(err));
    return;
  }
  log(LogLevel::kInfo, "AOTI_CUDA_GRAPH_DOT: wrote method '" + method + "' graph to " + path);
}

bool graph_probe_requested() { return env_flag("AOTI_CUDA_GRAPH_PROBE"); }

void probe_graph(cudaGraph_t plan, cudaStream_t stream, const std::string& method) noexcept {
  const std::string what = "AOTI_CUDA_GRAPH_PROBE, method '" + method + "': ";
  try {
    if (empty_kernel() == nullptr) throw ProbeFailure("the empty kernel could not be loaded");
    const std::vector<cudaGraphNode_t> kernels = kernel_nodes(plan);
    // The first node of each distinct kernel, and how many nodes run it.
    std::vector<cudaGraphNode_t> firsts;
    std::vector<NodeKernel> params;
    params.reserve(kernels.size());
    std::map<const void*, int> uses;
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      params.push_back(node_kernel(kernels[i]));
      if (uses[params[i].key]++ == 0) firsts.push_back(kernels[i]);
    }
    const double real = replay_us(plan, stream);
    const double empty = emptied_us(plan, kernels, nullptr, stream);
    log(LogLevel::kInfo, what + std::to_string(kernels.size()) + " kernel nodes (" + std::to_string(firsts.size()) +
                             " distinct kernels): replay " + fixed(real) + " us; every kernel empty " + fixed(empty) +
                             " us");
    double estimate = empty;
    for (cudaGraphNode_t node : firsts) {
      const std::size_t i = static_cast<std::size_t>(std::find(kernels.begin(), kernels.end(), node) - kernels.begin());
      const NodeKernel& p = params[i];
      const double alone = emptied_us(plan, kernels, node, stream) - empty;
      const int n = uses[p.key];
      estimate += alone * n;
      log(LogLevel::kInfo, what + p.name + " <<<" + std::to_string(p.grid[0]) + "x" + std::to_string(p.grid[1]) + "x" +
                               std::to_string(p.grid[2]) + ", " + std::to_string(p.threads) + ", " +
                               std::to_string(p.shared_bytes) + ">>> (node " + std::to_string(i) + ", " +
                               std::to_string(n) + " nodes): the only real kernel among empty ones adds " +
                               fixed(alone) + " us");
    }
    log(LogLevel::kInfo, what + "every kernel empty plus each kernel's addition times its nodes: " + fixed(estimate) +
                             " us, against the replay's " + fixed(real) + " us");
  } catch (const std::exception& e) {
    (void)cudaGetLastError();
    log(LogLevel::kWarning, what + "stopped: " + e.what());
  }
}

}  // namespace aoti_cuda::runtime
