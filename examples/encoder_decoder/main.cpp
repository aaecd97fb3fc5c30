// A multi-method program: `encode` then `decode` (tests/fixtures/encdec), the
// intermediate tensor staying on the GPU between the two calls.
//
//   encoder_decoder encdec.pte encode.in0.bin [encode.out0.bin]
//
// The optional reference checks the encoder's output (copied to the host
// only for that check). Exit status: 0 ok, 1 error or mismatch, 2 usage,
// 3 cannot run here (no GPU).
#include <aoti_cuda/aoti_cuda.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

std::vector<char> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw aoti_cuda::Error(aoti_cuda::ErrorCode::kNotFound, std::string("cannot open ") + path);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

int run(int argc, char** argv) {
  aoti_cuda::Module module(argv[1]);  // loads both methods (LoadOptions::methods selects fewer)
  const aoti_cuda::MethodMeta enc = module.method_meta("encode");
  aoti_cuda::Tensor x = aoti_cuda::Tensor::empty(enc.inputs.at(0).sizes, enc.inputs.at(0).dtype);
  const std::vector<char> bytes = read_file(argv[2]);
  if (bytes.size() != x.nbytes()) {
    std::fprintf(stderr, "%s is %zu bytes; 'encode' takes %zu\n", argv[2], bytes.size(), x.nbytes());
    return 2;
  }
  std::memcpy(x.data(), bytes.data(), bytes.size());

  aoti_cuda::RunOptions on_gpu;
  on_gpu.outputs = aoti_cuda::OutputLocation::kDevice;  // the code stays on the GPU...
  const std::vector<aoti_cuda::Tensor> code = module.execute("encode", {x}, on_gpu);
  std::printf("encode: %s[%lld,%lld] on %s\n", aoti_cuda::dtype_name(code[0].dtype()),
              static_cast<long long>(code[0].shape()[0]), static_cast<long long>(code[0].shape()[1]),
              code[0].device().is_cuda() ? "the GPU" : "the host");

  aoti_cuda::RunOptions to_host;
  to_host.outputs = aoti_cuda::OutputLocation::kHost;
  const std::vector<aoti_cuda::Tensor> y = module.execute("decode", code, to_host);  // ...and goes straight in
  const float* out = static_cast<const float*>(y[0].data());
  std::printf("decode: float32[%lld,%lld], first values %g %g %g\n", static_cast<long long>(y[0].shape()[0]),
              static_cast<long long>(y[0].shape()[1]), out[0], out[1], out[2]);

  if (argc == 4) {
    const aoti_cuda::Tensor code_host = code[0].to_host();
    const std::vector<char> want = read_file(argv[3]);
    if (want.size() != code_host.nbytes()) {
      std::fprintf(stderr, "%s is %zu bytes; the code is %zu\n", argv[3], want.size(), code_host.nbytes());
      return 1;
    }
    double max_err = 0;
    for (int64_t i = 0; i < code_host.numel(); ++i) {
      max_err = std::fmax(max_err, std::fabs(static_cast<const float*>(code_host.data())[i] -
                                             reinterpret_cast<const float*>(want.data())[i]));
    }
    std::printf("encode output vs %s: max |error| %g (%s)\n", argv[3], max_err, max_err <= 1e-3 ? "ok" : "MISMATCH");
    return max_err <= 1e-3 ? 0 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s encdec.pte encode.in0.bin [encode.out0.bin]\n", argv[0]);
    return 2;
  }
  try {
    return run(argc, argv);
  } catch (const aoti_cuda::Error& e) {
    const bool cannot_run = e.code() == aoti_cuda::ErrorCode::kNoDevice || e.code() == aoti_cuda::ErrorCode::kUnsupported;
    std::fprintf(stderr, "%s (%s): %s\n", cannot_run ? "cannot run here" : "error", aoti_cuda::to_string(e.code()), e.what());
    return cannot_run ? 3 : 1;
  }
}
