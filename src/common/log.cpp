// The SDK's one log sink (see aoti_cuda/log.hpp): a handler behind a mutex,
// copied out before it is called so that handlers never run under the lock.
#include "aoti_cuda/log.hpp"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "common/env.hpp"

namespace aoti_cuda {
namespace {

struct Sink {
  std::mutex mutex;
  std::shared_ptr<const LogHandler> handler;  // null: default
  std::atomic<int> min_level{static_cast<int>(LogLevel::kDebug)};
};

Sink& sink() {
  static Sink* s = new Sink;  // never destroyed: logging may happen during static destruction
  return *s;
}

void default_handler(LogLevel level, std::string_view message) {
  // Read as every switch is (common/env.hpp): 1/true/on/yes is on; an invalid value is off, and reported.
  if (level == LogLevel::kWarning && env_flag("AOTI_CUDA_QUIET")) return;
  std::fprintf(stderr, "[aoti_cuda] %s: %.*s\n", to_string(level), static_cast<int>(message.size()), message.data());
}

}  // namespace

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

LogHandler set_log_handler(LogHandler handler) {
  Sink& s = sink();
  std::shared_ptr<const LogHandler> next = handler ? std::make_shared<const LogHandler>(std::move(handler)) : nullptr;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::shared_ptr<const LogHandler> prev = std::move(s.handler);
  s.handler = std::move(next);
  return prev ? *prev : LogHandler();
}

void set_log_level(LogLevel level) noexcept { sink().min_level.store(static_cast<int>(level)); }

void log(LogLevel level, std::string_view message) noexcept {
  Sink& s = sink();
  if (static_cast<int>(level) < s.min_level.load()) return;
  try {
    std::shared_ptr<const LogHandler> h;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      h = s.handler;
    }
    if (h) {
      (*h)(level, message);
    } else {
      default_handler(level, message);
    }
  } catch (...) {
    // Logging must never fail the caller.
  }
}

}  // namespace aoti_cuda
