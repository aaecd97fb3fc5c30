// Shim operator: aoti_torch_cuda__weight_int4pack_mm (int4 weight-only linear layers, the
// fallback kernel ExecuTorch's CUDA backend keeps for torchao `tile_packed_to_4d` weights).
// Validation, output allocation and dispatch here; the kernels are in weight_int4pack_mm.cu and
// weight_int4pack_gemv.cu.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/gemm.hpp"
#include "shim/ops/weight_int4pack_mm.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kInt32 = static_cast<int32_t>(DType::kInt32);
// The kernels index with 32-bit rows/columns/k.
constexpr int64_t kMaxExtent = int64_t{1} << 30;

std::string describe_dims(const AtenTensorOpaque& t) { return format_dims(t.sizes); }

void expect_tensor(const AtenTensorOpaque& t, const char* name, int32_t dtype, int64_t dim) {
  expect(t.dtype == dtype,
         [&] { return std::string(name) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype); });
  expect(t.dim() == dim, [&] {
    return std::string(name) + " must be " + std::to_string(dim) + "-d, got " + std::to_string(t.dim()) + "-d " +
           describe_dims(t);
  });
  expect(t.is_contiguous(), [&] {
    return std::string(name) + " must be contiguous (sizes " + describe_dims(t) + ", strides " +
           format_dims(t.strides) + ")";
  });
}

// Checks every operand against PyTorch's contract (see weight_int4pack_mm.hpp) and returns
// the problem without device pointers. Only metadata is read, so CPU tensors get the same
// shape/dtype diagnostics as CUDA ones; the device checks come last.
int4mm::Problem validate(const AtenTensorOpaque& x, const AtenTensorOpaque& w, int64_t group,
                         const AtenTensorOpaque& sz) {
  expect_tensor(x, "self (activations)", kBFloat16, 2);
  expect_tensor(w, "mat2 (packed int4 weight)", kInt32, 4);
  const int64_t words = w.sizes[3];
  expect(w.sizes[2] == 32 && (words == 1 || words == 2 || words == 4), [&] {
    return "mat2 (packed int4 weight) must be [N/8, K/(innerKTiles*16), 32, innerKTiles/2] with innerKTiles 2, 4 "
           "or 8, got " +
           describe_dims(w);
  });
  expect(group == 32 || group == 64 || group == 128 || group == 256,
         [&] { return "qGroupSize must be 32, 64, 128 or 256, got " + std::to_string(group); });
  int4mm::Problem p;
  p.inner_k_tiles = static_cast<int>(words * 2);
  p.group = static_cast<int>(group);
  p.m = x.sizes[0];
  p.k = x.sizes[1];
  p.n = w.sizes[0] * 8;
  const int64_t k_super = 16 * p.inner_k_tiles;
  expect(p.k > 0 && p.k % k_super == 0 && p.k / k_super == w.sizes[1], [&] {
    return "self has K = " + std::to_string(p.k) + " but mat2 " + describe_dims(w) +
           " packs K = " + std::to_string(w.sizes[1] * k_super) +
           " (a positive multiple of innerKTiles*16 = " + std::to_string(k_super) + ")";
  });
  expect(p.k % group == 0,
         [&] { return "K = " + std::to_string(p.k) + " is not a multiple of qGroupSize " + std::to_string(group); });
  expect(p.m < kMaxExtent && p.n < kMaxExtent && p.k < kMaxExtent, [&] {
    return "M, N and K must each be below 2^30, got M = " + std::to_string(p.m) + ", N = " + std::to_string(p.n) +
           ", K = " + std::to_string(p.k);
  });
  expect_tensor(sz, "qScaleAndZeros", kBFloat16, 3);
  expect(sz.sizes[0] == p.k / group && sz.sizes[1] == p.n && sz.sizes[2] == 2, [&] {
    return "qScaleAndZeros must be [K/qGroupSize, N, 2] = [" + std::to_string(p.k / group) + ", " +
           std::to_string(p.n) + ", 2], got " + describe_dims(sz);
  });
  return p;
}

int device_of(const AtenTensorOpaque& t, const char* name) {
  if (!t.storage->is_cuda()) throw_invalid(std::string(name) + " must be a CUDA tensor, got " + t.describe());
  return t.storage->device_index;
}

void expect_aligned(const void* ptr, uintptr_t alignment, const char* name) {
  expect(reinterpret_cast<uintptr_t>(ptr) % alignment == 0, [&] {
    return std::string(name) + " data must be " + std::to_string(alignment) + "-byte aligned (the kernels use " +
           "vector loads)";
  });
}

// Large M (prefill): the multiply is compute-bound, where cuBLAS's bf16 GEMMs beat the int4
// kernels (which dequantize every weight once per 64 rows of M). So the weights are
// dequantized once into scratch, in slices of at most kDequantSliceBytes, and each slice
// multiplied by cuBLAS. The smallest M that takes this path is the calling Module's
// TuningOptions::int4_dequant_min_m (op_settings.hpp; 65 by default, 0 turns it off).
constexpr std::size_t kDequantSliceBytes = std::size_t{64} << 20;
std::atomic<bool> g_cublas_missing{false};

bool use_dequantized_path(int64_t m) {
  const int64_t min_m = op_settings().int4_dequant_min_m;
  return min_m > 0 && m >= min_m && !g_cublas_missing.load(std::memory_order_relaxed);
}

// Returns false (nothing enqueued) when cuBLAS cannot be opened: the caller then runs the
// int4 kernels, which need nothing else.
bool multiply_dequantized(const int4mm::Problem& p, int device, void* stream) {
  common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr,
                                    "aoti_cuda _weight_int4pack_mm (dequantize + cuBLAS)", stream);
  const int64_t slice_rows = std::max<int64_t>(8, static_cast<int64_t>(kDequantSliceBytes / (p.k * 2)) / 8 * 8);
  const int64_t rows = std::min(slice_rows, p.n);
  StreamScratch dense(static_cast<std::size_t>(rows * p.k * 2), device, stream);
  for (int64_t n0 = 0; n0 < p.n; n0 += rows) {
    const int64_t count = std::min(rows, p.n - n0);
    const int err = int4mm::dequantize(p, n0, count, dense.get(), stream);
    if (err != 0) throw_cuda_error(err, "int4 weight dequantize kernel launch");
    // out[:, n0:n0+count] = x · dense^T: dense^T is K x count with unit row stride.
    gemm::Batch a{{const_cast<void*>(p.x), p.m, p.k, p.k, 1}, 0};
    gemm::Batch b{{dense.get(), p.k, count, 1, p.k}, 0};
    gemm::Batch c{{static_cast<char*>(p.out) + n0 * 2, p.m, count, p.n, 1}, 0};
    try {
      gemm::multiply(kBFloat16, a, b, c, 1, 1.0f, 0.0f, device, stream);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kLoad || n0 != 0) throw;
      g_cublas_missing.store(true, std::memory_order_relaxed);  // no cuBLAS: the int4 kernels from now on
      return false;
    }
  }
  timed.done(true);
  return true;
}

AtenTensorHandle weight_int4pack_mm(AtenTensorHandle self, AtenTensorHandle mat2, int64_t group,
                                    AtenTensorHandle scale_zeros) {
  const AtenTensorOpaque& x = *checked_defined(self, "self");
  const AtenTensorOpaque& w = *checked_defined(mat2, "mat2");
  const AtenTensorOpaque& sz = *checked_defined(scale_zeros, "qScaleAndZeros");
  int4mm::Problem p = validate(x, w, group, sz);
  const int device = device_of(x, "self (activations)");
  expect(device_of(w, "mat2 (packed int4 weight)") == device && device_of(sz, "qScaleAndZeros") == device, [&] {
    return "self, mat2 and qScaleAndZeros must be on the same CUDA device, got " + x.describe() + ", " + w.describe() +
           ", " + sz.describe();
  });
  p.x = x.data_ptr();
  p.w = w.data_ptr();
  p.sz = sz.data_ptr();
  p.weights_early = is_program_constant(w) && is_program_constant(sz);  // with dependent launch only
  expect_aligned(p.x, 16, "self (activations)");
  expect_aligned(p.w, 16, "mat2 (packed int4 weight)");
  expect_aligned(p.sz, 4, "qScaleAndZeros");

  const int64_t out_sizes[2] = {p.m, p.n};
  HandleGuard out;
  out.handle = new_empty_strided("aoti_torch_cuda__weight_int4pack_mm output", 2, out_sizes, nullptr, kBFloat16,
                                 static_cast<int32_t>(DeviceType::kCUDA), device, false);
  p.out = out.handle->data_ptr();
  DeviceSwitch on_device(device);
  void* stream = current_stream(device);
  if (use_dequantized_path(p.m) && multiply_dequantized(p, device, stream)) return out.release();
  common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr, "aoti_cuda _weight_int4pack_mm", stream);
  const int err = int4mm::launch(p, stream, multiprocessor_count(device));
  timed.done(err == 0);
  if (err != 0) throw_cuda_error(err, "int4 weight-only matmul kernel launch");
  return out.release();
}

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

AOTITorchError aoti_torch_cuda__weight_int4pack_mm(AtenTensorHandle self, AtenTensorHandle mat2, int64_t qGroupSize,
                                                   AtenTensorHandle qScaleAndZeros, AtenTensorHandle* ret0) {
  return aoti_cuda::shim::shim_call(__func__, [&] {
    AtenTensorHandle& out = aoti_cuda::shim::out_param(ret0, "ret0");
    out = nullptr;
    out = aoti_cuda::shim::weight_int4pack_mm(self, mat2, qGroupSize, qScaleAndZeros);
  });
}

}  // extern "C"
