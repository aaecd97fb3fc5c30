// cublas_variants: which cuBLAS entry point to use for an LLM prefill's GEMMs. Not a test:
// prints numbers. For each shape (rows M of activations, weight [N, K] row-major, C = A · Wᵀ, bf16
// in and out, fp32 accumulation), times on the same operands:
//   batched1  cublasGemmStridedBatchedEx with a batch of one (what the shim calls today),
//   gemm      cublasGemmEx (PyTorch's path for mm without bias),
//   lt        cublasLtMatmul with the heuristic's first algorithm,
//   lt_best   cublasLtMatmul with the fastest of the heuristic's first eight, timed here.
// Each variant runs back to back `iters` times between two events (the weights then stay in L2
// for the smaller shapes, as they do not in a model; the comparison between variants is what
// counts). Usage: aoti_cuda_cublas_variants [--iters N] [--rows M,M,...]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

struct Shape {
  int n, k;
  const char* name;
};

template <class F>
float time_ms(F&& f, int iters, cudaStream_t s) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 3; ++i) f();
  check(cudaEventRecord(a, s), "record");
  for (int i = 0; i < iters; ++i) f();
  check(cudaEventRecord(b, s), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

// The handles, workspace and operands every shape uses (operands sized for the largest).
struct Setup {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  __nv_bfloat16 *a = nullptr, *w = nullptr, *c = nullptr;

  Setup() {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    check(cublasCreate(&blas), "cublasCreate");
    check(cublasSetStream(blas, stream), "cublasSetStream");
    check(cublasLtCreate(&lt), "cublasLtCreate");
    check(cudaMalloc(&ws, ws_bytes), "workspace");
    check(cublasSetWorkspace(blas, ws, ws_bytes), "cublasSetWorkspace");
    check(cudaMalloc(&a, 4096ull * 5632 * 2), "a");
    check(cudaMalloc(&w, 32000ull * 5632 * 2), "w");
    check(cudaMalloc(&c, 4096ull * 32000 * 2), "c");
    check(cudaMemset(a, 0x3c, 4096ull * 5632 * 2), "memset");
    check(cudaMemset(w, 0x3b, 32000ull * 5632 * 2), "memset");
  }
};

// cuBLASLt's description of C = A · Wᵀ for one shape, with up to eight heuristic algorithms.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur[8];
  int found = 0;

  LtPlan(const Setup& st, const Shape& s, int m) {
    check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    check(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k), "la");
    check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, m, s.k), "lb");
    check(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.n, m, s.n), "lc");
    check(cublasLtMatmulPreferenceCreate(&pref), "pref");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &st.ws_bytes,
                                               sizeof st.ws_bytes),
          "pref ws");
    check(cublasLtMatmulAlgoGetHeuristic(st.lt, op, la, lb, lc, lc, pref, 8, heur, &found), "heuristic");
  }
  ~LtPlan() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
};

// Times the four variants on one shape and prints a row.
void time_shape(const Setup& st, const Shape& s, int m, int iters) {
  const float alpha = 1.f, beta = 0.f;
  // Column-major view: C^T [N, M] = W [K, N]^T (op T, ld K) x A^T [K, M] (op N, ld K).
  auto batched = [&] {
    check(cublasGemmStridedBatchedEx(st.blas, CUBLAS_OP_T, CUBLAS_OP_N, s.n, m, s.k, &alpha, st.w, CUDA_R_16BF, s.k, 0,
                                     st.a, CUDA_R_16BF, s.k, 0, &beta, st.c, CUDA_R_16BF, s.n, 0, 1,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "batched");
  };
  auto gemm = [&] {
    check(cublasGemmEx(st.blas, CUBLAS_OP_T, CUBLAS_OP_N, s.n, m, s.k, &alpha, st.w, CUDA_R_16BF, s.k, st.a,
                       CUDA_R_16BF, s.k, &beta, st.c, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT_TENSOR_OP),
          "gemm");
  };
  const LtPlan plan(st, s, m);
  auto lt_run = [&](int i) {
    check(cublasLtMatmul(st.lt, plan.op, &alpha, st.w, plan.la, st.a, plan.lb, &beta, st.c, plan.lc, st.c, plan.lc,
                         &plan.heur[i].algo, st.ws, st.ws_bytes, st.stream),
          "ltmatmul");
  };
  const float t_batched = time_ms(batched, iters, st.stream);
  const float t_gemm = time_ms(gemm, iters, st.stream);
  const float t_lt = plan.found > 0 ? time_ms([&] { lt_run(0); }, iters, st.stream) : -1.f;
  float t_best = t_lt;
  for (int i = 1; i < plan.found; ++i) t_best = std::min(t_best, time_ms([&] { lt_run(i); }, iters, st.stream));
  const double flop = 2.0 * m * s.n * s.k;
  const float best = std::min({t_batched, t_gemm, t_lt > 0 ? t_lt : 1e9f, t_best > 0 ? t_best : 1e9f});
  std::printf("%-8s %5d %6d %6d | %9.1f %9.1f %9.1f %9.1f | %.0f  (lt candidates %d; µs)\n", s.name, m, s.n, s.k,
              t_batched * 1e3, t_gemm * 1e3, t_lt * 1e3, t_best * 1e3, flop / (best * 1e-3) / 1e12, plan.found);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  std::vector<int> rows{128, 512};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rows")) {
      rows.clear();
      for (const char* p = argv[i + 1]; *p;) {
        rows.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    }
  }
  // A 1.1 B Llama layer (d 2048, 4 KV heads x 128, FFN 5632): fused qkv, output, fused
  // gate+up, down; and the output head (vocab 32000).
  const Shape shapes[] = {{3072, 2048, "qkv"}, {2048, 2048, "o"}, {11264, 2048, "gate_up"},
                          {2048, 5632, "down"}, {32000, 2048, "head"}};
  const Setup st;
  std::printf("%-8s %5s %6s %6s | %9s %9s %9s %9s | TFLOP/s best\n", "shape", "M", "N", "K", "batched1", "gemm",
              "lt", "lt_best");
  for (int m : rows) {
    for (const Shape& s : shapes) time_shape(st, s, m, iters);
  }
  return 0;
}
