// A strided device-to-device copy as one kernel. See strided_copy_kernel.hpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/strided_copy_kernel.hpp"

namespace aoti_cuda::common {
namespace {

// The copy's dimensions, outermost first, by value (kernel parameter space).
struct Layouts {
  char* dst;
  const char* src;
  int64_t sizes[kMaxStridedCopyDims];
  int64_t dst_strides[kMaxStridedCopyDims];
  int64_t src_strides[kMaxStridedCopyDims];
  int ndim;
  int64_t numel;
};

// One element per thread and step of a grid-stride loop; the index is split into
// coordinates from the innermost dimension out.
template <typename Word>
__global__ void strided_copy_kernel(Layouts a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.numel; i += step) {
    int64_t rest = i, d = 0, s = 0;
    for (int k = a.ndim - 1; k >= 0; --k) {
      const int64_t c = rest % a.sizes[k];
      rest /= a.sizes[k];
      d += c * a.dst_strides[k];
      s += c * a.src_strides[k];
    }
    reinterpret_cast<Word*>(a.dst)[d] = reinterpret_cast<const Word*>(a.src)[s];
  }
}

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

}  // namespace

int launch_strided_copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                        const int64_t* sizes, int ndim, std::size_t element_bytes, cudaStream_t stream) noexcept {
  Layouts a{};
  a.dst = static_cast<char*>(dst);
  a.src = static_cast<const char*>(src);
  a.numel = 1;
  // Drop size-1 dimensions; merge a dimension into the one outside it when both layouts
  // step over it contiguously (fewer divisions per element).
  for (int k = 0; k < ndim; ++k) {
    if (sizes[k] == 0) return 0;
    if (sizes[k] == 1) continue;
    if (dst_strides[k] < 0 || src_strides[k] < 0) return cudaErrorInvalidValue;
    a.numel *= sizes[k];
    const int last = a.ndim - 1;
    if (last >= 0 && a.dst_strides[last] == dst_strides[k] * sizes[k] &&
        a.src_strides[last] == src_strides[k] * sizes[k]) {
      a.sizes[last] *= sizes[k];
      a.dst_strides[last] = dst_strides[k];
      a.src_strides[last] = src_strides[k];
      continue;
    }
    if (a.ndim == kMaxStridedCopyDims) return cudaErrorInvalidValue;
    a.sizes[a.ndim] = sizes[k];
    a.dst_strides[a.ndim] = dst_strides[k];
    a.src_strides[a.ndim] = src_strides[k];
    ++a.ndim;
  }
  const int64_t wanted = (a.numel + kThreads - 1) / kThreads;
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
