// doctest entry point shared by the test binaries. Prints whether GPU cases
// will run, so a skipped GPU suite is always visible in the log; the GPU
// suite's program also exits with ctest's skip code then.
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
  const int rc = context.run();
#ifdef AOTI_CUDA_TEST_SKIP_CODE_WITHOUT_GPU
  // A suite of GPU cases only (the GPU suite): without a GPU, tell ctest it
  // was skipped (SKIP_RETURN_CODE), so the summary lists it as not run
  // instead of passed.
  if (rc == 0 && !aoti_cuda_test::gpu_available() && !context.shouldExit()) return AOTI_CUDA_TEST_SKIP_CODE_WITHOUT_GPU;
#endif
  return rc;
}
