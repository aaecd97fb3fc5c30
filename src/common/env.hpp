// Private: the one reader of the SDK's AOTI_CUDA_* environment variables.
//
// Every variable the SDK reads goes through here, and every value is checked
// as a whole string: "12x", " 4", "+4", "0x10", "4.0" are not integers, and
// "maybe" is not a switch. docs/configuration.md lists every variable.
//
// Two kinds of readers:
//   * values that change how a Module loads or runs (the diagnostic overrides
//     of LoadOptions::tuning, runtime/tuning.cpp) are read with env_integer /
//     env_choice / env_bool, which throw Error(kInvalidArgument) naming the
//     variable and its value, so the load that reads them fails;
//   * switches read where nothing can be thrown (diagnostics such as
//     AOTI_CUDA_TRACE_WEIGHTS, the loader's AOTI_CUDA_DISABLE_MEMFD, a
//     benchmark's AOTI_CUDA_INT4_VARIANT) use env_flag / env_integer_or_warn,
//     which log a warning naming the variable and its value (once per
//     variable and value) and read an invalid value as unset.
//
// An empty value is the same as an unset variable, for every variable.
// Variables are read when asked (tests may change them between reads);
// callers that must read once cache the result themselves.
//
// Thread-safety: every function may be called from any thread (the process
// environment must not be modified concurrently, as for std::getenv).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace aoti_cuda {

// ---- pure parsers (no environment, no errors: nullopt when invalid) ----

/// A decimal integer in [min, max]: an optional '-' and digits, nothing else
/// (no sign '+', spaces, base prefixes or fractions); nullopt otherwise
/// (overflow included).
std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) noexcept;
/// A switch value, case-insensitive: 1/0, true/false, on/off, yes/no.
std::optional<bool> parse_bool(std::string_view text) noexcept;

// ---- the environment ----

/// The value of `name`, or nullopt when it is unset or empty.
std::optional<std::string> env_text(const char* name);

/// `name` as an integer in [min, max]; nullopt when unset or empty. Throws
/// Error(kInvalidArgument) "environment variable NAME='VALUE' is invalid:
/// expected an integer from MIN to MAX".
std::optional<int64_t> env_integer(const char* name, int64_t min, int64_t max);
/// `name` as one of `choices` (exact, case-sensitive): its index; nullopt
/// when unset or empty. Throws Error(kInvalidArgument) naming the variable,
/// its value and the choices.
std::optional<std::size_t> env_choice(const char* name, std::initializer_list<std::string_view> choices);
/// `name` as a switch (parse_bool); nullopt when unset or empty. Throws
/// Error(kInvalidArgument) naming the variable and its value.
std::optional<bool> env_bool(const char* name);

/// A diagnostic switch: true when `name` is on (parse_bool). Unset, empty
/// and off values are false; an invalid value is false and logged as a
/// warning (once per variable and value). Never throws.
bool env_flag(const char* name) noexcept;
/// As env_integer, but an invalid value is logged as a warning (once per
/// variable and value) and read as unset. Never throws.
std::optional<int64_t> env_integer_or_warn(const char* name, int64_t min, int64_t max) noexcept;

}  // namespace aoti_cuda
