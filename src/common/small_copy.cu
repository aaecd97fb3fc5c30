// Small copies as kernel nodes of graphs. See small_copy.hpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/small_copy.hpp"

namespace aoti_cuda::common {
namespace {

// One grid-stride loop: 16-byte words when both ends and the size allow it
// (staging buffers and allocations are 256-byte aligned), bytes otherwise.
__global__ void copy_kernel(void* dst, const void* src, std::size_t n) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  if ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) | n) % 16 == 0) {
    auto* d = static_cast<uint4*>(dst);
    const auto* s = static_cast<const uint4*>(src);
    for (std::size_t i = first; i < n / 16; i += step) d[i] = s[i];
  } else {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    for (std::size_t i = first; i < n; i += step) d[i] = s[i];
  }
}

constexpr unsigned kThreads = 256;
constexpr std::size_t kMaxBlocks = 64;

dim3 grid_for(std::size_t bytes) {
  const std::size_t items = bytes % 16 == 0 ? bytes / 16 : bytes;
  const std::size_t b = (items + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b)));
}

// The node's parameters; `args` must outlive the call that reads them.
cudaKernelNodeParams node_params(void** args, std::size_t bytes) {
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(copy_kernel);
  p.gridDim = grid_for(bytes);
  p.blockDim = dim3(kThreads);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  return p;
}

}  // namespace

int add_copy_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                         void* dst, const void* src, std::size_t bytes) noexcept {
  void* from = const_cast<void*>(src);  // the kernel's parameter is const void*: same bytes
  void* args[] = {&dst, &from, &bytes};
  const cudaKernelNodeParams p = node_params(args, bytes);
  return static_cast<int>(cudaGraphAddKernelNode(node, graph, deps, n_deps, &p));
}

int set_copy_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst, const void* src,
                         std::size_t bytes) noexcept {
  void* from = const_cast<void*>(src);  // the kernel's parameter is const void*: same bytes
  void* args[] = {&dst, &from, &bytes};
  const cudaKernelNodeParams p = node_params(args, bytes);
  return static_cast<int>(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

}  // namespace aoti_cuda::common
