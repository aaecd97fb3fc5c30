// fused_linear_bench: the fused linear kernels (src/shim/ops/fused_linear.hpp) against the plain projections they
// replace, bf16 and int4, at the 1.1 B model's decode shapes. Not a test: prints numbers.
//
//   aoti_cuda_fused_linear_bench [--reps N] [--json out.json]
//
// Why: a decode export takes 5-8 minutes to make on the GPU machine; this times each projection of a layer in a few
// seconds, so a change to the kernels (the norm prologue above all: docs/benchmarks/llm.md, "The fused linear
// operator") can be measured on its own before an export.
//
// Each row is one projection: q/k/v after the attention's RMSNorm, o plus the residual, gate/up after the FFN's
// RMSNorm with the SwiGLU, down plus the residual, the output head after the final RMSNorm. Timed as a decode step
// runs them: R back-to-back launches over R distinct copies of the weights (R x bytes >= 256 MiB, so every call
// reads HBM), captured in a CUDA graph, replayed after an L2 flush; the median per-call time of the replays.
// "plain" is the kernel the unfused export runs for the matmul alone (bf16: the few-row GEMV, int4: the
// _weight_int4pack_mm dispatch), without the RMSNorm / SwiGLU / residual kernels around it. The bf16 projections
// with a norm are also timed with each number of warps per column forced (rows "split N").
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "l2_flush.cuh"
#include "shim/ops/fused_linear.hpp"
#include "shim/ops/gemv.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"

namespace {

namespace fl = aoti_cuda::shim::fused_linear;
namespace gemm = aoti_cuda::shim::gemm;
namespace int4mm = aoti_cuda::shim::int4mm;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "fused_linear_bench: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// Device buffer of `bytes` filled with bf16 pairs of small magnitude (also valid packed int4 words).
void* filled(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  std::vector<uint32_t> words((bytes + 3) / 4);
  uint64_t s = 0x9E3779B97F4A7C15ull ^ bytes;
  for (auto& w : words) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    w = (static_cast<uint32_t>(s >> 16) & 0x007F007Fu) | 0x3C003C00u;  // bf16 in [2^-7, 2^-6)
  }
  check(cudaMemcpy(p, words.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

struct Projection {
  const char* name;
  int64_t n, k;  // weight [n, k] (int4: k as the model has it; the packing pads it to a multiple of 1024)
  bool norm, swiglu, residual;
};

// The 1.1 B model's decode layer and head (d 2048, 16 + 2 x 4 heads of 128, FFN 5632, vocab 32000).
const Projection kProjections[] = {
    {"norm + q/k/v", 3072, 2048, true, false, false},
    {"o + residual", 2048, 2048, false, false, true},
    {"norm + gate/up + SwiGLU", 11264, 2048, true, true, false},
    {"down + residual", 2048, 5632, false, false, true},
    {"norm + head", 32000, 2048, true, false, false},
};

constexpr int kGroup = 128;
int64_t padded_k(int64_t k) { return (k + 1023) / 1024 * 1024; }

// Per-call time of `copies` launches of `launch(copy)` in one CUDA graph, replayed after an L2 flush.
double per_call_us(int copies, int reps, const std::function<int(int, cudaStream_t)>& launch, void* flush,
                   std::size_t flush_bytes) {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int r = 0; r < 2; ++r) check(static_cast<cudaError_t>(launch(r, stream)), "warm-up launch");  // attributes
  check(cudaStreamSynchronize(stream), "warm-up");
  const double us = aoti_cuda_bench::captured_per_call_us(stream, copies, reps, flush, flush_bytes,
                                                          [&](int r) { return launch(r, stream); });
  cudaStreamDestroy(stream);
  return us;
}

struct Row {
  std::string weights, name;
  double bytes, plain_us, fused_us;
};

void print(const Row& r) {
  std::printf("%-4s %-34s %7.2f MB  plain %6.2f us (%5.0f GB/s)  fused %6.2f us (%5.0f GB/s)  "
              "fused - plain %+5.2f us\n",
              r.weights.c_str(), r.name.c_str(), r.bytes / 1e6, r.plain_us, r.bytes / r.plain_us / 1e3, r.fused_us,
              r.bytes / r.fused_us / 1e3, r.fused_us - r.plain_us);
}

using Launch = std::function<int(int, cudaStream_t)>;  // launches the call on weight copy r

// One projection's operands on the device: `copies` copies of its weights (int4: packed, K padded as torchao pads
// it, with their scales and zeros), the row, the norm weight, the residual and the output.
struct Operands {
  Projection pr;
  bool int4;
  int64_t kp, n_out;
  std::size_t wstride, sstride;
  double bytes;
  int copies;
  char *w = nullptr, *sz = nullptr;
  void *x = nullptr, *norm = nullptr, *residual = nullptr, *out = nullptr;

  Operands(const Projection& projection, bool int4_weights) : pr(projection), int4(int4_weights) {
    kp = int4 ? padded_k(pr.k) : pr.k;
    n_out = pr.swiglu ? pr.n / 2 : pr.n;
    const std::size_t wbytes = static_cast<std::size_t>(int4 ? pr.n * kp / 2 : pr.n * pr.k * 2);
    const std::size_t sbytes = int4 ? static_cast<std::size_t>(kp / kGroup * pr.n * 4) : 0;
    wstride = (wbytes + 255) / 256 * 256;
    sstride = (sbytes + 255) / 256 * 256;
    bytes = static_cast<double>(wbytes + sbytes);
    copies = static_cast<int>(std::min(2048.0, std::max(8.0, std::floor(256.0 * (1 << 20) / bytes) + 1)));
    w = static_cast<char*>(filled(wstride * copies));
    if (int4) sz = static_cast<char*>(filled(sstride * copies));
    x = filled(static_cast<std::size_t>(kp * 2));  // int4's plain path reads the padded row
    norm = filled(static_cast<std::size_t>(pr.k * 2));
    residual = filled(static_cast<std::size_t>(n_out * 2));
    out = filled(static_cast<std::size_t>(pr.n * 2));
  }
  ~Operands() {
    for (void* p : {static_cast<void*>(w), static_cast<void*>(sz), x, norm, residual, out}) cudaFree(p);
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;

  // The plain matmul the unfused export runs (bf16: the few-row GEMV; int4: the _weight_int4pack_mm dispatch).
  Launch plain(int sms) const {
    if (!int4) {
      return [this](int r, cudaStream_t s) {
        const gemm::Batch a{gemm::Matrix{x, 1, pr.k, pr.k, 1}, 0};
        const gemm::Batch b{gemm::Matrix{w + r * wstride, pr.k, pr.n, 1, pr.k}, 0};
        const gemm::Batch c{gemm::Matrix{out, 1, pr.n, pr.n, 1}, 0};
        return gemm::gemv::launch(gemm::gemv::Kernel::kDot, gemm::gemv::Element::kBFloat16, a, b, c, 1, 1.0f, 0.0f,
                                  s);
      };
    }
    return [this, sms](int r, cudaStream_t s) {
      int4mm::Problem p;
      p.x = x;
      p.w = w + r * wstride;
      p.sz = sz + r * sstride;
      p.out = out;
      p.m = 1;
      p.n = pr.n;
      p.k = kp;
      p.group = kGroup;
      p.inner_k_tiles = 8;
      return int4mm::launch(p, s, sms);
    };
  }

  // The fused projection; `split` forces the bf16 kernel's warps per column (0: launch()'s choice).
  Launch fused(int sms, int split) const {
    if (!int4) {
      return [this, sms, split](int r, cudaStream_t s) {
        fl::Problem p;
        p.x = x;
        p.x_row_stride = pr.k;
        p.norm_weight = pr.norm ? norm : nullptr;
        p.eps = 1e-5f;
        p.swiglu = pr.swiglu;
        p.weight = w + r * wstride;
        p.weight_row_stride = pr.k;
        p.residual = pr.residual ? residual : nullptr;
        p.residual_row_stride = n_out;
        p.out = out;
        p.rows = 1;
        p.n = pr.n;
        p.k = pr.k;
        p.split = split;
        return fl::launch(p, s, sms);
      };
    }
    return [this](int r, cudaStream_t s) {
      fl::Int4Problem p;
      p.x = x;
      p.x_row_stride = pr.k;
      p.k_x = pr.k;
      p.norm_weight = pr.norm ? norm : nullptr;
      p.eps = 1e-5f;
      p.swiglu = pr.swiglu;
      p.qdata = w + r * wstride;
      p.scale_and_zero = sz + r * sstride;
      p.k = kp;
      p.n_packed = pr.n;
      p.group = kGroup;
      p.inner_k_tiles = 8;
      p.residual = pr.residual ? residual : nullptr;
      p.residual_row_stride = n_out;
      p.out = out;
      p.rows = 1;
      p.n = pr.n;
      return fl::launch_int4(p, s);
    };
  }
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: aoti_cuda_fused_linear_bench [--reps N] [--json out.json]\n");
      return 2;
    }
  }
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    std::printf("fused_linear_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  const std::size_t flush_bytes = std::size_t{512} << 20;
  void* flush = filled(flush_bytes);
  std::vector<Row> rows;
  for (const bool int4 : {false, true}) {
    for (const Projection& pr : kProjections) {
      const Operands o(pr, int4);
      const std::string weights = int4 ? "int4" : "bf16";
      const double plain_us = per_call_us(o.copies, reps, o.plain(sms), flush, flush_bytes);
      rows.push_back({weights, pr.name, o.bytes, plain_us, per_call_us(o.copies, reps, o.fused(sms, 0), flush,
                                                                       flush_bytes)});
      print(rows.back());
      // bf16 with a norm: the staging kernel with each number of warps per column launch() can choose from (the
      // prologue's cost depends on how many blocks stage the same row: llm.md, "The fused linear operator").
      if (int4 || !pr.norm) continue;
      for (int split : {1, 2, 4, 8}) {
        rows.push_back({weights, std::string(pr.name) + " (split " + std::to_string(split) + ")", o.bytes, plain_us,
                        per_call_us(o.copies, reps, o.fused(sms, split), flush, flush_bytes)});
        print(rows.back());
      }
    }
  }
  cudaFree(flush);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "fused_linear_bench: cannot write %s\n", json.c_str());
      return 1;
    }
    std::fprintf(f, "[\n");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(f, " {\"weights\": \"%s\", \"projection\": \"%s\", \"bytes\": %.0f, \"plain_us\": %.3f, "
                   "\"fused_us\": %.3f}%s\n",
                   r.weights.c_str(), r.name.c_str(), r.bytes, r.plain_us, r.fused_us, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
  return 0;
}
