// Where a captured plan's replay time goes, kernel by kernel. See graph_probe.hpp.
#include "runtime/graph_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
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

// The kernel's name: the runtime's answer, else the driver's (kernels a library launched through cuLaunchKernel).
std::string kernel_name(const void* func) {
  const char* name = nullptr;
  if (cudaFuncGetName(&name, func) == cudaSuccess && name != nullptr) return name;
  (void)cudaGetLastError();
  using DriverGetName = int (*)(const char**, void*);
  auto get = reinterpret_cast<DriverGetName>(common::driver_symbol("cuFuncGetName"));
  if (get != nullptr && get(&name, const_cast<void*>(func)) == 0 && name != nullptr) return name;
  return "?";
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

// Median µs of one replay of `graph` on `stream` (instantiated, uploaded and replayed 3 times first).
double replay_us(cudaGraph_t graph, cudaStream_t stream) {
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<float> times;
  try {
    ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    ok(cudaEventCreate(&start), "cudaEventCreate");
    ok(cudaEventCreate(&stop), "cudaEventCreate");
    for (int i = 0; i < 3; ++i) ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    for (int i = 0; i < 15; ++i) {
      ok(cudaEventRecord(start, stream), "cudaEventRecord");
      ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      ok(cudaEventRecord(stop, stream), "cudaEventRecord");
      ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      times.push_back(ms * 1000.f);
    }
  } catch (...) {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// A copy of `plan` whose kernel nodes are all the empty kernel, except `keep` (a node of `plan`, or nullptr).
cudaGraph_t emptied_copy(cudaGraph_t plan, const std::vector<cudaGraphNode_t>& kernels, cudaGraphNode_t keep) {
  cudaGraph_t copy = nullptr;
  ok(cudaGraphClone(&copy, plan), "cudaGraphClone");
  try {
    cudaKernelNodeParams empty{};
    empty.func = empty_kernel();
    empty.gridDim = dim3(1);
    empty.blockDim = dim3(32);
    for (cudaGraphNode_t node : kernels) {
      if (node == keep) continue;
      cudaGraphNode_t mine = nullptr;
      ok(cudaGraphNodeFindInClone(&mine, node, copy), "cudaGraphNodeFindInClone");
      ok(cudaGraphKernelNodeSetParams(mine, &empty), "cudaGraphKernelNodeSetParams");
    }
  } catch (...) {
    cudaGraphDestroy(copy);
    throw;
  }
  return copy;
}

double emptied_us(cudaGraph_t plan, const std::vector<cudaGraphNode_t>& kernels, cudaGraphNode_t keep,
                  cudaStream_t stream) {
  cudaGraph_t copy = emptied_copy(plan, kernels, keep);
  try {
    const double us = replay_us(copy, stream);
    cudaGraphDestroy(copy);
    return us;
  } catch (...) {
    cudaGraphDestroy(copy);
    throw;
  }
}

std::string fixed(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

}  // namespace

bool graph_probe_requested() { return env_flag("AOTI_CUDA_GRAPH_PROBE"); }

void probe_graph(cudaGraph_t plan, cudaStream_t stream, const std::string& method) noexcept {
  const std::string what = "AOTI_CUDA_GRAPH_PROBE, method '" + method + "': ";
  try {
    if (empty_kernel() == nullptr) throw ProbeFailure("the empty kernel could not be loaded");
    const std::vector<cudaGraphNode_t> kernels = kernel_nodes(plan);
    // The first node of each distinct kernel, and how many nodes run it.
    std::vector<cudaGraphNode_t> firsts;
    std::map<void*, int> uses;
    std::vector<cudaKernelNodeParams> params(kernels.size());
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      ok(cudaGraphKernelNodeGetParams(kernels[i], &params[i]), "cudaGraphKernelNodeGetParams");
      if (uses[params[i].func]++ == 0) firsts.push_back(kernels[i]);
    }
    const double real = replay_us(plan, stream);
    const double empty = emptied_us(plan, kernels, nullptr, stream);
    log(LogLevel::kInfo, what + std::to_string(kernels.size()) + " kernel nodes (" + std::to_string(firsts.size()) +
                             " distinct kernels): replay " + fixed(real) + " us; every kernel empty " + fixed(empty) +
                             " us");
    double estimate = empty;
    for (cudaGraphNode_t node : firsts) {
      const std::size_t i = static_cast<std::size_t>(std::find(kernels.begin(), kernels.end(), node) - kernels.begin());
      const cudaKernelNodeParams& p = params[i];
      const double alone = emptied_us(plan, kernels, node, stream) - empty;
      const int n = uses[p.func];
      estimate += alone * n;
      log(LogLevel::kInfo, what + kernel_name(p.func) + " <<<" + std::to_string(p.gridDim.x) + "x" +
                               std::to_string(p.gridDim.y) + "x" + std::to_string(p.gridDim.z) + ", " +
                               std::to_string(p.blockDim.x * p.blockDim.y * p.blockDim.z) + ", " +
                               std::to_string(p.sharedMemBytes) + ">>> (node " + std::to_string(i) + ", " +
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
