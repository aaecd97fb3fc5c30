// A strided device-to-device copy as one kernel. See strided_copy_kernel.hpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/strided_copy_kernel.hpp"

namespace aoti_cuda::common {
namespace {

// The copy, by value (kernel parameter space).
struct Layouts {
  char* dst;
  const char* src;
  StridedCopyPlan plan;
};

// One element per thread and step of a grid-stride loop; the index is split into
// coordinates from the innermost dimension out.
template <typename Word>
__global__ void strided_copy_kernel(Layouts a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const StridedCopyPlan& p = a.plan;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel; i += step) {
    int64_t rest = i, d = 0, s = 0;
    for (int k = p.ndim - 1; k >= 0; --k) {
      const int64_t c = rest % p.sizes[k];
      rest /= p.sizes[k];
      d += c * p.dst_strides[k];
      s += c * p.src_strides[k];
    }
    reinterpret_cast<Word*>(a.dst)[d] = reinterpret_cast<const Word*>(a.src)[s];
  }
}

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

}  // namespace

int plan_strided_copy(const int64_t* dst_strides, const int64_t* src_strides, const int64_t* sizes, int ndim,
                      StridedCopyPlan& plan) noexcept {
  plan = StridedCopyPlan{};
  plan.numel = 1;
  for (int k = 0; k < ndim; ++k) {
    if (sizes[k] == 0) {
      plan = StridedCopyPlan{};  // nothing to copy
      return 0;
    }
    if (sizes[k] == 1) continue;
    if (dst_strides[k] < 0 || src_strides[k] < 0) return cudaErrorInvalidValue;
    plan.numel *= sizes[k];
    const int last = plan.ndim - 1;
    if (last >= 0 && plan.dst_strides[last] == dst_strides[k] * sizes[k] &&
        plan.src_strides[last] == src_strides[k] * sizes[k]) {
      plan.sizes[last] *= sizes[k];
      plan.dst_strides[last] = dst_strides[k];
      plan.src_strides[last] = src_strides[k];
      continue;
    }
    if (plan.ndim == kMaxStridedCopyDims) return cudaErrorInvalidValue;
    plan.sizes[plan.ndim] = sizes[k];
    plan.dst_strides[plan.ndim] = dst_strides[k];
    plan.src_strides[plan.ndim] = src_strides[k];
    ++plan.ndim;
  }
  return 0;
}

int launch_strided_copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                        const int64_t* sizes, int ndim, std::size_t element_bytes, cudaStream_t stream) noexcept {
  Layouts a{};
  a.dst = static_cast<char*>(dst);
  a.src = static_cast<const char*>(src);
  if (const int err = plan_strided_copy(dst_strides, src_strides, sizes, ndim, a.plan); err != 0) return err;
  if (a.plan.numel == 0) return 0;
  const int64_t wanted = (a.plan.numel + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks));
  switch (element_bytes) {
    case 1: strided_copy_kernel<uint8_t><<<grid, kThreads, 0, stream>>>(a); break;
    case 2: strided_copy_kernel<uint16_t><<<grid, kThreads, 0, stream>>>(a); break;
    case 4: strided_copy_kernel<uint32_t><<<grid, kThreads, 0, stream>>>(a); break;
    case 8: strided_copy_kernel<uint64_t><<<grid, kThreads, 0, stream>>>(a); break;
    default: return cudaErrorInvalidValue;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace aoti_cuda::common
