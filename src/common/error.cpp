// Anchors aoti_cuda::Error's vtable and type_info in libaoti_cuda.so.
#include "aoti_cuda/error.hpp"
#include "aoti_cuda/version.hpp"

namespace aoti_cuda {

Error::~Error() = default;

const char* version() noexcept { return "0.1.0"; }

}  // namespace aoti_cuda
