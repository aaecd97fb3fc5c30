// aoti_torch_cuda_mm_out / addmm_out / bmm_out on the GPU (cuBLAS), against a
// host reference: every dtype, row-major, transposed, padded and gather-strided
// operands and outputs, bias broadcasting, bmm with a broadcast batch, K = 0,
// and a CUDA-graph capture and replay. Inputs are multiples of 1/4 in [-2, 2],
// exact in every dtype, so the only rounding is the output's.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"
#include "extern_mm_support.hpp"
#include "shim/ops/gemm.hpp"
#include "support/gpu.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;
using namespace aoti_cuda_test::extern_mm;

TEST_CASE("extern mm: every dtype and operand layout against a host reference" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(7);
  const int64_t shapes[][3] = {
      {1, 64, 256}, {7, 33, 40}, {64, 96, 128}, {3, 5, 1}};
  const Layout a_layouts[] = {Layout::kRow, Layout::kColumn, Layout::kPadded,
                              Layout::kGather};
  const Layout bc_layouts[] = {Layout::kRow, Layout::kColumn};
  int checked = 0;
  for (int32_t dtype : {kF32, kF16, kBF16})
    for (const auto &s : shapes) {
      const int64_t m = s[0], n = s[1], k = s[2];
      const std::vector<float> av = random_values(m * k, rng),
                               bv = random_values(k * n, rng);
      const std::vector<float> want = reference(av, bv, m, n, k);
      for (Layout la : a_layouts)
        for (Layout lb : bc_layouts)
          for (Layout lc : {Layout::kRow, Layout::kColumn, Layout::kGather}) {
            DeviceTensor a = make({m, k}, strides_of(la, m, k), dtype, av);
            DeviceTensor b = make({k, n}, strides_of(lb, k, n), dtype, bv);
            DeviceTensor c = make({m, n}, strides_of(lc, m, n), dtype,
                                  std::vector<float>(m * n, 99.0f), 55.0f);
            const AOTITorchError rc = aoti_torch_cuda_mm_out(
                c.view.get(), a.view.get(), b.view.get());
            REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS,
                            aoti_cuda_shim_last_error());
            const std::string what =
                "mm dtype " + std::to_string(dtype) + " " + std::to_string(m) +
                "x" + std::to_string(n) + "x" + std::to_string(k) + " a " +
                name_of(la) + " b " + name_of(lb) + " out " + name_of(lc);
            check_close(c.read(), want, dtype, what);
            // Storage the output view does not cover is untouched.
            if (lc == Layout::kGather) {
              std::vector<unsigned char> raw(static_cast<std::size_t>(c.span) *
                                             item(dtype));
              REQUIRE(cudaMemcpy(raw.data(), c.storage.data(), raw.size(),
                                 cudaMemcpyDeviceToHost) == cudaSuccess);
              const float gap = dtype == kF32 ? [&] { float f; std::memcpy(&f, raw.data() + 4, 4); return f; }()
                                              : from_bits(static_cast<uint16_t>(raw[2] | (raw[3] << 8)), dtype);
              if (n > 1)
                CHECK(gap == 55.0f);
            }
            ++checked;
          }
    }
  CHECK(checked == 3 * 4 * 4 * 2 * 3);
  MESSAGE("cuBLAS loaded from "
          << std::string(aoti_cuda::shim::gemm::loaded_library()));
  CHECK(
      std::string(aoti_cuda::shim::gemm::loaded_library()).find("libcublas") !=
      std::string::npos);
}

TEST_CASE("extern addmm: bias broadcasting, beta and alpha, beta = 0 ignores "
          "NaN, in place" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(11);
  const int64_t m = 9, n = 24, k = 48;
  for (int32_t dtype : {kF32, kBF16}) {
    const std::vector<float> av = random_values(m * k, rng),
                             bv = random_values(k * n, rng);
    struct BiasShape {
      std::vector<int64_t> sizes;
      int64_t rows, cols;
    };
    const BiasShape shapes[] = {{{}, 1, 1},
                                {{n}, 1, n},
                                {{1, n}, 1, n},
                                {{m, 1}, m, 1},
                                {{m, n}, m, n}};
    for (const BiasShape &bs : shapes) {
      for (auto [beta, alpha] :
           {std::pair<float, float>{1.0f, 1.0f}, {0.5f, 2.0f}}) {
        const std::vector<float> biasv = random_values(bs.rows * bs.cols, rng);
        std::vector<int64_t> bstrides;
        int64_t stride = 1;
        for (auto it = bs.sizes.rbegin(); it != bs.sizes.rend(); ++it) {
          bstrides.insert(bstrides.begin(), stride);
          stride *= *it;
        }
        DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
        DeviceTensor b = make({k, n}, {1, k}, dtype,
                              bv); // a transposed weight, as Inductor passes it
        DeviceTensor bias = make(bs.sizes, bstrides, dtype, biasv);
        DeviceTensor c =
            make({m, n}, {n, 1}, dtype, std::vector<float>(m * n, 0.0f));
        REQUIRE_MESSAGE(aoti_torch_cuda_addmm_out(
                            c.view.get(), bias.view.get(), a.view.get(),
                            b.view.get(), beta, alpha) == AOTI_TORCH_SUCCESS,
                        aoti_cuda_shim_last_error());
        check_close(
            c.read(),
            reference(av, bv, m, n, k, alpha, beta, &biasv, bs.rows, bs.cols),
            dtype,
            "addmm bias dims " + std::to_string(bs.sizes.size()) + " rows " +
                std::to_string(bs.rows) + " beta " + std::to_string(beta));
      }
    }
    // beta = 0: self is not read, NaN included.
    DeviceTensor a = make({m, k}, {k, 1}, dtype, av);
    DeviceTensor b = make({k, n}, {n, 1}, dtype, bv);
    DeviceTensor nan_bias =
        make({n}, {1}, dtype,
             std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    DeviceTensor c =
        make({m, n}, {n, 1}, dtype, std::vector<float>(m * n, 3.0f));
    REQUIRE(aoti_torch_cuda_addmm_out(c.view.get(), nan_bias.view.get(),
                                      a.view.get(), b.view.get(), 0.0,
                                      1.0) == AOTI_TORCH_SUCCESS);
    check_close(c.read(), reference(av, bv, m, n, k), dtype,
                "addmm beta 0 with NaN self");
    // In place: self is out.
    const std::vector<float> start = random_values(m * n, rng);
    DeviceTensor d = make({m, n}, {n, 1}, dtype, start);
    REQUIRE(aoti_torch_cuda_addmm_out(d.view.get(), d.view.get(), a.view.get(),
                                      b.view.get(), 1.0,
                                      1.0) == AOTI_TORCH_SUCCESS);
    check_close(d.read(), reference(av, bv, m, n, k, 1.0f, 1.0f, &start, m, n),
                dtype, "addmm in place");
  }
}

TEST_CASE("extern bmm: batches, transposed and broadcast (stride 0) operands" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(13);
  const int64_t batch = 3, m = 5, n = 16, k = 32;
  for (int32_t dtype : {kF32, kF16, kBF16}) {
    const std::vector<float> av = random_values(batch * m * k, rng),
                             bv = random_values(k * n, rng);
    DeviceTensor a = make({batch, m, k}, {m * k, k, 1}, dtype, av);
    std::vector<float> b_expanded;
    for (int64_t i = 0; i < batch; ++i)
      b_expanded.insert(b_expanded.end(), bv.begin(), bv.end());
    DeviceTensor b = make({batch, k, n}, {0, 1, k}, dtype,
                          b_expanded); // one transposed matrix for all batches
    DeviceTensor c = make({batch, m, n}, {m * n, n, 1}, dtype,
                          std::vector<float>(batch * m * n, 0.0f));
    REQUIRE_MESSAGE(aoti_torch_cuda_bmm_out(c.view.get(), a.view.get(),
                                            b.view.get()) == AOTI_TORCH_SUCCESS,
                    aoti_cuda_shim_last_error());
    const std::vector<float> got = c.read();
    for (int64_t i = 0; i < batch; ++i) {
      const std::vector<float> ai = part(av, i, m * k);
      const std::vector<float> gi = part(got, i, m * n);
      check_close(gi, reference(ai, bv, m, n, k), dtype,
                  "bmm batch " + std::to_string(i));
    }
  }
}

TEST_CASE("extern mm: K = 0 gives zeros; empty outputs are fine" *
          AOTI_CUDA_GPU_CASE) {
  DeviceTensor a = make({4, 0}, {1, 1}, kF32, {});
  DeviceTensor b = make({0, 6}, {6, 1}, kF32, {});
  DeviceTensor c = make({4, 6}, {6, 1}, kF32, std::vector<float>(24, 7.0f));
  REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) ==
          AOTI_TORCH_SUCCESS);
  CHECK(c.read() == std::vector<float>(24, 0.0f));
  DeviceTensor a0 = make({0, 3}, {3, 1}, kF32, {});
  DeviceTensor b0 = make({3, 6}, {6, 1}, kF32, std::vector<float>(18, 1.0f));
  DeviceTensor c0 = make({0, 6}, {6, 1}, kF32, {});
  CHECK(aoti_torch_cuda_mm_out(c0.view.get(), a0.view.get(), b0.view.get()) ==
        AOTI_TORCH_SUCCESS);
}

TEST_CASE("extern mm: captured in a CUDA graph, replays with new inputs" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(17);
  const int64_t m = 1, n = 256, k = 512;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
          cudaSuccess);
  void *previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, stream, &previous) == 0);
  { // the tensors (freed on `stream`) go before the stream does
    std::vector<float> av = random_values(m * k, rng);
    const std::vector<float> bv = random_values(k * n, rng);
    DeviceTensor a = make({m, k}, {k, 1}, kBF16, av);
    DeviceTensor b = make({k, n}, {1, k}, kBF16, bv);
    DeviceTensor c =
        make({m, n}, {n, 1}, kBF16, std::vector<float>(m * n, 0.0f));
    // Warm-up outside capture (handle and this stream's workspace), as graph
    // capture does.
    REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) ==
            AOTI_TORCH_SUCCESS);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) ==
            cudaSuccess);
    const AOTITorchError rc =
        aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get());
    REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int round = 0; round < 2; ++round) {
      av = random_values(m * k, rng);
      a.write(av);
      REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      check_close(c.read(), reference(av, bv, m, n, k), kBF16,
                  "graph replay " + std::to_string(round));
    }
    REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  }
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("extern mm: operands on another device or dtype fail naming them" *
          AOTI_CUDA_GPU_CASE) {
  DeviceTensor a = make({2, 3}, {3, 1}, kF32, std::vector<float>(6, 1.0f));
  DeviceTensor c = make({2, 4}, {4, 1}, kF32, std::vector<float>(8, 0.0f));
  OwnedTensor host_b = empty({3, 4}, {}, kF32);
  aoti_cuda_shim_clear_error();
  CHECK(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), host_b.get()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("every operand must be on out's device cuda:0"));
  DeviceTensor b16 = make({3, 4}, {4, 1}, kBF16, std::vector<float>(12, 1.0f));
  CHECK(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b16.view.get()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("mat2 must have out's dtype float32"));
}

namespace {
// The GEMM nodes a capture on `stream` of one aoti_torch_cuda_mm_out records.
std::size_t captured_nodes(cudaStream_t stream, DeviceTensor &c, DeviceTensor &a, DeviceTensor &b) {
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const AOTITorchError rc = aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get());
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE_MESSAGE(rc == AOTI_TORCH_SUCCESS, aoti_cuda_shim_last_error());
  std::size_t nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  return nodes;
}
}  // namespace

// The thread's cuBLAS handle keeps the stream it was last bound to; a multiply
// on another current stream must rebind it (work on the wrong stream would be
// missing from that stream's capture, or race with the caller's next step).
TEST_CASE("extern mm: alternating current streams, each multiply runs on its own" * AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(23);
  const int64_t m = 64, n = 96, k = 128;  // 64 rows: cuBLAS, not the few-row kernels
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t &s : streams) REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  void *previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, streams[0], &previous) == 0);
  {
    const std::vector<float> bv = random_values(k * n, rng);
    DeviceTensor b = make({k, n}, {1, k}, kBF16, bv);
    for (int round = 0; round < 4; ++round) {
      cudaStream_t s = streams[round % 2];
      REQUIRE(aoti_cuda_shim_set_current_stream(0, s, nullptr) == 0);
      const std::vector<float> av = random_values(m * k, rng);
      DeviceTensor a = make({m, k}, {k, 1}, kBF16, av);
      DeviceTensor c = make({m, n}, {n, 1}, kBF16, std::vector<float>(m * n, 0.0f));
      REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) == AOTI_TORCH_SUCCESS);
      REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
      check_close(c.read(), reference(av, bv, m, n, k), kBF16, "round " + std::to_string(round));
      // The next multiply on this stream, captured: it must be in this stream's graph.
      CHECK(captured_nodes(s, c, a, b) >= 1);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
  }
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
  // As a Module does before destroying its streams: a later stream may get the same address.
  for (cudaStream_t s : streams) aoti_cuda::shim::gemm::release_stream(0, s);
  for (cudaStream_t s : streams) REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("extern mm: a released stream's workspace is freed, and multiplies after it rebind and stay right" *
          AOTI_CUDA_GPU_CASE) {
  std::mt19937 rng(29);
  const int64_t m = 64, n = 32, k = 64;  // cuBLAS, not the few-row kernels
  void *previous = nullptr;
  REQUIRE(aoti_cuda_shim_set_current_stream(0, nullptr, &previous) == 0);
  const std::vector<float> bv = random_values(k * n, rng);
  for (int round = 0; round < 3; ++round) {
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(aoti_cuda_shim_set_current_stream(0, s, nullptr) == 0);
    // A new stream may reuse the address of one an earlier test destroyed without releasing it
    // (the device run of 2026-12-04 11:26 did): drop what such a dead stream left first.
    aoti_cuda::shim::gemm::release_stream(0, s);
    const std::size_t before = aoti_cuda::shim::gemm::workspace_count();
    std::size_t free_before = 0, free_after = 0, total = 0;
    REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
    {
      const std::vector<float> av = random_values(m * k, rng);
      DeviceTensor a = make({m, k}, {k, 1}, kF32, av);
      DeviceTensor b = make({k, n}, {n, 1}, kF32, bv);
      DeviceTensor c = make({m, n}, {n, 1}, kF32, std::vector<float>(m * n, 0.0f));
      REQUIRE(aoti_torch_cuda_mm_out(c.view.get(), a.view.get(), b.view.get()) == AOTI_TORCH_SUCCESS);
      REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
      check_close(c.read(), reference(av, bv, m, n, k), kF32, "round " + std::to_string(round));
      CHECK(aoti_cuda::shim::gemm::workspace_count() == before + 1);
    }
    REQUIRE(aoti_cuda_shim_set_current_stream(0, nullptr, nullptr) == 0);
    aoti_cuda::shim::gemm::release_stream(0, s);
    CHECK(aoti_cuda::shim::gemm::workspace_count() == before);
    REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
    REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
    // The workspace (32 MiB by default) did not stay behind (from the second round on: the
    // first may create this thread's cuBLAS handle, which is kept).
    if (round > 0) CHECK(static_cast<double>(free_before) - static_cast<double>(free_after) < 2.0 * 1024 * 1024);
  }
  REQUIRE(aoti_cuda_shim_set_current_stream(0, previous, nullptr) == 0);
}
