// aoti_cuda shim — its side of the low layer's copy engine (private): views
// of handles, and copies on the calling thread's current stream (the shim's
// stream policy, allocator.hpp). The engine itself: common/strided_copy.hpp.
#pragma once

#include "common/dtype_convert.hpp"
#include "common/strided_copy.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {

using common::conversion_supported;
using common::convert_element;
using common::View;

/// The view of a handle's elements.
View view_of(const AtenTensorOpaque& tensor);
/// common::copy_views on the current stream of the device involved.
void copy_views(const View& dst, const View& src, bool non_blocking);
/// common::zero_view on the current stream of the view's device.
void zero_view(const View& dst);
/// common::read_single_element on the current stream of the view's device.
void read_single_element(const View& view, void* out);

}  // namespace shim
}  // namespace aoti_cuda
