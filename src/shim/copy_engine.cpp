// The shim's entry to the copy engine: current streams. See copy_engine.hpp.
#include "shim/copy_engine.hpp"

#include "shim/allocator.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

void* stream_for(int device) { return device >= 0 ? current_stream(device) : nullptr; }

}  // namespace

View view_of(const AtenTensorOpaque& tensor) {
  View v;
  v.data = tensor.data_ptr();
  v.sizes = tensor.sizes;
  v.strides = tensor.strides;
  v.dtype = tensor.dtype;
  v.cuda = tensor.storage->is_cuda();
  v.device = tensor.storage->device_index;
  v.pinned = tensor.storage->kind == StorageKind::kHostPinned;
  return v;
}

void copy_views(const View& dst, const View& src, bool non_blocking) {
  common::copy_views(dst, src, non_blocking, stream_for(common::copy_device(dst, src)));
}

void zero_view(const View& dst) { common::zero_view(dst, stream_for(dst.cuda ? dst.device : -1)); }

void read_single_element(const View& view, void* out) {
  common::read_single_element(view, out, stream_for(view.cuda ? view.device : -1));
}

}  // namespace shim
}  // namespace aoti_cuda
