// C ABI over aoti_cuda for Python (ctypes), exchanging tensors through DLPack:
// a PyTorch CUDA tensor comes in as a DLManagedTensor*, becomes an
// aoti_cuda::Tensor without a copy, runs through the program, and the output
// goes back as a DLManagedTensor* that torch.from_dlpack adopts, again
// without a copy. See run_with_torch.py.
//
// Every function returns 0 / a valid pointer on success, and on failure
// writes "<code>: <message>" into err (NUL-terminated, truncated to err_size).
#include <aoti_cuda/aoti_cuda.hpp>
#include <aoti_cuda/dlpack.hpp>

#include <cstring>
#include <string>

namespace {

void set_error(char* err, std::size_t err_size, const std::string& text) {
  if (err == nullptr || err_size == 0) return;
  std::strncpy(err, text.c_str(), err_size - 1);
  err[err_size - 1] = '\0';
}

void set_error(char* err, std::size_t err_size, const aoti_cuda::Error& e) {
  set_error(err, err_size, std::string(aoti_cuda::to_string(e.code())) + ": " + e.what());
}

}  // namespace

extern "C" {

/// Loads a program; returns an opaque handle (nullptr on failure).
__attribute__((visibility("default"))) void* bridge_load(const char* pte_path, char* err, std::size_t err_size) {
  try {
    return new aoti_cuda::Module(pte_path);
  } catch (const aoti_cuda::Error& e) {
    set_error(err, err_size, e);
  } catch (const std::exception& e) {
    set_error(err, err_size, e.what());
  }
  return nullptr;
}

/// Runs `method` on one input. Takes ownership of `input` on success and on
/// failure alike (its deleter runs when aoti_cuda is done with it). Returns
/// the first output on the GPU as a new DLManagedTensor (the caller, i.e.
/// torch.from_dlpack, calls its deleter), or nullptr.
__attribute__((visibility("default"))) DLManagedTensor* bridge_run(void* handle, const char* method,
                                                                   DLManagedTensor* input, char* err,
                                                                   std::size_t err_size) {
  try {
    aoti_cuda::Tensor x;
    try {
      x = aoti_cuda::from_dlpack(input);
    } catch (...) {
      if (input != nullptr && input->deleter != nullptr) input->deleter(input);  // on failure the caller keeps it: drop it
      throw;
    }
    aoti_cuda::RunOptions run;
    run.outputs = aoti_cuda::OutputLocation::kDevice;  // the result stays on the GPU for PyTorch
    std::vector<aoti_cuda::Tensor> y = static_cast<aoti_cuda::Module*>(handle)->execute(method, {x}, run);
    return aoti_cuda::to_dlpack(y.at(0));
  } catch (const aoti_cuda::Error& e) {
    set_error(err, err_size, e);
  } catch (const std::exception& e) {
    set_error(err, err_size, e.what());
  }
  return nullptr;
}

__attribute__((visibility("default"))) void bridge_free(void* handle) { delete static_cast<aoti_cuda::Module*>(handle); }

}  // extern "C"
