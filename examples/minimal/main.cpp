// Minimal aoti_cuda program: load an ExecuTorch CUDA program, feed it zeros
// of the right shape, print the output shapes.
//
//   minimal model.pte
#include <aoti_cuda/aoti_cuda.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s model.pte\n", argv[0]);
    return 2;
  }
  try {
    aoti_cuda::Module module(argv[1]);  // finds aoti_cuda_blob.ptd beside the .pte
    const std::string method = module.method_names().front();
    aoti_cuda::MethodMeta meta = module.method_meta(method);

    std::vector<aoti_cuda::Tensor> inputs;
    for (const aoti_cuda::TensorSpec& spec : meta.inputs) {
      aoti_cuda::Tensor t = aoti_cuda::Tensor::empty(spec.sizes, spec.dtype);  // host memory
      std::memset(t.data(), 0, t.nbytes());
      inputs.push_back(t);
    }
    std::vector<aoti_cuda::Tensor> outputs = module.execute(method, inputs);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      std::printf("output %zu: %s[", i, aoti_cuda::dtype_name(outputs[i].dtype()));
      for (std::size_t d = 0; d < outputs[i].shape().size(); ++d) {
        std::printf(d ? ",%lld" : "%lld", static_cast<long long>(outputs[i].shape()[d]));
      }
      std::printf("]\n");
    }
    return 0;
  } catch (const aoti_cuda::Error& e) {
    std::fprintf(stderr, "aoti_cuda error (%s): %s\n", aoti_cuda::to_string(e.code()), e.what());
    // Without a GPU the program cannot run; that is expected on build machines.
    return e.code() == aoti_cuda::ErrorCode::kNoDevice ? 0 : 1;
  }
}
