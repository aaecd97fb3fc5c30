// Writes the fake programs the Python package's CPU tests load (tests/python/conftest.py):
//
//   aoti_cuda_fake_programs OUT_DIR
//     OUT_DIR/affine/affine.pte  forward(a f32[<=8,4], b f32[<=8,4]) -> (y, y), y = a * w + b,
//                                w = {0.5, 1, 2, -1} (the fake "affine" library; b[0] == -777 makes it fail)
//     OUT_DIR/state/state.pte    forward(a f32[2,4], b f32[2,4]) -> (y, y), w = {1, 2, 3, 4};
//                                write(x f32[1,4], pos i64[1]) -> f32[4] and write_too(x, pos) -> f32[4]:
//                                cache[pos] = x, returns the column sums of the 4x4 cache (the fake "kv"
//                                library; buffer "kv.cache", initially 1, 2, ..., 16, one copy per method
//                                unless shared)
//   each beside its aoti_cuda_blob.ptd. Exit status 0, or 1 with a message.
#include <sys/stat.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "support/pte_builder.hpp"

using namespace aoti_cuda_test;

namespace {

void add_affine(PteBuilder& b, const std::string& name, TensorDesc x, const std::vector<float>& w) {
  auto blobs = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, name, read_file(FAKE_AFFINE_SO), float_bytes(w));
  b.add_method(cuda_method(name, {x, x}, {x, x}, blobs));
}

// (x f32[1,4], pos i64[1]) -> f32[4]; the library takes (pos, x).
void add_kv(PteBuilder& b, const std::string& name, const std::vector<float>& init) {
  auto blobs = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, name, read_file(FAKE_KV_SO), float_bytes(init));
  b.add_method(fake_kv_method(name, blobs));
}

std::string subdir(const std::string& root, const std::string& name) {
  const std::string d = root + "/" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 1;
  }
  try {
    const std::string root = argv[1];
    ::mkdir(root.c_str(), 0755);
    {
      PteBuilder b;
      TensorDesc x = f32({8, 4});
      x.shape_dynamism = 1;  // DYNAMIC_BOUND: rows 0..8
      add_affine(b, "forward", x, {0.5f, 1.0f, 2.0f, -1.0f});
      std::printf("%s\n", b.build().write(subdir(root, "affine"), "affine").c_str());
    }
    {
      PteBuilder b;
      add_affine(b, "forward", f32({2, 4}), {1.0f, 2.0f, 3.0f, 4.0f});
      std::vector<float> init(16);
      for (int i = 0; i < 16; ++i) init[i] = static_cast<float>(i + 1);
      add_kv(b, "write", init);
      add_kv(b, "write_too", init);
      std::printf("%s\n", b.build().write(subdir(root, "state"), "state").c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoti_cuda_fake_programs: %s\n", e.what());
    return 1;
  }
  return 0;
}
