// aoti_cuda — library version.
#pragma once

#include "aoti_cuda/export.h"

namespace aoti_cuda {

/// Version of the library the application runs against, e.g. "0.1.0".
AOTI_CUDA_API const char* version() noexcept;

}  // namespace aoti_cuda
