// aoti_cuda shim — recording the handles a model library creates (private).
//
// AOTInductor's container API exposes its constants only through a C++
// std::unordered_map (ExtractConstantsMap), whose ABI belongs to the model's
// own libstdc++. Module instead watches which handles the library creates
// while it installs its weights (one create_tensor_from_blob_v2 per constant,
// in constant-table order) and while it takes user-managed constants (one
// new_tensor_handle per constant), with this thread-local scope.
#pragma once

#include <vector>

#include "aoti_cuda/shim.h"

namespace aoti_cuda::shim {

/// Which creations a capture records.
enum class CreatedBy {
  kFromBlob,  ///< aoti_torch_create_tensor_from_blob(_v2): wrappers of existing memory
  kAlias,     ///< aoti_torch_new_tensor_handle: new handles of an existing tensor
};

/// While alive, every handle of kind `kind` created on this thread is
/// appended to `*out`, in creation order. An inner scope takes over until it
/// ends, then the outer one resumes.
class HandleCapture {
 public:
  HandleCapture(CreatedBy kind, std::vector<AtenTensorHandle>* out) noexcept;
  ~HandleCapture();
  HandleCapture(const HandleCapture&) = delete;
  HandleCapture& operator=(const HandleCapture&) = delete;

 private:
  CreatedBy previous_kind_;
  std::vector<AtenTensorHandle>* previous_;
};

/// Called by the shim functions above after they created `h`.
void record_created_handle(CreatedBy kind, AtenTensorHandle h) noexcept;

}  // namespace aoti_cuda::shim
