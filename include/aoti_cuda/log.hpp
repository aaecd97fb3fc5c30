// aoti_cuda — where the SDK's messages go.
//
// The SDK never writes to stdout; its few messages (warnings a model library
// reports through aoti_torch_warn, aoti_torch_print_tensor_handle output, the
// AOTI_CUDA_TRACE_SHARING / _WEIGHTS traces) all go through one handler. By default it
// prints "[aoti_cuda] <level>: <message>" to stderr, except warnings when
// AOTI_CUDA_QUIET is on. An application that embeds the SDK installs its own
// handler to route them into its logging.
//
// Thread-safety: every function may be called from any thread. The handler is
// called on the thread that logs, possibly concurrently from several threads,
// never while the SDK holds the handler lock (so it may call set_log_handler);
// it must not throw (an exception it throws is swallowed).
#pragma once

#include <functional>
#include <string_view>

#include "aoti_cuda/export.h"

namespace aoti_cuda {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

/// "debug", "info", "warning", "error".
AOTI_CUDA_API const char* to_string(LogLevel level) noexcept;

using LogHandler = std::function<void(LogLevel level, std::string_view message)>;

/// Installs `handler` for every later message; an empty handler restores the
/// default (stderr). Returns the previous handler (empty for the default).
AOTI_CUDA_API LogHandler set_log_handler(LogHandler handler);

/// Messages below `level` are dropped before reaching any handler (default
/// kDebug: everything the SDK emits is delivered).
AOTI_CUDA_API void set_log_level(LogLevel level) noexcept;

/// Sends a message through the current handler (the SDK's own logging uses
/// this; applications may too).
AOTI_CUDA_API void log(LogLevel level, std::string_view message) noexcept;

}  // namespace aoti_cuda
