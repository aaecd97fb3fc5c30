// gemv_bench: the few-row matrix multiply kernels (src/shim/ops/gemv.cu) against cuBLAS on the
// same operands, at the shapes of an LLM's decode step. Not a test: prints numbers.
//
//   aoti_cuda_gemv_bench [--iters N] [--rows M]
//
// cuBLAS is reached through aoti_torch_cuda_mm_out / bmm_out with the few-row limit at 0 (an
// OpSettingsScope around main's multiplies, as a Module with TuningOptions::gemv_max_rows = 0
// installs it); the kernels are compiled in and launched directly. Each timed
// call follows a kernel that reads 512 MiB, so the weights come from HBM as in a decode step
// (the H200's L2 holds 60 MB), and is timed alone between two events (which adds a few µs to
// both); the median is reported, with the bandwidth of reading b once and the largest
// difference between the two results.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "l2_flush.cuh"
#include "shim/op_settings.hpp"
#include "shim/ops/gemv.hpp"

namespace {

namespace gemm = aoti_cuda::shim::gemm;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "gemv_bench: %s: %s / %s\n", what, cudaGetErrorString(cudaGetLastError()),
                 aoti_cuda_shim_last_error());
    std::exit(1);
  }
}

// A bf16 device tensor with the given sizes/strides over `elements` random small values.
AtenTensorHandle tensor(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t elements,
                        uint32_t seed) {
  std::vector<uint16_t> v(static_cast<std::size_t>(elements));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x = static_cast<uint16_t>(0x3C00u | (s & 0x807Fu));  // +-[2^-7, 2^-6)
  }
  AtenTensorHandle storage = nullptr, view = nullptr;
  check(aoti_torch_empty_strided(1, &elements, nullptr, 15, 1, 0, &storage) == 0, "allocation");
  void* p = nullptr;
  aoti_torch_get_data_ptr(storage, &p);
  check(cudaMemcpy(p, v.data(), v.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess, "cudaMemcpy");
  check(aoti_torch__reinterpret_tensor(storage, static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), 0,
                                       &view) == 0,
        "view");
  aoti_torch_delete_tensor_object(storage);  // the view keeps the storage
  return view;
}

void* data(AtenTensorHandle t) {
  void* p = nullptr;
  aoti_torch_get_data_ptr(t, &p);
  return p;
}

float bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  const char* name;
  int64_t count, m, n, k;
  bool transposed;  // b as a transposed weight / cache (the kernel's layout), else rows (cuBLAS only)
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  std::vector<int64_t> rows = {1, 4};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--rows" && i + 1 < argc) rows = {std::atoll(argv[++i])};
    else {
      std::fprintf(stderr, "usage: %s [--iters N] [--rows M]\n", argv[0]);
      return 2;
    }
  }
  aoti_cuda::shim::OpSettings cublas_only;
  cublas_only.gemv_max_rows = 0;  // the shim's own path: cuBLAS
  const aoti_cuda::shim::OpSettingsScope on_cublas(&cublas_only);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0) == cudaSuccess, "cudaGetDeviceProperties");
  std::printf("device %s, %d SMs; bf16, median of %d single calls after an L2 flush\n", prop.name,
              prop.multiProcessorCount, iters);
  const std::size_t flush_bytes = std::size_t(512) << 20;
  void* flush = nullptr;
  check(cudaMalloc(&flush, flush_bytes) == cudaSuccess, "cudaMalloc");
  check(cudaMemset(flush, 1, flush_bytes) == cudaSuccess, "cudaMemset");

  const Case cases[] = {
      {"wqkv", 1, 0, 3072, 2048, true},   {"wo", 1, 0, 2048, 2048, true},     {"w1/w3", 1, 0, 5632, 2048, true},
      {"w2", 1, 0, 2048, 5632, true},     {"lm_head", 1, 0, 32000, 2048, true}, {"q.K^T", 4, 4, 1024, 128, true},
      {"p.V", 4, 4, 128, 1024, false},
  };
  std::printf("%-8s %5s %3s %6s %6s %12s %12s %9s %9s %10s\n", "case", "batch", "M", "N", "K", "cuBLAS us",
              "kernel us", "cuBLAS/k", "GB/s", "max diff");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess, "events");
  for (int64_t mrows : rows) {
    for (const Case& cs : cases) {
      const int64_t m = cs.m != 0 ? cs.m : mrows, n = cs.n, k = cs.k, count = cs.count;
      AtenTensorHandle a = tensor({count, m, k}, {m * k, k, 1}, count * m * k, 1);
      AtenTensorHandle b = cs.transposed ? tensor({count, k, n}, {n * k, 1, k}, count * n * k, 2)
                                         : tensor({count, k, n}, {n * k, n, 1}, count * n * k, 2);
      AtenTensorHandle c1 = tensor({count, m, n}, {m * n, n, 1}, count * m * n, 3);
      AtenTensorHandle c2 = tensor({count, m, n}, {m * n, n, 1}, count * m * n, 4);
      const gemm::Batch ga{gemm::Matrix{data(a), m, k, k, 1}, m * k};
      gemm::Batch gb{gemm::Matrix{data(b), k, n, 1, k}, n * k};
      if (!cs.transposed) gb.m = gemm::Matrix{data(b), k, n, n, 1};
      const gemm::Batch gc{gemm::Matrix{data(c2), m, n, n, 1}, m * n};
      const auto kernel = gemm::gemv::pick(gemm::gemv::Element::kBFloat16, ga, gb, gc, count);
      double med[2] = {0, 0};
      for (int which = 0; which < 2; ++which) {
        std::vector<double> times;
        for (int i = -3; i < iters; ++i) {
          aoti_cuda_bench::flush_l2(flush, flush_bytes);
          check(cudaEventRecord(start, nullptr) == cudaSuccess, "record");
          if (which == 0) {
            check(aoti_torch_cuda_bmm_out(c1, a, b) == 0, "cuBLAS bmm");
          } else {
            if (kernel == gemm::gemv::Kernel::kNone) break;
            check(gemm::gemv::launch(kernel, gemm::gemv::Element::kBFloat16, ga, gb, gc, count, 1.0f, 0.0f,
                                     nullptr) == 0,
                  "kernel");
          }
          check(cudaEventRecord(stop, nullptr) == cudaSuccess, "record");
          check(cudaEventSynchronize(stop) == cudaSuccess, "sync");
          float ms = 0;
          cudaEventElapsedTime(&ms, start, stop);
          if (i >= 0) times.push_back(ms * 1000.0);
        }
        if (times.empty()) continue;
        std::sort(times.begin(), times.end());
        med[which] = times[times.size() / 2];
      }
      std::vector<uint16_t> r1(static_cast<std::size_t>(count * m * n)), r2(r1.size());
      check(cudaMemcpy(r1.data(), data(c1), r1.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "read");
      check(cudaMemcpy(r2.data(), data(c2), r2.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "read");
      double diff = 0;
      for (std::size_t i = 0; i < r1.size(); ++i) diff = std::max(diff, std::fabs(double(bf16(r1[i])) - bf16(r2[i])));
      const double bytes = 2.0 * count * n * k;
      if (med[1] > 0) {
        std::printf("%-8s %5lld %3lld %6lld %6lld %12.2f %12.2f %9.2f %9.0f %10.2g\n", cs.name, (long long)count,
                    (long long)m, (long long)n, (long long)k, med[0], med[1], med[0] / med[1], bytes / med[1] / 1e3,
                    diff);
      } else {
        std::printf("%-8s %5lld %3lld %6lld %6lld %12.2f %12s\n", cs.name, (long long)count, (long long)m,
                    (long long)n, (long long)k, med[0], "n/a");
      }
      for (AtenTensorHandle t : {a, b, c1, c2}) aoti_torch_delete_tensor_object(t);
    }
  }
  return 0;
}
