// aoti_cuda shim — error reporting across the C ABI (private).
//
// Every extern "C" shim function runs its body through shim_call(), which
// turns any exception (aoti_cuda::Error, std::bad_alloc, anything else) into
// AOTI_TORCH_FAILURE plus a thread-local message and code, so nothing ever
// unwinds into the model library. A successful call does NOT clear the last
// error: when Run fails, the model unwinds its RAII handles through successful
// delete_tensor_object calls, and the host still wants the original reason.
#pragma once

#include <cstdint>
#include <string>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda {
namespace shim {

/// Records `message` (prefixed with the shim function name by shim_call) as this thread's last error.
void set_last_error(ErrorCode code, const char* function, const char* message) noexcept;
/// Last error message on this thread ("" if none).
const char* last_error_message() noexcept;
/// Code of the last error on this thread (kInternal if none was recorded since the last clear).
ErrorCode last_error_code() noexcept;
/// Forgets this thread's last error.
void clear_last_error() noexcept;

/// Throws aoti_cuda::Error(kInvalidArgument, message).
[[noreturn]] void throw_invalid(const std::string& message);

/// Throws aoti_cuda::Error(kInvalidArgument, message()) unless `ok`. The message
/// is built only when the check fails: checks on a call's path run every call,
/// where building strings costs microseconds and heap allocations.
template <class Message>
void expect(bool ok, Message&& message) {
  if (!ok) throw_invalid(message());
}

/// Runs `body` and converts every exception into AOTI_TORCH_FAILURE (1) + recorded message.
template <class Body>
int32_t shim_call(const char* function, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const Error& e) {
    set_last_error(e.code(), function, e.what());
  } catch (const std::bad_alloc&) {
    set_last_error(ErrorCode::kOutOfMemory, function, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    set_last_error(ErrorCode::kInternal, function, e.what());
  } catch (...) {
    set_last_error(ErrorCode::kInternal, function, "unknown exception");
  }
  return 1;
}

}  // namespace shim
}  // namespace aoti_cuda

namespace aoti_cuda {
namespace shim {
/// Text of the last aoti_torch_warn call in the process ("" if none).
std::string last_warning();
/// Number of aoti_torch_warn calls in the process.
uint64_t warning_count() noexcept;
}  // namespace shim
}  // namespace aoti_cuda
