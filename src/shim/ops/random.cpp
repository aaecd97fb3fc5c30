// Shim operators: aoti_torch_cuda_rand and aoti_torch_cuda_randint_low_out (torch.rand /
// torch.randint on the GPU, which ExecuTorch 1.3+ programs call, e.g. for sampling).
// Validation and outputs here; the generator and kernels are in random.cu (random.hpp).
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/random.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

// PyTorch's default generator seed: a fixed value, so runs are reproducible by default.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

struct SeedSetting {
  uint64_t seed = kDefaultSeed;
  std::string error;  // non-empty: AOTI_CUDA_RNG_SEED is not a number
};

const SeedSetting& seed_setting() {
  static const SeedSetting setting = [] {
    SeedSetting s;
    const char* text = std::getenv("AOTI_CUDA_RNG_SEED");
    if (text == nullptr || *text == '\0') return s;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
      s.error = std::string("AOTI_CUDA_RNG_SEED must be an unsigned 64-bit integer, got '") + text + "'";
    } else {
      s.seed = v;
    }
    return s;
  }();
  return setting;
}

uint64_t seed() {
  const SeedSetting& s = seed_setting();
  if (!s.error.empty()) throw_invalid(s.error);
  return s.seed;
}

void run_fill(randop::Problem& p, int device) {
  p.seed = seed();
  if (p.count == 0) return;
  DeviceSwitch on_device(device);
  void* stream = current_stream(device);
  StreamScratch base(sizeof(uint64_t), device, stream);
  const int err = randop::fill(p, base.get(), stream);
  if (err != 0) throw_cuda_error(err, "random fill kernels");
}

AtenTensorHandle make_rand(const int64_t* size, int64_t ndim, const int32_t* dtype, const int32_t* layout,
                      const int32_t* device_type, int32_t device_index) {
  const int32_t type = dtype ? *dtype : static_cast<int32_t>(DType::kFloat32);
  expect(randop::supports_uniform(type), [&] {
    return std::string("dtype must be float16, bfloat16, float32 or float64, got ") + dtype_name(type);
  });
  expect(layout == nullptr || *layout == 0,
         [&] { return "layout must be strided (0), got " + std::to_string(*layout); });
  expect(device_type == nullptr || *device_type == static_cast<int32_t>(DeviceType::kCUDA), [&] {
    return "device must be CUDA (" + std::to_string(static_cast<int>(DeviceType::kCUDA)) + "), got " +
           std::to_string(*device_type);
  });
  const int device = resolve_cuda_device(device_index);
  HandleGuard out;
  out.handle = new_empty_strided("rand", ndim, size, nullptr, type, static_cast<int32_t>(DeviceType::kCUDA), device,
                                 false);
  randop::Problem p;
  p.out = out.handle->data_ptr();
  p.count = out.handle->numel();
  p.dtype = type;
  run_fill(p, device);
  return out.release();
}

// The integer range a dtype holds, for the check that [low, high) fits (float types: any).
bool representable(int32_t dtype, int64_t v) {
  switch (dtype) {
    case 0: return v >= 0 && v <= 255;
    case 1: return v >= -128 && v <= 127;
    case 2: return v >= std::numeric_limits<int16_t>::min() && v <= std::numeric_limits<int16_t>::max();
    case 3: return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case 27: return v >= 0 && v <= std::numeric_limits<uint16_t>::max();
    case 28: return v >= 0 && v <= std::numeric_limits<uint32_t>::max();
    case 29: return v >= 0;
    default: return true;
  }
}

void randint_low_out(AtenTensorHandle out_handle, int64_t low, int64_t high, const int64_t* size, int64_t ndim) {
  AtenTensorOpaque& out = *checked_defined(out_handle, "out");
  std::vector<int64_t> sizes, strides;
  read_shape("size", ndim, size, nullptr, sizes, strides);
  expect(sizes == out.sizes, [&] {
    return "size " + format_dims(sizes) + " must equal out's sizes " + format_dims(out.sizes) +
           " (out is not resized)";
  });
  expect(high > low, [&] {
    return "high must be greater than low, got low = " + std::to_string(low) + ", high = " + std::to_string(high);
  });
  expect(randop::supports_integers(out.dtype),
         [&] { return std::string("out must have an integer or floating dtype, got ") + dtype_name(out.dtype); });
  expect(representable(out.dtype, low) && representable(out.dtype, high - 1), [&] {
    return "[" + std::to_string(low) + ", " + std::to_string(high) + ") does not fit in out's dtype " +
           dtype_name(out.dtype);
  });
  if (!out.storage->is_cuda()) throw_invalid("out must be a CUDA tensor, got " + out.describe());
  expect(out.is_non_overlapping_and_dense(),
         [&] { return "out must be non-overlapping and dense, got " + out.describe(); });
  randop::Problem p;
  p.out = out.data_ptr();
  p.count = out.numel();
  p.dtype = out.dtype;
  p.integers = true;
  p.low = low;
  p.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  run_fill(p, out.storage->device_index);
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda_rand(const int64_t* size, int64_t size_len_, int32_t* dtype, int32_t* layout,
                                    int32_t* device, int32_t device_index_, int32_t* pin_memory,
                                    AtenTensorHandle* ret0) {
  (void)pin_memory;  // meaningful only for CPU tensors
  return aoti_cuda::shim::shim_call(__func__, [&] {
    AtenTensorHandle& out = aoti_cuda::shim::out_param(ret0, "ret0");
    out = nullptr;
    out = aoti_cuda::shim::make_rand(size, size_len_, dtype, layout, device, device_index_);
  });
}

AOTITorchError aoti_torch_cuda_randint_low_out(AtenTensorHandle out, int64_t low, int64_t high, const int64_t* size,
                                               int64_t size_len_) {
  return aoti_cuda::shim::shim_call(__func__,
                                    [&] { aoti_cuda::shim::randint_low_out(out, low, high, size, size_len_); });
}

}  // extern "C"
