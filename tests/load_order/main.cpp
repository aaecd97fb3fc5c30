// The load-order test's program: it puts CUDA's own libraries first in the
// process's global symbol scope (libcudart, and libcuda when one can be
// found: the driver, else the toolkit's stub), as an application linked in
// that order or a Python process after `import torch` has them, and only then
// loads the SDK, RTLD_LOCAL, through the library holding the test cases (as
// Python loads an extension module). Linked against neither CUDA nor the SDK.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (dlopen(AOTI_CUDA_CUDART_PATH, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "load-order test: cannot load libcudart first: %s\n", dlerror());
    return 1;
  }
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (driver == nullptr) driver = dlopen(AOTI_CUDA_DRIVER_STUB_PATH, RTLD_NOW | RTLD_GLOBAL);
  std::printf("load-order test: libcudart%s in the global scope before libaoti_cuda\n",
              driver != nullptr ? " and libcuda" : " (no libcuda found)");
  void* cases = dlopen(AOTI_CUDA_LOAD_ORDER_CASES, RTLD_NOW | RTLD_LOCAL);
  if (cases == nullptr) {
    std::fprintf(stderr, "load-order test: cannot load the cases: %s\n", dlerror());
    return 1;
  }
  using Run = int (*)(int, char**);
  auto run = reinterpret_cast<Run>(dlsym(cases, "aoti_cuda_load_order_cases"));
  if (run == nullptr) {
    std::fprintf(stderr, "load-order test: the cases library has no entry point\n");
    return 1;
  }
  return run(argc, argv);
}
