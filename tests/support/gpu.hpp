// Test helpers: is there a usable CUDA device here?
#pragma once

#include <string>

namespace aoti_cuda_test {

/// True when cudart reports at least one device and a driver.
bool gpu_available();
/// Why gpu_available() is false ("" when it is true).
const std::string& gpu_unavailable_reason();

}  // namespace aoti_cuda_test

/// Decorator for GPU test cases: skipped (and counted as skipped) without a GPU.
#define AOTI_CUDA_GPU_CASE doctest::skip(!aoti_cuda_test::gpu_available())
