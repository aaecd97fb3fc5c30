// The load-order test's program: it puts CUDA's own libraries first in the
// process's global symbol scope (libcudart, and libcuda when one can be
// found: the driver, else the toolkit's stub), as an application linked in
// that order or a Python process after `import torch` has them, and only then
// loads the SDK, RTLD_LOCAL, through the library holding the test cases (as
// Python loads an extension module). Linked against neither CUDA nor the SDK.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>
#include <string>

int main(int argc, char** argv) {
  // The toolkit's libcudart where it was configured, else by soname (the GPU machine runs a
  // copy of this build with its toolkit elsewhere).
  void* cudart = nullptr;
  for (const char* name : {AOTI_CUDA_CUDART_PATH, "libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
    if (cudart == nullptr) cudart = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  }
  if (cudart == nullptr) {
    std::fprintf(stderr, "load-order test: cannot load libcudart first: %s\n", dlerror());
    return 1;
  }
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (driver == nullptr) driver = dlopen(AOTI_CUDA_DRIVER_STUB_PATH, RTLD_NOW | RTLD_GLOBAL);
  std::printf("load-order test: libcudart%s in the global scope before libaoti_cuda\n",
              driver != nullptr ? " and libcuda" : " (no libcuda found)");
  // The cases library: beside this program (a copied build), else where it was built.
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string beside = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string();
  beside = beside.substr(0, beside.rfind('/') + 1) + "libaoti_cuda_load_order_cases.so";
  void* cases = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (cases == nullptr) cases = dlopen(AOTI_CUDA_LOAD_ORDER_CASES, RTLD_NOW | RTLD_LOCAL);
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
