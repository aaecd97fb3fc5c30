// Private low layer: strided-layout arithmetic shared by the shim, the copy
// engine and the runtime (sizes and strides in elements, overflow-checked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace aoti_cuda::common {

/// Formats a list of int64 as "[a, b, c]".
std::string format_dims(const std::vector<int64_t>& dims);
/// Row-major contiguous strides for `sizes` (size-0 dims count as 1); throws kInvalidArgument on overflow.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);
/// The same, written into `strides` (resized; its storage reused).
void contiguous_strides_into(const std::vector<int64_t>& sizes, std::vector<int64_t>& strides);
/// Number of elements; throws kInvalidArgument on overflow.
int64_t checked_numel(const std::vector<int64_t>& sizes);
/// Elements a strided layout spans: 1 + sum (size_i - 1) * stride_i, 0 if any size is 0; throws on overflow.
int64_t span_elements(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
/// Bytes needed for offset + span elements of `itemsize`; throws on overflow.
std::size_t required_bytes(int64_t storage_offset, int64_t span, std::size_t itemsize);
/// True for row-major contiguous layouts (size-1 dims ignored; anything with a 0 size counts as contiguous).
bool is_contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) noexcept;
/// True when the elements occupy exactly numel consecutive slots in some dimension order.
bool is_non_overlapping_and_dense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);

}  // namespace aoti_cuda::common
