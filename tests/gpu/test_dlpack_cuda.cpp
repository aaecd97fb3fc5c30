// DLPack interop with real CUDA memory: import a cudaMalloc'ed DLManagedTensor
// (as PyTorch/CuPy would hand over), read it back, export a device Tensor.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "aoti_cuda/dlpack.hpp"
#include "aoti_cuda/tensor.hpp"
#include "support/gpu.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Tensor;

namespace {

// A producer that owns a cudaMalloc'ed buffer and frees it in its deleter,
// like a framework's exported capsule.
struct CudaProducer {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
  int deleter_calls = 0;
};

void free_cuda_producer(DLManagedTensor* self) {
  auto* producer = static_cast<CudaProducer*>(self->manager_ctx);
  cudaFree(self->dl_tensor.data);
  self->dl_tensor.data = nullptr;
  ++producer->deleter_calls;
}

}  // namespace

TEST_CASE("dlpack cuda: a cudaMalloc'ed DLPack tensor imports zero-copy and reads back on the host" *
          AOTI_CUDA_GPU_CASE) {
  // 3x4 float values, exposed as the 4x3 transpose with a 1-element byte_offset
  // skipped: buffer holds 1 + 12 floats.
  std::vector<float> host(13);
  for (int i = 0; i < 13; ++i) host[i] = static_cast<float>(i) - 1.0f;  // host[1..12] = 0..11
  void* device_buffer = nullptr;
  REQUIRE(cudaMalloc(&device_buffer, host.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(device_buffer, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  int device = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);

  CudaProducer producer;
  producer.shape = {4, 3};
  producer.strides = {1, 4};
  DLTensor& dl = producer.managed.dl_tensor;
  dl.data = device_buffer;
  dl.byte_offset = sizeof(float);
  dl.device = DLDevice{kDLCUDA, device};
  dl.ndim = 2;
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = producer.shape.data();
  dl.strides = producer.strides.data();
  producer.managed.manager_ctx = &producer;
  producer.managed.deleter = free_cuda_producer;

  {
    Tensor t = aoti_cuda::from_dlpack(&producer.managed);
    CHECK(t.device() == Device::cuda(device));
    CHECK(t.data() == static_cast<char*>(device_buffer) + sizeof(float));

    Tensor h = t.to_host();
    REQUIRE(h.is_contiguous());
    const float* v = h.data_ptr<float>();
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 3; ++c) CHECK(v[r * 3 + c] == static_cast<float>(c * 4 + r));
    }

    // Export again and re-import: same device pointer, same device.
    DLManagedTensor* out = aoti_cuda::to_dlpack(t);
    CHECK(out->dl_tensor.device.device_type == kDLCUDA);
    CHECK(out->dl_tensor.device.device_id == device);
    CHECK(out->dl_tensor.data == t.data());
    out->deleter(out);
    CHECK(producer.deleter_calls == 0);
  }
  CHECK(producer.deleter_calls == 1);  // buffer freed exactly once, by the producer's deleter
}

TEST_CASE("dlpack cuda: a device Tensor exported to DLPack outlives the Tensor" * AOTI_CUDA_GPU_CASE) {
  DLManagedTensor* out = nullptr;
  {
    Tensor host = Tensor::empty({5}, DType::kInt32);
    for (int i = 0; i < 5; ++i) host.data_ptr<int32_t>()[i] = 10 * i;
    Tensor dev = host.to_device();
    out = aoti_cuda::to_dlpack(dev);
  }
  REQUIRE(out != nullptr);
  CHECK(out->dl_tensor.device.device_type == kDLCUDA);
  std::vector<int32_t> back(5);
  REQUIRE(cudaMemcpy(back.data(), out->dl_tensor.data, 5 * sizeof(int32_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 5; ++i) CHECK(back[i] == 10 * i);
  out->deleter(out);
}
