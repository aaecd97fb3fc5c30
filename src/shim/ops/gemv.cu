// aoti_cuda shim — kernels for matrix multiplies with few rows (see gemv.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "shim/ops/dependent_launch.hpp"
#include "shim/ops/gemv.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {
namespace gemv {
namespace {

constexpr int kLanes = 32;
constexpr int kDotThreads = 256;     // 8 warps
constexpr int kUnroll = 4;           // 16-byte loads of b in flight per thread per round

// How many T one 16-byte load holds.
template <typename T>
struct Vec {
  static constexpr int kCount = 16 / static_cast<int>(sizeof(T));
};

__device__ __forceinline__ void unpack(const uint4& v, float (&f)[8], __nv_bfloat16*) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpack(const uint4& v, float (&f)[8], __half*) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &w[i], 4);
    const float2 p = __half22float2(h);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
__device__ __forceinline__ void unpack(const uint4& v, float (&f)[4], float*) {
  f[0] = __uint_as_float(v.x);
  f[1] = __uint_as_float(v.y);
  f[2] = __uint_as_float(v.z);
  f[3] = __uint_as_float(v.w);
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }

struct Args {
  const void* a;
  const void* b;
  void* c;
  int64_t a_rs, a_bs;        // element strides of a: row, batch (each row is contiguous)
  int64_t b_cs, b_bs;        // of b: column, batch (each column is contiguous)
  int64_t c_rs, c_cs, c_bs;  // of c: row, column, batch
  int m, n, k;
  int split;  // warps per output column
  float alpha, beta;
};

template <typename T>
__device__ __forceinline__ void store(const Args& p, int64_t batch, int row, int64_t col, float sum) {
  T* c = static_cast<T*>(p.c) + batch * p.c_bs + row * p.c_rs + col * p.c_cs;
  float v = p.alpha * sum;
  if (p.beta != 0.0f) v += p.beta * to_float(*c);
  *c = from_float<T>(v);
}

// dot: column `col` of c (rows < m) = a · b[:, col]; b's column and a's rows are contiguous.
// Warp w of a block takes column blockIdx.x * (8 / split) + w / split and every split-th run of
// 32 vectors of K from run w % split; lanes then warps (through shared memory) sum.
template <typename T, int R>
__global__ void __launch_bounds__(kDotThreads) dot_kernel(Args p) {
  constexpr int V = Vec<T>::kCount;
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * (kDotThreads / kLanes / p.split) + warp / p.split;
  const int slice = warp % p.split;
  const int64_t batch = blockIdx.y;
  // Launched with programmatic dependent launch (dependent_launch.hpp): nothing is read before.
  pdl::wait_for_predecessor();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  if (col < p.n) {
    const uint4* w = reinterpret_cast<const uint4*>(static_cast<const T*>(p.b) + batch * p.b_bs + col * p.b_cs);
    const T* a = static_cast<const T*>(p.a) + batch * p.a_bs;
    const int vecs = p.k / V;
    const int stride = p.split * kLanes;
    for (int base = slice * kLanes + lane; base < vecs; base += stride * kUnroll) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * stride;
        if (i < vecs) wv[u] = __ldcs(w + i);  // streamed: read once per call
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * stride;
        if (i >= vecs) break;
        float wf[V];
        unpack(wv[u], wf, static_cast<T*>(nullptr));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= p.m) break;
          float xf[V];
          unpack(__ldg(reinterpret_cast<const uint4*>(a + r * p.a_rs) + i), xf, static_cast<T*>(nullptr));
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r] = fmaf(xf[v], wf[v], acc[r]);
        }
      }
    }
  }
  // The weights are read: the next kernel may start its launch now (dependent_launch.hpp, "when").
  pdl::allow_dependents();
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int off = kLanes / 2; off > 0; off /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
  __shared__ float partial[kDotThreads / kLanes][R];
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) partial[warp][r] = acc[r];
  }
  __syncthreads();
  if (col < p.n && slice == 0 && lane < R && lane < p.m) {
    float sum = 0.0f;
    for (int s = 0; s < p.split; ++s) sum += partial[warp + s][lane];
    store<T>(p, batch, lane, col, sum);
  }
}

template <typename T>
int launch_typed(Args p, int64_t count, cudaStream_t stream) {
  const int rows = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
  dim3 grid;
  grid.y = static_cast<unsigned>(count);
  grid.x = static_cast<unsigned>((p.n + kDotThreads / kLanes / p.split - 1) / (kDotThreads / kLanes / p.split));
  const dim3 block(kDotThreads);
  cudaError_t err = cudaSuccess;
  switch (rows) {
    case 1: err = pdl::launch(dot_kernel<T, 1>, grid, block, 0, stream, p); break;
    case 2: err = pdl::launch(dot_kernel<T, 2>, grid, block, 0, stream, p); break;
    case 4: err = pdl::launch(dot_kernel<T, 4>, grid, block, 0, stream, p); break;
    default: err = pdl::launch(dot_kernel<T, 8>, grid, block, 0, stream, p); break;
  }
  return static_cast<int>(err);
}

int itemsize(Element e) { return e == Element::kFloat32 ? 4 : 2; }

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Every row/column/batch start of a vector-read operand stays 16-byte aligned.
bool vector_strides(int64_t per_vec, int64_t count, int64_t stride) { return count <= 1 || stride % per_vec == 0; }

bool fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

// Warps per output column for the dot kernel: enough warps in flight to cover the GPU's memory
// latency (about 8192 over all columns), while each warp keeps at least two runs of K.
int dot_split(int64_t n, int64_t count, int64_t k, int per_vec) {
  const int64_t runs = (k / per_vec + kLanes - 1) / kLanes;
  int split = 1;
  while (split < 8 && n * count * split < 8192 && runs >= 2 * split * 2) split *= 2;
  return split;
}

}  // namespace

Kernel pick(Element e, const Batch& a, const Batch& b, const Batch& c, int64_t count) {
  const int64_t m = a.m.rows, k = a.m.cols, n = b.m.cols;
  if (m < 1 || m > kMaxRows || k < 1 || n < 1 || count < 1 || count > 65535) return Kernel::kNone;
  if (b.m.rows != k || c.m.rows != m || c.m.cols != n) return Kernel::kNone;
  if (!fits(k) || !fits(n) || !fits(m * n)) return Kernel::kNone;
  const int per_vec = 16 / itemsize(e);
  const bool batch_ok = count == 1 || (a.batch_stride >= 0 && b.batch_stride >= 0);
  if (!batch_ok) return Kernel::kNone;
  if (b.m.row_stride == 1 && a.m.col_stride == 1 && k % per_vec == 0 && aligned(a.m.data) && aligned(b.m.data) &&
      vector_strides(per_vec, m, a.m.row_stride) && vector_strides(per_vec, n, b.m.col_stride) &&
      vector_strides(per_vec, count, a.batch_stride) && vector_strides(per_vec, count, b.batch_stride)) {
    return Kernel::kDot;
  }
  return Kernel::kNone;
}

int launch(Kernel kernel, Element e, const Batch& a, const Batch& b, const Batch& c, int64_t count, float alpha,
           float beta, void* stream) {
  if (kernel == Kernel::kNone || pick(e, a, b, c, count) != kernel) return static_cast<int>(cudaErrorInvalidValue);
  Args p{};
  p.a = a.m.data;
  p.b = b.m.data;
  p.c = c.m.data;
  p.a_rs = a.m.row_stride, p.a_bs = a.batch_stride;
  p.b_cs = b.m.col_stride, p.b_bs = b.batch_stride;
  p.c_rs = c.m.row_stride, p.c_cs = c.m.col_stride, p.c_bs = c.batch_stride;
  p.m = static_cast<int>(a.m.rows);
  p.n = static_cast<int>(b.m.cols);
  p.k = static_cast<int>(a.m.cols);
  p.alpha = alpha;
  p.beta = beta;
  const int per_vec = 16 / itemsize(e);
  p.split = dot_split(p.n, count, p.k, per_vec);
  auto s = static_cast<cudaStream_t>(stream);
  switch (e) {
    case Element::kFloat32: return launch_typed<float>(p, count, s);
    case Element::kFloat16: return launch_typed<__half>(p, count, s);
    case Element::kBFloat16: return launch_typed<__nv_bfloat16>(p, count, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace gemv
}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
