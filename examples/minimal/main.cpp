// Minimal aoti_cuda program: load an ExecuTorch CUDA program, run its default
// method on an input file (raw little-endian .bin, e.g. the fixtures'
// forward.in0.bin) or on zeros, print the outputs.
//
//   minimal model.pte [input.bin]
//
// Exit status: 0 ok, 1 error, 2 usage, 3 cannot run on this machine (no GPU).
#include <aoti_cuda/aoti_cuda.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s model.pte [input.bin]\n", argv[0]);
    return 2;
  }
  try {
    aoti_cuda::Module module(argv[1]);  // finds aoti_cuda_blob.ptd beside the .pte
    const std::string method = module.default_method();  // "forward", else the first method
    const aoti_cuda::MethodMeta meta = module.method_meta(method);

    std::vector<aoti_cuda::Tensor> inputs;
    for (const aoti_cuda::TensorSpec& spec : meta.inputs) {
      aoti_cuda::Tensor t = aoti_cuda::Tensor::empty(spec.sizes, spec.dtype);  // host memory
      std::memset(t.data(), 0, t.nbytes());
      inputs.push_back(t);
    }
    if (argc == 3) {  // one input file for the first input
      std::ifstream f(argv[2], std::ios::binary);
      // (istreambuf_iterator reads the buffer directly: the stream's eof bit tells nothing here)
      const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (!f.is_open() || inputs.empty() || bytes.size() != inputs[0].nbytes()) {
        std::fprintf(stderr, "%s: cannot read %zu bytes for input 0\n", argv[2], inputs.empty() ? 0 : inputs[0].nbytes());
        return 2;
      }
      std::memcpy(inputs[0].data(), bytes.data(), bytes.size());
    }
    const std::vector<aoti_cuda::Tensor> outputs = module.execute(method, inputs);  // host in -> host out
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      std::printf("%s output %zu: %s[", method.c_str(), i, aoti_cuda::dtype_name(outputs[i].dtype()));
      for (std::size_t d = 0; d < outputs[i].shape().size(); ++d) {
        std::printf(d ? ",%lld" : "%lld", static_cast<long long>(outputs[i].shape()[d]));
      }
      std::printf("]");
      if (outputs[i].dtype() == aoti_cuda::DType::kFloat32 && outputs[i].numel() > 0) {
        std::printf(" first %g", static_cast<const float*>(outputs[i].data())[0]);
      }
      std::printf("\n");
    }
    return 0;
  } catch (const aoti_cuda::Error& e) {
    const bool cannot_run = e.code() == aoti_cuda::ErrorCode::kNoDevice || e.code() == aoti_cuda::ErrorCode::kUnsupported;
    std::fprintf(stderr, "%s (%s): %s\n", cannot_run ? "cannot run here" : "error", aoti_cuda::to_string(e.code()), e.what());
    return cannot_run ? 3 : 1;
  }
}
