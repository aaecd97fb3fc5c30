// aoti_cuda shim — stable sort along one dimension (private): the C entry point
// aoti_torch_cuda_sort_stable is in sort.cpp, the kernels (CUB radix sort) in sort.cu.
//
// The input is contiguous [outer, n, inner] (the sort dimension in the middle); each of the
// outer * inner slices of n elements is sorted independently. Order is PyTorch's: ascending
// (or descending), NaN greater than every number, -0.0 equal to 0.0, and equal elements keep
// their input order (stable, for both directions). values gets the input's elements in
// sorted order (bit-exact), indices (int64) their positions along the sort dimension.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace sortop {

struct Problem {
  const void* in = nullptr;  ///< contiguous [outer, n, inner]
  void* values = nullptr;    ///< same layout and dtype as in
  int64_t* indices = nullptr;  ///< same layout, int64
  int32_t dtype = 6;         ///< c10 code; see supported()
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
  bool descending = false;
};

/// Whether the kernels sort elements of this dtype (bool, integers up to 64 bits, float16,
/// bfloat16, float32, float64).
bool supported(int32_t dtype);

/// Largest number of elements one call sorts (CUB's item count is an int).
constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;

/// Bytes of device scratch run() needs for a problem of `elements` elements.
std::size_t scratch_bytes(int64_t elements, int64_t segments);

/// Enqueues the sort on `stream` of the current device, using `scratch` (scratch_bytes()
/// bytes, 16-byte aligned). Returns the first cudaError_t (0 = success).
int run(const Problem& p, void* scratch, std::size_t scratch_size, void* stream);

}  // namespace sortop
}  // namespace shim
}  // namespace aoti_cuda
