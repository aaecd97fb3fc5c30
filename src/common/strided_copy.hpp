// Private low layer: the one strided copy engine (shim copies, Tensor copies).
//
// copy_views() copies a strided source into a strided destination of the same
// (or broadcastable) shape, in any direction:
//   * host -> host: a coalesced loop on the CPU (memcpy of contiguous runs);
//   * anything touching CUDA with equal dtypes: after sorting dimensions by
//     destination stride and merging mergeable ones, one cudaMemcpyAsync or up
//     to 1024 cudaMemcpy2DAsync calls (the 2-D fast path), enqueued on `stream`;
//   * device to device on one device with equal dtypes, when that fails: one
//     strided-copy kernel (strided_copy_kernel.hpp), enqueued on `stream`;
//   * otherwise (more slabs, zero/overlapping pitches, dtype conversion with a
//     CUDA side): staging through a host buffer that holds the covering span of
//     each CUDA operand (read-modify-write for a CUDA destination), with the
//     gather/scatter done on the CPU. Synchronous; correct but slow.
// Overlapping source and destination are copied through a temporary.
// Host memory involved in a CUDA copy is synchronized before returning unless
// non_blocking is set AND the host memory is page-locked (View::pinned).
// A device-to-device copy is only enqueued (stream-ordered).
//
// `stream` is the stream of the device copy_device(dst, src) (the caller
// picks it: the shim its thread's current stream, Tensor the caller's);
// nullptr is the legacy default stream. dtype conversion: dtype_convert.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aoti_cuda::common {

/// A strided region of memory, without ownership.
struct View {
  char* data = nullptr;          ///< address of element [0, ..., 0]
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  ///< in elements
  int32_t dtype = 6;
  bool cuda = false;
  int device = 0;                ///< CUDA ordinal (0 for host)
  bool pinned = false;           ///< host memory known to be page-locked
};

/// The CUDA device a copy between the two views runs on (-1: host only).
int copy_device(const View& dst, const View& src) noexcept;
/// Copies src into dst (see header comment); src is broadcast to dst's sizes. Throws aoti_cuda::Error.
void copy_views(const View& dst, const View& src, bool non_blocking, void* stream);
/// The device-to-device kernel path of copy_views on its own, for callers with sizes and strides
/// at hand (no View, so nothing is allocated): enqueues the copy on `stream` of the current device
/// (strided_copy_kernel.hpp) and returns true, or returns false, having done nothing, when the
/// kernel cannot express it. Throws aoti_cuda::Error when the launch fails.
bool copy_by_kernel(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                    const int64_t* sizes, int ndim, std::size_t element_bytes, void* stream);
/// Fills the view's elements with zero bytes (stream-ordered on `stream` for CUDA).
void zero_view(const View& dst, void* stream);
/// Reads the first element of a 1-element view into `out` (>= itemsize bytes); CUDA: on `stream`, then synchronized.
void read_single_element(const View& view, void* out, void* stream);

}  // namespace aoti_cuda::common
