#include "shim/error_state.hpp"

#include <cstring>

#include "aoti_cuda/shim.h"

namespace aoti_cuda {
namespace shim {
namespace {

// Fixed-size buffer: recording an error must not itself allocate (it also
// reports std::bad_alloc). Messages longer than this are truncated.
constexpr std::size_t kMaxMessage = 2048;

struct ErrorSlot {
  char message[kMaxMessage] = {0};
  ErrorCode code = ErrorCode::kInternal;
};

ErrorSlot& slot() noexcept {
  thread_local ErrorSlot s;
  return s;
}

}  // namespace

void set_last_error(ErrorCode code, const char* function, const char* message) noexcept {
  ErrorSlot& s = slot();
  s.code = code;
  const char* fn = function ? function : "aoti_torch";
  const char* msg = message ? message : "";
  std::size_t used = 0;
  auto append = [&](const char* text) {
    while (*text != '\0' && used + 1 < kMaxMessage) s.message[used++] = *text++;
  };
  append(fn);
  append(": ");
  append(msg);
  s.message[used] = '\0';
}

const char* last_error_message() noexcept { return slot().message; }

ErrorCode last_error_code() noexcept { return slot().code; }

void clear_last_error() noexcept {
  slot().message[0] = '\0';
  slot().code = ErrorCode::kInternal;
}

void throw_invalid(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

}  // namespace shim
}  // namespace aoti_cuda

extern "C" {

const char* aoti_cuda_shim_last_error(void) { return aoti_cuda::shim::last_error_message(); }

void aoti_cuda_shim_clear_error(void) { aoti_cuda::shim::clear_last_error(); }

}  // extern "C"
