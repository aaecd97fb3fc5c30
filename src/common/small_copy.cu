// Small copies as kernel nodes of graphs. See small_copy.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/small_copy.hpp"

namespace aoti_cuda::common {
namespace {

// Block row blockIdx.y makes copy blockIdx.y of the list, one grid-stride loop over its blocks: 16-byte words when
// both ends and the size allow it (staging buffers and allocations are 256-byte aligned), bytes otherwise.
__global__ void copy_list_kernel(CopyList list) {
  const int c = blockIdx.y;
  void* dst = list.dst[c];
  const void* src = list.src[c];
  const std::size_t n = list.bytes[c];
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

// Blocks for the largest copy of the list (every row gets as many; smaller copies leave some idle).
dim3 grid_for(const CopyList& list) {
  std::size_t blocks = 1;
  for (int c = 0; c < list.count; ++c) {
    const std::size_t items = list.bytes[c] % 16 == 0 ? list.bytes[c] / 16 : list.bytes[c];
    blocks = std::max(blocks, (items + kThreads - 1) / kThreads);
  }
  return dim3(static_cast<unsigned>(std::min(blocks, kMaxBlocks)), static_cast<unsigned>(list.count));
}

// The node's parameters; `args` must outlive the call that reads them.
cudaKernelNodeParams node_params(void** args, const CopyList& list) {
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(copy_list_kernel);
  p.gridDim = grid_for(list);
  p.blockDim = dim3(kThreads);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  return p;
}

}  // namespace

int add_copy_list_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps, std::size_t n_deps,
                       const CopyList& list) noexcept {
  if (list.count < 1 || list.count > kCopyListMax) return static_cast<int>(cudaErrorInvalidValue);
  CopyList copy = list;  // the kernel's one parameter (read by the call below)
  void* args[] = {&copy};
  const cudaKernelNodeParams p = node_params(args, copy);
  return static_cast<int>(cudaGraphAddKernelNode(node, graph, deps, n_deps, &p));
}

int set_copy_list_node(cudaGraphExec_t exec, cudaGraphNode_t node, const CopyList& list) noexcept {
  if (list.count < 1 || list.count > kCopyListMax) return static_cast<int>(cudaErrorInvalidValue);
  CopyList copy = list;
  void* args[] = {&copy};
  const cudaKernelNodeParams p = node_params(args, copy);
  return static_cast<int>(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

}  // namespace aoti_cuda::common
