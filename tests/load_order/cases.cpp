// The load-order test's cases (see main.cpp): the SDK, loaded behind
// libcudart, must still bind model libraries to its hooks.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/hook_cases.hpp"

TEST_CASE("load order: libcudart's cudaEventRecord comes first in the global scope") {
  void* global = dlsym(RTLD_DEFAULT, "cudaEventRecord");
  REQUIRE(global != nullptr);
  Dl_info info{};
  REQUIRE(dladdr(global, &info) != 0);
  CHECK(std::string(info.dli_fname).find("libaoti_cuda") == std::string::npos);
}

extern "C" __attribute__((visibility("default"))) int aoti_cuda_load_order_cases(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return context.run();
}
