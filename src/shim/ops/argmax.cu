// The row argmax kernel; see argmax.hpp for what it computes and why.
//
// One block per row. Each thread keeps the best (value, index) of the elements it reads: with 16-byte aligned rows,
// kVectors 16-byte vectors of the row per round, all requested before any is compared (so a row of 32,000 bf16 is
// one round for 1,024 threads), then the elements past the last whole vector one by one; otherwise element by
// element, kVectors in flight per round. The block then reduces: shuffles within each warp, one value per warp
// through shared memory, shuffles in the first warp. "Better" is torch.argmax's order: NaN above every number,
// then the larger value, then the smaller index.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "shim/ops/argmax.hpp"
#include "shim/ops/dependent_launch.hpp"

namespace aoti_cuda {
namespace shim {
namespace argmax {
namespace {

constexpr int kVectors = 4;        // 16-byte loads per thread per round
constexpr int kMaxThreads = 1024;
constexpr int kNoIndex = 0x7fffffff;  // above every real index: loses every tie

struct Best {
  float value;
  int index;
};

// Whether (v, i) comes before (w, j) in torch.argmax's order.
__device__ __forceinline__ bool better(float v, int i, float w, int j) {
  const bool v_nan = v != v, w_nan = w != w;
  if (v_nan || w_nan) return v_nan && (!w_nan || i < j);
  return v > w || (v == w && i < j);
}

__device__ __forceinline__ void offer(Best& b, float v, int i) {
  if (better(v, i, b.value, b.index)) b = {v, i};
}

template <Dtype kDtype>
__device__ __forceinline__ float element(const void* row, int i) {
  if constexpr (kDtype == Dtype::kBFloat16) return __bfloat162float(static_cast<const __nv_bfloat16*>(row)[i]);
  else if constexpr (kDtype == Dtype::kFloat16) return __half2float(static_cast<const __half*>(row)[i]);
  else return static_cast<const float*>(row)[i];
}

// The elements of one 16-byte vector, offered in index order from `first`.
template <Dtype kDtype>
__device__ __forceinline__ void offer_vector(Best& b, const uint4& raw, int first) {
  uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    if constexpr (kDtype == Dtype::kFloat32) {
      float f;
      memcpy(&f, &words[w], 4);
      offer(b, f, first + w);
    } else {
      float2 f;
      if constexpr (kDtype == Dtype::kBFloat16) {
        __nv_bfloat162 h;
        memcpy(&h, &words[w], 4);
        f = __bfloat1622float2(h);
      } else {
        __half2 h;
        memcpy(&h, &words[w], 4);
        f = __half22float2(h);
      }
      offer(b, f.x, first + 2 * w);
      offer(b, f.y, first + 2 * w + 1);
    }
  }
}

template <Dtype kDtype>
__global__ void __launch_bounds__(kMaxThreads) argmax_kernel(Problem p, bool vectors) {
  constexpr int kPerVector = kDtype == Dtype::kFloat32 ? 4 : 8;
  constexpr int kSize = kDtype == Dtype::kFloat32 ? 4 : 2;
  __shared__ Best warp_best[kMaxThreads / 32];
  // Launched with programmatic dependent launch (dependent_launch.hpp): the logits come from the kernel before.
  pdl::wait_for_predecessor();
  const char* row = static_cast<const char*>(p.x) + static_cast<int64_t>(blockIdx.x) * p.row_stride * kSize;
  const int n = static_cast<int>(p.n);
  const int threads = blockDim.x;
  Best b{-INFINITY, kNoIndex};
  if (vectors) {
    const int whole = n / kPerVector;
    const uint4* v = reinterpret_cast<const uint4*>(row);
    for (int base = threadIdx.x; base < whole; base += kVectors * threads) {
      uint4 raw[kVectors];
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int i = base + u * threads;
        raw[u] = i < whole ? __ldg(v + i) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int i = base + u * threads;
        if (i < whole) offer_vector<kDtype>(b, raw[u], i * kPerVector);
      }
    }
    for (int i = whole * kPerVector + threadIdx.x; i < n; i += threads) offer(b, element<kDtype>(row, i), i);
  } else {
    for (int base = threadIdx.x; base < n; base += kVectors * threads) {
      float x[kVectors];
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int i = base + u * threads;
        x[u] = i < n ? element<kDtype>(row, i) : -INFINITY;
      }
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int i = base + u * threads;
        if (i < n) offer(b, x[u], i);
      }
    }
  }
  pdl::allow_dependents();  // the row is read
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, b.value, off);
    const int i = __shfl_xor_sync(0xffffffffu, b.index, off);
    offer(b, v, i);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = lane < threads / 32 ? warp_best[lane] : Best{-INFINITY, kNoIndex};
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float v = __shfl_xor_sync(0xffffffffu, b.value, off);
      const int i = __shfl_xor_sync(0xffffffffu, b.index, off);
      offer(b, v, i);
    }
    // Every element was offered, and any element beats the initial (-inf, kNoIndex) or ties it with a smaller
    // index: b.index is a real index.
    if (lane == 0) p.out[blockIdx.x] = b.index;
  }
}

}  // namespace

int block_threads(int64_t n) {
  const int64_t wanted = (n + 31) / 32;  // 32 elements a thread
  const int64_t rounded = (wanted + 31) / 32 * 32;
  return static_cast<int>(rounded < 32 ? 32 : (rounded > kMaxThreads ? kMaxThreads : rounded));
}

int launch(const Problem& p, void* stream) {
  if (p.rows == 0) return 0;
  if (p.n < 1 || p.n >= kMaxN || p.rows > 0x7fffffff) return cudaErrorInvalidValue;
  const int size = p.dtype == Dtype::kFloat32 ? 4 : 2;
  // 16-byte vectors when every row starts 16-byte aligned.
  const bool vectors = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && (p.rows == 1 || (p.row_stride * size) % 16 == 0);
  const dim3 grid(static_cast<unsigned>(p.rows)), block(static_cast<unsigned>(block_threads(p.n)));
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
  switch (p.dtype) {
    case Dtype::kBFloat16: err = pdl::launch(argmax_kernel<Dtype::kBFloat16>, grid, block, 0, s, p, vectors); break;
    case Dtype::kFloat16: err = pdl::launch(argmax_kernel<Dtype::kFloat16>, grid, block, 0, s, p, vectors); break;
    default: err = pdl::launch(argmax_kernel<Dtype::kFloat32>, grid, block, 0, s, p, vectors); break;
  }
  return static_cast<int>(err);
}

}  // namespace argmax
}  // namespace shim
}  // namespace aoti_cuda
