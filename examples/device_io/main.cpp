// Device-resident I/O: the application owns the CUDA stream and the device
// buffers. The input lives in a buffer the application cudaMalloc'ed; the
// method runs on the application's stream without synchronizing; the output
// stays on the GPU and is copied, still in stream order, into a buffer the
// application owns. The host sees the result only after its own
// cudaStreamSynchronize.
//
//   device_io model.pte input.bin [expected.bin]   (raw little-endian float32, e.g. the
//                                                  fixtures' forward.in0.bin / forward.out0.bin)
//
// Exit status: 0 ok, 1 error or mismatch, 2 usage, 3 cannot run here (no GPU).
#include <aoti_cuda/aoti_cuda.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

std::vector<char> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw aoti_cuda::Error(aoti_cuda::ErrorCode::kNotFound, std::string("cannot open ") + path);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw aoti_cuda::Error(e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? aoti_cuda::ErrorCode::kNoDevice
                                                                                     : aoti_cuda::ErrorCode::kCuda,
                           std::string(what) + ": " + cudaGetErrorString(e));
  }
}

// A device buffer the application owns (RAII).
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { cuda_check(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s); }
};

int run(int argc, char** argv) {
  aoti_cuda::Module module(argv[1]);
  const aoti_cuda::MethodMeta meta = module.method_meta("forward");
  if (meta.inputs.size() != 1 || meta.inputs[0].dtype != aoti_cuda::DType::kFloat32) {
    std::fprintf(stderr, "this example expects a method 'forward' with one float32 input\n");
    return 2;
  }
  const std::vector<char> host_in = read_file(argv[2]);
  Stream stream;
  DeviceBuffer d_in(host_in.size());
  cuda_check(cudaMemcpyAsync(d_in.ptr, host_in.data(), host_in.size(), cudaMemcpyHostToDevice, stream.s), "upload");

  // Borrow the application's buffer: no copy, the Module never frees it.
  const aoti_cuda::Tensor x = aoti_cuda::Tensor::from_blob(d_in.ptr, meta.inputs[0].sizes, aoti_cuda::DType::kFloat32,
                                                           aoti_cuda::Device::cuda(0));
  if (x.nbytes() != host_in.size()) {
    std::fprintf(stderr, "%s is %zu bytes; the input needs %zu\n", argv[2], host_in.size(), x.nbytes());
    return 2;
  }
  aoti_cuda::RunOptions run;
  run.stream = stream.s;                               // queue on our stream; do not wait
  run.outputs = aoti_cuda::OutputLocation::kDevice;    // keep the result on the GPU
  std::vector<aoti_cuda::Tensor> y = module.execute("forward", {x}, run);

  // Copy the output, in stream order, into a buffer we own (outputs are
  // contiguous), then to the host. Dropping `y` frees the Module's output on
  // the stream it was made on (ours), after the copy.
  const std::size_t out_bytes = y[0].nbytes();
  DeviceBuffer d_out(out_bytes);
  cuda_check(cudaMemcpyAsync(d_out.ptr, y[0].data(), out_bytes, cudaMemcpyDeviceToDevice, stream.s), "copy out");
  y.clear();
  std::vector<float> host_out(out_bytes / sizeof(float));
  cuda_check(cudaMemcpyAsync(host_out.data(), d_out.ptr, out_bytes, cudaMemcpyDeviceToHost, stream.s), "download");
  cuda_check(cudaStreamSynchronize(stream.s), "cudaStreamSynchronize");  // the first point the host waits

  std::printf("forward on the application's stream: output float32[%zu], first values %g %g %g\n", host_out.size(),
              host_out[0], host_out.size() > 1 ? host_out[1] : 0.f, host_out.size() > 2 ? host_out[2] : 0.f);
  if (argc == 4) {
    const std::vector<char> want = read_file(argv[3]);
    if (want.size() != out_bytes) {
      std::fprintf(stderr, "%s is %zu bytes; the output is %zu\n", argv[3], want.size(), out_bytes);
      return 1;
    }
    const float* w = reinterpret_cast<const float*>(want.data());
    double max_err = 0;
    for (std::size_t i = 0; i < host_out.size(); ++i) max_err = std::fmax(max_err, std::fabs(host_out[i] - w[i]));
    std::printf("max |error| vs %s: %g (%s)\n", argv[3], max_err, max_err <= 1e-3 ? "ok" : "MISMATCH");
    return max_err <= 1e-3 ? 0 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s model.pte input.bin [expected.bin]\n", argv[0]);
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
