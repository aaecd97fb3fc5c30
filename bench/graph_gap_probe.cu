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
// 1-parameter kernels (as the SDPA kernel sits among the others). Then the launch shape, the one other thing the
// graph's own description sets apart (AOTI_CUDA_GRAPH_DOT of the `block` fixture, 2026-12-05: a chain of kernel
// nodes only, no access-policy window, none cooperative, the SDPA kernel alone on a 2-D grid, {1, 4} x 128 threads):
// one kernel on a 1 x 4 grid among 1 x 1 ones, the same with 4 x 1 (as many blocks, 1-D), every kernel on 1 x 4,
// and the SDPA kernel's whole shape (26 parameters, 1 x 4 blocks of 128 threads) second; last, N different kernels
// from N modules, as a model library's graph holds them.
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

// A kernel `k<params>` taking `params` 64-bit parameters; thread 0 stores 1 at the first one's address. `tag` makes
// the text of otherwise equal kernels differ (a distinct module and function each).
std::string kernel_ptx(int params, int tag = 0) {
  std::string ptx = "// tag " + std::to_string(tag) + "\n.version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k" +
                    std::to_string(params) + "(";
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

Kernel load(int params, int tag = 0) {
  Kernel k;
  k.params = params;
  const std::string ptx = kernel_ptx(params, tag);
  check(cudaLibraryLoadData(&k.library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
  check(cudaLibraryGetKernel(&k.function, k.library, ("k" + std::to_string(params)).c_str()), "cudaLibraryGetKernel");
  return k;
}

// How one kernel of a row is launched: which kernel (an index into `kernels`), its grid and block.
struct Launch {
  int kernel = 0;
  dim3 grid = dim3(1);
  int threads = 32;
};

// Median µs per kernel of a graph replaying `order`, by the benches' replay helper with no L2 flush: what is timed
// is launches, not memory.
double per_kernel_us(const std::vector<Kernel>& kernels, const std::vector<Launch>& order, int reps,
                     cudaStream_t stream, void* word) {
  std::vector<void*> args(64, word);
  std::vector<void*> arg_ptrs(64);
  for (int i = 0; i < 64; ++i) arg_ptrs[i] = &args[i];
  return aoti_cuda_bench::captured_per_call_us(stream, static_cast<int>(order.size()), reps, nullptr, 0, [&](int r) {
    const Launch& l = order[static_cast<std::size_t>(r)];
    return cudaLaunchKernel(reinterpret_cast<const void*>(kernels[static_cast<std::size_t>(l.kernel)].function), l.grid,
                            dim3(static_cast<unsigned>(l.threads)), arg_ptrs.data(), 0, stream);
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
  std::vector<Kernel> kernels = {load(1), load(6), load(26), load(64)};
  const int first_distinct = static_cast<int>(kernels.size());
  for (int i = 0; i < n; ++i) kernels.push_back(load(1, i + 1));  // n modules of one 1-parameter kernel each
  struct Row {
    std::string name;
    std::vector<Launch> order;
  };
  std::vector<Row> rows;
  for (int k = 0; k < first_distinct; ++k) {
    rows.push_back({"every kernel " + std::to_string(kernels[static_cast<std::size_t>(k)].params) + " parameters",
                    std::vector<Launch>(n, {k})});
  }
  // The rest: 1-parameter kernels on one block of 32 threads, except as named.
  auto with_second = [&](const char* name, Launch second) {
    std::vector<Launch> order(n, Launch{});
    order[1] = second;
    rows.push_back({name, order});
  };
  with_second("1 parameter, the second kernel 26", {2});
  with_second("1 x 1 grids, the second 1 x 4", {0, dim3(1, 4)});
  with_second("1 x 1 grids, the second 4 x 1", {0, dim3(4, 1)});
  rows.push_back({"every kernel on a 1 x 4 grid", std::vector<Launch>(n, {0, dim3(1, 4)})});
  with_second("the second as the SDPA kernel: 26, 1 x 4 x 128", {2, dim3(1, 4), 128});
  // As the stock library's graph: kernels of many modules, not one function again and again.
  std::vector<Launch> distinct(n);
  for (int i = 0; i < n; ++i) distinct[static_cast<std::size_t>(i)].kernel = first_distinct + i;
  rows.push_back({"every kernel from a module of its own", distinct});
  for (int round = 0; round < 2; ++round) {  // twice, interleaved: drift shows as a difference
    for (const Row& r : rows) {
      std::printf("graph of %d kernels, %-48s %6.3f us a kernel\n", n, r.name.c_str(),
                  per_kernel_us(kernels, r.order, reps, stream, word));
    }
  }
  for (const Kernel& k : kernels) cudaLibraryUnload(k.library);
  cudaFree(word);
  cudaStreamDestroy(stream);
  return 0;
}
