// doctest entry point shared by the test binaries. Prints whether GPU cases
// will run, so a skipped GPU suite is always visible in the log.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support/gpu.hpp"

int main(int argc, char** argv) {
  if (aoti_cuda_test::gpu_available()) {
    std::printf("[aoti_cuda tests] CUDA device present: GPU test cases will run\n");
  } else {
    std::printf("[aoti_cuda tests] GPU test cases SKIPPED: %s\n",
                aoti_cuda_test::gpu_unavailable_reason().c_str());
  }
  std::fflush(stdout);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
