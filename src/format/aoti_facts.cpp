// aoti_dynamic_input_dims: scans the library's bytes for the messages of
// AOTInductor's generated input check (see aoti_facts.hpp). Every read stays
// inside the buffer; a malformed match is skipped.
#include "format/aoti_facts.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace aoti_cuda::format {
namespace {

// Parses a decimal number at p (at most 6 digits, within end); -1 when none.
int number_at(const char* p, const char* end, const char** after) {
  int v = 0, digits = 0;
  while (p < end && digits < 6 && *p >= '0' && *p <= '9') {
    v = v * 10 + (*p++ - '0');
    ++digits;
  }
  *after = p;
  return digits == 0 ? -1 : v;
}

}  // namespace

std::map<int, std::vector<int>> aoti_dynamic_input_dims(ByteView so) {
  std::map<int, std::vector<int>> out;
  if (so.data == nullptr) return out;
  constexpr std::string_view kHead = "input_handles[";
  constexpr std::string_view kMid = "]: dim value is too large at ";
  const char* p = reinterpret_cast<const char*>(so.data);
  const char* const end = p + so.size;
  while (p < end) {
    const void* hit = memmem(p, static_cast<std::size_t>(end - p), kHead.data(), kHead.size());
    if (hit == nullptr) break;
    const char* q = static_cast<const char*>(hit) + kHead.size();
    p = q;
    const int input = number_at(q, end, &q);
    if (input < 0 || static_cast<std::size_t>(end - q) < kMid.size() || std::memcmp(q, kMid.data(), kMid.size()) != 0) {
      continue;
    }
    const int dim = number_at(q + kMid.size(), end, &q);
    if (dim < 0) continue;
    std::vector<int>& dims = out[input];
    if (std::find(dims.begin(), dims.end(), dim) == dims.end()) dims.insert(std::upper_bound(dims.begin(), dims.end(), dim), dim);
  }
  return out;
}

}  // namespace aoti_cuda::format
