#include "common/layout.hpp"

#include <algorithm>
#include <numeric>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda::common {
namespace {

[[noreturn]] void throw_invalid_layout(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

}  // namespace

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

void contiguous_strides_into(const std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  strides.resize(sizes.size());  // keeps the vector's storage: no allocation once it has room
  int64_t running = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    // Sizes are validated (numel fits in int64) before this is called; max(1)
    // keeps strides of dims after a 0-size dim meaningful like PyTorch does.
    int64_t next = 0;
    if (__builtin_mul_overflow(running, std::max<int64_t>(sizes[i], 1), &next)) {
      throw_invalid_layout("contiguous strides of sizes " + format_dims(sizes) + " overflow int64");
    }
    running = next;
  }
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides;
  contiguous_strides_into(sizes, strides);
  return strides;
}

int64_t checked_numel(const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(numel, s, &numel)) {
      throw_invalid_layout("number of elements of sizes " + format_dims(sizes) + " overflows int64");
    }
  }
  return numel;
}

int64_t span_elements(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t span = 1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    int64_t term = 0;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &term) || __builtin_add_overflow(span, term, &span)) {
      throw_invalid_layout("storage span of sizes " + format_dims(sizes) + " and strides " + format_dims(strides) +
                    " overflows int64");
    }
  }
  return span;
}

std::size_t required_bytes(int64_t storage_offset, int64_t span, std::size_t itemsize) {
  int64_t elements = 0;
  int64_t bytes = 0;
  // The offset alone must stay representable in bytes even for an empty view:
  // data_ptr() adds storage_offset * itemsize to the base pointer.
  if (__builtin_mul_overflow(storage_offset, static_cast<int64_t>(itemsize), &bytes)) {
    throw_invalid_layout("storage offset " + std::to_string(storage_offset) + " overflows int64 when converted to bytes");
  }
  if (span == 0) return 0;
  if (__builtin_add_overflow(storage_offset, span, &elements) ||
      __builtin_mul_overflow(elements, static_cast<int64_t>(itemsize), &bytes)) {
    throw_invalid_layout("storage size of " + std::to_string(span) + " elements at offset " + std::to_string(storage_offset) +
                  " overflows int64");
  }
  return static_cast<std::size_t>(bytes);
}

bool is_contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) noexcept {
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
  }
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool is_non_overlapping_and_dense(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (is_contiguous(sizes, strides)) return true;
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return strides[a] < strides[b] || (strides[a] == strides[b] && sizes[a] < sizes[b]);
  });
  int64_t expected = 1;
  for (std::size_t i : order) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

}  // namespace aoti_cuda::common
