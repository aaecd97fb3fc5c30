// aoti_cuda shim — strided copies between host and device memory (private).
//
// copy_views() copies a strided source into a strided destination of the same
// (or broadcastable) shape, in any direction:
//   * host -> host: a coalesced loop on the CPU (memcpy of contiguous runs);
//   * anything touching CUDA with equal dtypes: after sorting dimensions by
//     destination stride and merging mergeable ones, one cudaMemcpyAsync or up
//     to kMaxSlabs cudaMemcpy2DAsync calls, enqueued on the current stream of
//     the device involved (the destination's if it is CUDA);
//   * otherwise (more slabs, zero/overlapping pitches, dtype conversion with a
//     CUDA side): staging through a host buffer that holds the covering span of
//     each CUDA operand (read-modify-write for a CUDA destination), with the
//     gather/scatter done on the CPU. Synchronous; correct but slow.
// Host memory involved in a CUDA copy is synchronized before returning unless
// non_blocking is set AND the host memory is page-locked memory of the shim.
//
// dtype conversion (host-side, any direction): between bool, uint8/16/32/64,
// int8/16/32/64, float16, bfloat16, float32 and float64. Float -> integer
// saturates and maps NaN to 0 (PyTorch leaves that undefined); integer ->
// integer wraps. complex and float8 types copy only to the same dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {

/// A strided region of memory: what a handle points at, without ownership.
struct View {
  char* data = nullptr;          ///< address of element [0, ..., 0]
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< in elements
  int32_t dtype = 6;
  bool cuda = false;
  int device = 0;                ///< CUDA ordinal (0 for host)
  bool pinned = false;           ///< host memory known to be page-locked
};

View view_of(const AtenTensorOpaque& tensor);
/// Copies src into dst (see header comment); src is broadcast to dst's sizes. Throws aoti_cuda::Error.
void copy_views(const View& dst, const View& src, bool non_blocking);
/// Fills the view's elements with zero bytes.
void zero_view(const View& dst);
/// True when a host-side conversion between the two dtypes is implemented.
bool conversion_supported(int32_t from, int32_t to) noexcept;
/// Converts one element (host memory) between dtypes; requires conversion_supported().
void convert_element(const void* src, int32_t src_dtype, void* dst, int32_t dst_dtype) noexcept;
/// Reads the first element of a 1-element view into `out` (>= itemsize bytes); CUDA: stream-ordered then synchronized.
void read_single_element(const View& view, void* out);
/// float16 / bfloat16 bit conversions (round to nearest even).
uint16_t float_to_half_bits(float value) noexcept;
float half_bits_to_float(uint16_t bits) noexcept;
uint16_t float_to_bfloat16_bits(float value) noexcept;
float bfloat16_bits_to_float(uint16_t bits) noexcept;

}  // namespace shim
}  // namespace aoti_cuda
