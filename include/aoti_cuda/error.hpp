// aoti_cuda — the one error type of the C++ API.
//
// Every failure of the C++ API is reported by throwing aoti_cuda::Error. Its
// code() says which class of failure it is (so callers can branch without
// parsing text) and what() is a complete, human-readable sentence that names
// the file, method, input or check involved.
#pragma once

#include <stdexcept>
#include <string>

#include "aoti_cuda/export.h"

namespace aoti_cuda {

/// Classes of failure. Stable: values are never renumbered.
enum class ErrorCode : int {
  kInvalidArgument = 1,   ///< caller passed something unusable (wrong dtype, shape, name...)
  kInvalidProgram = 2,    ///< a .pte/.ptd file failed a format or consistency check
  kNotFound = 3,          ///< a file, method, named-data key or symbol does not exist
  kUnsupported = 4,       ///< valid input this SDK cannot run (other backend, kernel op...)
  kIo = 5,                ///< reading, mapping or writing a file failed
  kLoad = 6,              ///< loading a model library failed (dlopen, missing symbols)
  kModel = 7,             ///< an AOTInductor container entry point returned failure
  kCuda = 8,              ///< a CUDA runtime/driver call failed
  kOutOfMemory = 9,       ///< host or device allocation failed
  kNoDevice = 10,         ///< no usable CUDA device / driver on this machine
  kInternal = 11,         ///< a bug in aoti_cuda
};

/// Short stable name of a code, e.g. "invalid_program".
inline const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidProgram: return "invalid_program";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kLoad: return "load";
    case ErrorCode::kModel: return "model";
    case ErrorCode::kCuda: return "cuda";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kNoDevice: return "no_device";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

/// The exception thrown by every aoti_cuda C++ API call. Like any exception
/// object it is an immutable value: safe to copy and to read from any thread.
///
/// Exported with default visibility so that its type_info is shared between
/// libaoti_cuda.so and the application (catch-by-type works across the .so
/// boundary).
class AOTI_CUDA_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ~Error() override;

  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace aoti_cuda
