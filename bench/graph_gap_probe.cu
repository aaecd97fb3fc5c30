// graph_gap_probe: does a kernel's parameter count change the GPU's time between the kernels of one CUDA graph?
// Not a test: prints numbers.
//
//   aoti_cuda_graph_gap_probe [--kernels N] [--reps R]
//
// Why: the stock ExecuTorch export's decode graph spends about 4 % of its step between its kernels (median 416 ns
// against 96 ns in aoti_cuda's exports; docs/benchmarks/llm.md, issue 32's "stock step <= 1.03x its kernels"). Graphs
// that hold the backend's Triton SDPA kernel show it from their first pair of kernels on. Read statically, that
// kernel differs from the library's other kernels only in taking 26 parameters where they take 5-9 (llm.md, "The
// stock export's static side"); shared memory was ruled out by an earlier probe. This one answers the remaining
// question in seconds of GPU time.
//
// How: kernels loaded at run time from PTX, each in a module of its own as the model library loads Triton's
// (cudaLibraryLoadData: the runtime's form of cuModuleLoadData, so that the probe needs no libcuda at link time), and
// launched under stream capture, one block of 32 threads each, each storing one word: N of them in a graph,
// replayed R times; the replay's time per kernel is launch + run + the gap to the next, and the run is the same in
// every row. Rows: every kernel with P parameters (P = 1, 6, 26, 64), and one 26-parameter kernel second among
// 1-parameter kernels (as the SDPA kernel sits among the others).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "l2_flush.cuh"

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "graph_gap_probe: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// A kernel `k<params>` taking `params` 64-bit parameters; thread 0 stores 1 at the first one's address.
std::string kernel_ptx(int params) {
  std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k" + std::to_string(params) + "(";
  for (int i = 0; i < params; ++i) ptx += std::string(i ? ", " : "") + ".param .u64 p" + std::to_string(i);
  ptx +=
      ")\n{\n.reg .u64 %a;\n.reg .u32 %t, %one;\n.reg .pred %z;\n"
      "mov.u32 %t, %tid.x;\nsetp.ne.u32 %z, %t, 0;\n@%z bra DONE;\n"
      "ld.param.u64 %a, [p0];\ncvta.to.global.u64 %a, %a;\nmov.u32 %one, 1;\nst.global.u32 [%a], %one;\n"
      "DONE:\nret;\n}\n";
  return ptx;
}

struct Kernel {
  cudaLibrary_t library = nullptr;
  cudaKernel_t function = nullptr;
  int params = 0;
};

Kernel load(int params) {
  Kernel k;
  k.params = params;
  const std::string ptx = kernel_ptx(params);
  check(cudaLibraryLoadData(&k.library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
  check(cudaLibraryGetKernel(&k.function, k.library, ("k" + std::to_string(params)).c_str()), "cudaLibraryGetKernel");
  return k;
}

// Median µs per kernel of a graph replaying `order` (kernels by index into `kernels`), by the benches' replay helper
// with no L2 flush: what is timed is launches, not memory.
double per_kernel_us(const std::vector<Kernel>& kernels, const std::vector<int>& order, int reps, cudaStream_t stream,
                     void* word) {
  std::vector<void*> args(64, word);
  std::vector<void*> arg_ptrs(64);
  for (int i = 0; i < 64; ++i) arg_ptrs[i] = &args[i];
  return aoti_cuda_bench::captured_per_call_us(stream, static_cast<int>(order.size()), reps, nullptr, 0, [&](int r) {
    return cudaLaunchKernel(reinterpret_cast<const void*>(kernels[order[static_cast<std::size_t>(r)]].function),
                            dim3(1), dim3(32), arg_ptrs.data(), 0, stream);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int n = 40, reps = 21;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--kernels") && i + 1 < argc) {
      n = std::max(2, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: aoti_cuda_graph_gap_probe [--kernels N] [--reps R]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("graph_gap_probe: no CUDA device, nothing to measure\n");
    return 0;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void* word = nullptr;
  check(cudaMalloc(&word, 4), "cudaMalloc");
  const std::vector<Kernel> kernels = {load(1), load(6), load(26), load(64)};
  struct Row {
    std::string name;
    std::vector<int> order;
  };
  std::vector<Row> rows;
  for (int k = 0; k < static_cast<int>(kernels.size()); ++k) {
    rows.push_back({"every kernel " + std::to_string(kernels[k].params) + " parameters", std::vector<int>(n, k)});
  }
  std::vector<int> mixed(n, 0);
  mixed[1] = 2;
  rows.push_back({"1 parameter, the second kernel 26", mixed});
  for (int round = 0; round < 2; ++round) {  // twice, interleaved: drift shows as a difference
    for (const Row& r : rows) {
      std::printf("graph of %d kernels, %-36s %6.3f us a kernel\n", n, r.name.c_str(),
                  per_kernel_us(kernels, r.order, reps, stream, word));
    }
  }
  for (const Kernel& k : kernels) cudaLibraryUnload(k.library);
  cudaFree(word);
  cudaStreamDestroy(stream);
  return 0;
}
