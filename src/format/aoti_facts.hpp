// Private format layer: facts an AOTInductor model library states in its own
// bytes, read without loading it.
#pragma once

#include <map>
#include <vector>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda::format {

/// Which dimensions of which inputs the library accepts at varying sizes:
/// delegate input index -> dimensions (sorted). AOTInductor compiles an input
/// check whose messages name every checked dimension: "input_handles[i]: dim
/// value is too large at d" for a dimension with a range, "unmatched dim value
/// at d" for a fixed one. Empty when the library has no such checks.
std::map<int, std::vector<int>> aoti_dynamic_input_dims(ByteView so);

}  // namespace aoti_cuda::format
