// Test cases of the CUDA hook binding (src/runtime/cuda_hooks.hpp) that must
// hold whatever order the process loaded CUDA and aoti_cuda in. Included by
// the CPU unit tests (the SDK linked into the test program) and by the
// load-order test (libcudart first in the global scope, libaoti_cuda.so
// loaded RTLD_LOCAL behind it, as in a Python process after `import torch`).
#pragma once

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

namespace aoti_cuda_test::hooks {

/// A symbol of whichever loaded library defines it, even one loaded
/// RTLD_LOCAL from a memfd (found through the loader's list of objects).
inline void* loaded_symbol(const char* name) {
  struct Search {
    const char* name;
    void* found;
  } search{name, nullptr};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || *info->dlpi_name == '\0') return 0;
        void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (h == nullptr) return 0;
        s->found = dlsym(h, s->name);
        dlclose(h);
        return s->found != nullptr ? 1 : 0;
      },
      &search);
  return search.found;
}

/// forward(a f32[B,4], b f32[B,4]) on the fake library that imports the hooked
/// CUDA functions (tests/fake_model "affine_cuda").
inline std::string write_hooked_program(const std::string& dir) {
  PteBuilder b;
  auto fw = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, "forward",
                             read_file(AOTI_CUDA_FAKE_MODEL_AFFINE_CUDA), float_bytes({0.5f, 1.0f, 2.0f, -1.0f}));
  TensorDesc x = f32({8, 4});
  x.shape_dynamism = 1;
  b.add_method(cuda_method("forward", {x, x}, {x, x}, fw));
  return b.build().write(dir, "hooked");
}

inline aoti_cuda::Tensor row(float first) {
  aoti_cuda::Tensor t = aoti_cuda::Tensor::empty({1, 4}, aoti_cuda::DType::kFloat32);
  float* p = t.data_ptr<float>();
  p[0] = first;
  p[1] = p[2] = p[3] = 1.0f;
  return t;
}

inline aoti_cuda::LoadOptions cpu() {
  aoti_cuda::LoadOptions o;
  o.device = aoti_cuda::Device::cpu();
  return o;
}

}  // namespace aoti_cuda_test::hooks

TEST_CASE("cuda hooks: a model library's CUDA imports are bound to the SDK's hooks, not to libcudart") {
  using namespace aoti_cuda_test::hooks;
  aoti_cuda_test::TempDir dir;
  aoti_cuda::Module m(write_hooked_program(dir.path), cpu());
  const aoti_cuda::LoadStats& stats = m.load_stats();
  REQUIRE(stats.libraries.size() == 1);
  const std::vector<std::string>& hooked = stats.libraries[0].hooked;
  for (const char* name : {"cuLaunchKernel", "cuModuleLoadData", "cudaEventRecord", "cudaMemcpy", "fputs"}) {
    CAPTURE(name);
    CHECK(std::find(hooked.begin(), hooked.end(), name) != hooked.end());
  }
  CHECK(stats.libraries[0].warnings.empty());
  // What the library's code calls is neither the global definition (libcudart's
  // or libc's) nor null (the driver functions are weak and unresolved here).
  auto* bound_to = reinterpret_cast<void* (*)(const char*)>(loaded_symbol("fake_model_import"));
  REQUIRE((bound_to != nullptr));
  for (const char* name : {"cudaEventRecord", "cudaMemcpy", "fputs", "cuLaunchKernel", "cuModuleLoadData"}) {
    CAPTURE(name);
    void* called = bound_to(name);
    CHECK(called != nullptr);
    CHECK(called != dlsym(RTLD_DEFAULT, name));
  }
  // Nothing else in the process sees the hooks: the global names are CUDA's own.
  void* global_record = dlsym(RTLD_DEFAULT, "cudaEventRecord");
  REQUIRE(global_record != nullptr);
  Dl_info info{};
  REQUIRE(dladdr(global_record, &info) != 0);
  CHECK(std::string(info.dli_fname).find("cudart") != std::string::npos);
}

TEST_CASE("cuda hooks: what the model prints to stderr when it fails reaches the Error, and the Module stays usable") {
  using namespace aoti_cuda_test::hooks;
  aoti_cuda_test::TempDir dir;
  aoti_cuda::Module m(write_hooked_program(dir.path), cpu());
  try {
    (void)m.forward({row(1.0f), row(-778.0f)});
    FAIL("the failing run did not throw");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kModel);
    CHECK(std::string(e.what()).find("the fake model refuses b[0] = -778") != std::string::npos);
  }
  const std::vector<aoti_cuda::Tensor> out = m.forward({row(2.0f), row(1.0f)});
  REQUIRE(out.size() == 2);
  CHECK(out[0].data_ptr<float>()[0] == doctest::Approx(2.0f * 0.5f + 1.0f));
}
