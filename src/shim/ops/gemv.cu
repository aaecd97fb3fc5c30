// aoti_cuda shim — kernels for matrix multiplies with few rows (see gemv.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "shim/ops/gemv.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {
namespace gemv {
namespace {

constexpr int kLanes = 32;
constexpr int kDotThreads = 256;     // 8 warps
constexpr int kAxpyThreads = 512;     // up to 128 registers a thread: 8 rows x 8 columns of sums fit
constexpr int kAxpyMaxPerThread = 32;  // k values one axpy thread sums at most
constexpr int kUnroll = 4;           // dot: 16-byte loads of b in flight per thread per round
// axpy: the same; 8 rows of sums leave registers for 4 (more would spill), fewer rows for 8.
template <int R>
constexpr int kAxpyUnroll = R >= 8 ? 4 : 8;

// 16 bytes of T as floats.
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
  int64_t a_rs, a_cs, a_bs;  // element strides: row, column, batch
  int64_t b_rs, b_cs, b_bs;
  int64_t c_rs, c_cs, c_bs;
  int m, n, k;
  int split;  // dot: warps per output column; axpy: threads along N (the rest split K)
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

// axpy: columns [V * j, V * j + V) of c, j = blockIdx.x * split + threadIdx.x % split, are
// sum over k of a[:, k] * b[k, those columns]; b's rows are contiguous. The block's
// kAxpyThreads / split groups of threads take every (kAxpyThreads / split)-th k; lanes of a
// warp with the same j, then warps (through shared memory, one row at a time), sum.
template <typename T, int R>
__global__ void __launch_bounds__(kAxpyThreads) axpy_kernel(Args p) {
  constexpr int V = Vec<T>::kCount;
  const int tn = p.split;
  const int kt = kAxpyThreads / tn;
  const int j = threadIdx.x % tn;
  const int slice = threadIdx.x / tn;
  const int64_t vec = static_cast<int64_t>(blockIdx.x) * tn + j;
  const int64_t batch = blockIdx.y;
  const int nvecs = p.n / V;
  float acc[R][V];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[r][v] = 0.0f;
  if (vec < nvecs) {
    const T* b = static_cast<const T*>(p.b) + batch * p.b_bs + vec * V;
    const T* a = static_cast<const T*>(p.a) + batch * p.a_bs;
    for (int k0 = slice; k0 < p.k; k0 += kt * kAxpyUnroll<R>) {
      // Every load of the round first (b's rows and a's values), then the arithmetic.
      uint4 bv[kAxpyUnroll<R>];
      float xs[kAxpyUnroll<R>][R];
#pragma unroll
      for (int u = 0; u < kAxpyUnroll<R>; ++u) {
        const int k = k0 + u * kt;
        if (k < p.k) {
          bv[u] = __ldcs(reinterpret_cast<const uint4*>(b + k * p.b_rs));
#pragma unroll
          for (int r = 0; r < R; ++r) xs[u][r] = r < p.m ? to_float(__ldg(a + r * p.a_rs + k * p.a_cs)) : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kAxpyUnroll<R>; ++u) {
        const int k = k0 + u * kt;
        if (k >= p.k) break;
        float bf[V];
        unpack(bv[u], bf, static_cast<T*>(nullptr));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r >= p.m) break;
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r][v] = fmaf(xs[u][r], bf[v], acc[r][v]);
        }
      }
    }
  }
  // Lanes j, j + tn, j + 2 tn, ... of a warp hold the same columns.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v)
      for (int off = tn; off < kLanes; off *= 2) acc[r][v] += __shfl_xor_sync(0xffffffffu, acc[r][v], off);
  // Then the warps: lanes < tn of each warp hold its sums (tn <= 32).
  __shared__ float partial[kAxpyThreads / kLanes][kLanes * V];
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int warps = kAxpyThreads / kLanes;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= p.m) break;
    if (lane < tn) {
#pragma unroll
      for (int v = 0; v < V; ++v) partial[warp][lane * V + v] = acc[r][v];
    }
    __syncthreads();
    const int out = threadIdx.x;  // (column j, element v) pairs: tn * V <= 256 threads
    if (out < tn * V) {
      const int oj = out / V, ov = out % V;
      const int64_t ovec = static_cast<int64_t>(blockIdx.x) * tn + oj;
      if (ovec < nvecs) {
        float sum = 0.0f;
        for (int w = 0; w < warps; ++w) sum += partial[w][oj * V + ov];
        store<T>(p, batch, r, ovec * V + ov, sum);
      }
    }
    __syncthreads();
  }
}

template <typename T>
int launch_typed(Kernel kernel, Args p, int64_t count, cudaStream_t stream) {
  const int rows = p.m <= 1 ? 1 : p.m <= 2 ? 2 : p.m <= 4 ? 4 : 8;
  dim3 grid;
  grid.y = static_cast<unsigned>(count);
  if (kernel == Kernel::kDot) {
    grid.x = static_cast<unsigned>((p.n + kDotThreads / kLanes / p.split - 1) / (kDotThreads / kLanes / p.split));
    switch (rows) {
      case 1: dot_kernel<T, 1><<<grid, kDotThreads, 0, stream>>>(p); break;
      case 2: dot_kernel<T, 2><<<grid, kDotThreads, 0, stream>>>(p); break;
      case 4: dot_kernel<T, 4><<<grid, kDotThreads, 0, stream>>>(p); break;
      default: dot_kernel<T, 8><<<grid, kDotThreads, 0, stream>>>(p); break;
    }
  } else {
    const int nvecs = p.n / Vec<T>::kCount;
    grid.x = static_cast<unsigned>((nvecs + p.split - 1) / p.split);
    switch (rows) {
      case 1: axpy_kernel<T, 1><<<grid, kAxpyThreads, 0, stream>>>(p); break;
      case 2: axpy_kernel<T, 2><<<grid, kAxpyThreads, 0, stream>>>(p); break;
      case 4: axpy_kernel<T, 4><<<grid, kAxpyThreads, 0, stream>>>(p); break;
      default: axpy_kernel<T, 8><<<grid, kAxpyThreads, 0, stream>>>(p); break;
    }
  }
  return static_cast<int>(cudaGetLastError());
}

int itemsize(Element e) { return e == Element::kFloat32 ? 4 : 2; }

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Every row/column/batch start of a vector-read operand stays 16-byte aligned.
bool vector_strides(int64_t per_vec, int64_t count, int64_t stride) { return count <= 1 || stride % per_vec == 0; }

bool fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

int next_pow2(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// Warps per output column for the dot kernel: enough warps in flight to cover the GPU's memory
// latency (about 8192 over all columns), while each warp keeps at least two runs of K.
int dot_split(int64_t n, int64_t count, int64_t k, int per_vec) {
  const int64_t runs = (k / per_vec + kLanes - 1) / kLanes;
  int split = 1;
  while (split < 8 && n * count * split < 8192 && runs >= 2 * split * 2) split *= 2;
  return split;
}

// Threads along N for the axpy kernel (its block's other threads split K): at least two (32-byte
// segments of b's rows), more while that leaves over 512 blocks (about four per SM), at most 32 and
// no more than the columns need.
int axpy_columns(int64_t n, int64_t count, int per_vec) {
  const int64_t nvecs = n / per_vec;
  const int most = next_pow2(static_cast<int>(nvecs < kLanes ? nvecs : kLanes));
  int tn = most < 2 ? most : 2;
  while (tn < most && (nvecs + tn - 1) / tn * count > 512) tn *= 2;
  return tn;
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
  if (b.m.col_stride == 1 && n % per_vec == 0 && aligned(b.m.data) && vector_strides(per_vec, k, b.m.row_stride) &&
      vector_strides(per_vec, count, b.batch_stride)) {
    const int tn = axpy_columns(n, count, per_vec);
    if ((k + kAxpyThreads / tn - 1) / (kAxpyThreads / tn) <= kAxpyMaxPerThread) return Kernel::kAxpy;
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
  p.a_rs = a.m.row_stride, p.a_cs = a.m.col_stride, p.a_bs = a.batch_stride;
  p.b_rs = b.m.row_stride, p.b_cs = b.m.col_stride, p.b_bs = b.batch_stride;
  p.c_rs = c.m.row_stride, p.c_cs = c.m.col_stride, p.c_bs = c.batch_stride;
  p.m = static_cast<int>(a.m.rows);
  p.n = static_cast<int>(b.m.cols);
  p.k = static_cast<int>(a.m.cols);
  p.alpha = alpha;
  p.beta = beta;
  const int per_vec = 16 / itemsize(e);
  p.split = kernel == Kernel::kDot ? dot_split(p.n, count, p.k, per_vec) : axpy_columns(p.n, count, per_vec);
  auto s = static_cast<cudaStream_t>(stream);
  switch (e) {
    case Element::kFloat32: return launch_typed<float>(kernel, p, count, s);
    case Element::kFloat16: return launch_typed<__half>(kernel, p, count, s);
    case Element::kBFloat16: return launch_typed<__nv_bfloat16>(kernel, p, count, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace gemv
}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
