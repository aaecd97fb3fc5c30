// Test helper: a program of the fake "affine" model library on disk.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

namespace aoti_cuda_test {

/// The affine model's weights: y = a * w + b.
inline const std::vector<float>& affine_weights() {
  static const std::vector<float> w = {0.5f, 1.0f, 2.0f, -1.0f};
  return w;
}

/// forward(a f32[<=8,4], b f32[<=8,4]) -> (y, y) on the fake affine library
/// (tests/fake_model), written to a fresh temporary directory under $TMPDIR
/// (or /tmp) that the destructor removes.
struct AffineProgram {
  std::string dir, pte;
  AffineProgram() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/aoti_cuda_affine_XXXXXX";
    REQUIRE(mkdtemp(templ.data()) != nullptr);
    dir = templ;
    PteBuilder b;
    auto fw = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, "forward",
                               read_file(AOTI_CUDA_FAKE_MODEL_AFFINE), float_bytes(affine_weights()));
    TensorDesc x = f32({8, 4});
    x.shape_dynamism = 1;
    b.add_method(cuda_method("forward", {x, x}, {x, x}, fw));
    pte = b.build().write(dir, "affine");
  }
  ~AffineProgram() {
    std::remove(pte.c_str());
    std::remove((dir + "/aoti_cuda_blob.ptd").c_str());
    rmdir(dir.c_str());
  }
  AffineProgram(const AffineProgram&) = delete;
  AffineProgram& operator=(const AffineProgram&) = delete;
};

/// A program on the fake model libraries, written as DIR/NAME.pte + .ptd (returns the .pte path):
/// forward(a f32[rows,4], b f32[rows,4]) -> (y, y), y = a * w + b (affine fake, w = {1, 2, 3, 4}), and
/// accumulate(pos i64[1], x f32[1,4]) -> f32[4] on the kv fake, whose 16-float cache is state
/// shared by every call.
inline std::string write_affine_kv_program(const std::string& dir, const std::string& name, std::int32_t rows) {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, "forward",
                             read_file(AOTI_CUDA_FAKE_MODEL_AFFINE), float_bytes({1, 2, 3, 4}));
  b.add_method(cuda_method("forward", {f32({rows, 4}), f32({rows, 4})}, {f32({rows, 4}), f32({rows, 4})}, fw));
  auto kv = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, "accumulate",
                             read_file(AOTI_CUDA_FAKE_MODEL_KV), float_bytes(std::vector<float>(16, 0.0f)));
  b.add_method(cuda_method("accumulate", {i64({1}), f32({1, 4})}, {f32({4})}, kv));
  return b.build().write(dir, name);
}

}  // namespace aoti_cuda_test
