// The one reader of the AOTI_CUDA_* environment variables. See env.hpp.
#include "common/env.hpp"

#include <cstdlib>
#include <mutex>
#include <set>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/log.hpp"

namespace aoti_cuda {
namespace {

bool equals_lower(std::string_view text, std::string_view lower) noexcept {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] - 'A' + 'a') : text[i];
    if (c != lower[i]) return false;
  }
  return true;
}

// The raw value; nullptr when unset or empty.
const char* raw(const char* name) noexcept {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string integer_range(int64_t min, int64_t max) {
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string invalid(const char* name, const char* value, const std::string& expected) {
  return "environment variable " + std::string(name) + "='" + value + "' is invalid: expected " + expected;
}

// Logs `message` once per distinct message (a variable and its value) per process.
void warn_once(const std::string& message) noexcept {
  try {
    static std::mutex mu;
    static auto* seen = new std::set<std::string>;  // leaked: warnings may come during static destruction
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!seen->insert(message).second) return;
    }
    // Outside the lock: the log sink reads AOTI_CUDA_QUIET through env_flag.
    log(LogLevel::kWarning, message);
  } catch (...) {
    // Reporting must not fail the caller.
  }
}

}  // namespace

std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) noexcept {
  std::size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) i = 1;
  if (i == text.size()) return std::nullopt;
  // Accumulated as a negative number: its range holds INT64_MIN.
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (value < (INT64_MIN + digit) / 10) return std::nullopt;
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == INT64_MIN) return std::nullopt;
    value = -value;
  }
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
  for (std::string_view on : {"1", "true", "on", "yes"}) {
    if (equals_lower(text, on)) return true;
  }
  for (std::string_view off : {"0", "false", "off", "no"}) {
    if (equals_lower(text, off)) return false;
  }
  return std::nullopt;
}

std::optional<std::string> env_text(const char* name) {
  const char* v = raw(name);
  return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
}

std::optional<int64_t> env_integer(const char* name, int64_t min, int64_t max) {
  const char* v = raw(name);
  if (v == nullptr) return std::nullopt;
  const std::optional<int64_t> n = parse_integer(v, min, max);
  if (!n) throw Error(ErrorCode::kInvalidArgument, invalid(name, v, integer_range(min, max)));
  return n;
}

std::optional<std::size_t> env_choice(const char* name, std::initializer_list<std::string_view> choices) {
  const char* v = raw(name);
  if (v == nullptr) return std::nullopt;
  std::size_t index = 0;
  std::string listed;
  for (std::string_view c : choices) {
    if (c == v) return index;
    listed += (index++ == 0 ? "" : ", ") + std::string(c);
  }
  throw Error(ErrorCode::kInvalidArgument, invalid(name, v, "one of " + listed));
}

std::optional<bool> env_bool(const char* name) {
  const char* v = raw(name);
  if (v == nullptr) return std::nullopt;
  const std::optional<bool> b = parse_bool(v);
  if (!b) throw Error(ErrorCode::kInvalidArgument, invalid(name, v, "1/0, true/false, on/off or yes/no"));
  return b;
}

bool env_flag(const char* name) noexcept {
  const char* v = raw(name);
  if (v == nullptr) return false;
  const std::optional<bool> b = parse_bool(v);
  if (b) return *b;
  try {
    warn_once(invalid(name, v, "1/0, true/false, on/off or yes/no") + "; the switch stays off");
  } catch (...) {
  }
  return false;
}

std::optional<int64_t> env_integer_or_warn(const char* name, int64_t min, int64_t max) noexcept {
  const char* v = raw(name);
  if (v == nullptr) return std::nullopt;
  const std::optional<int64_t> n = parse_integer(v, min, max);
  if (!n) {
    try {
      warn_once(invalid(name, v, integer_range(min, max)) + "; ignored");
    } catch (...) {
    }
  }
  return n;
}

}  // namespace aoti_cuda
