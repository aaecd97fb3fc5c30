// The `aoti_cuda` command-line tool: one dispatcher (main.cpp) with one strict
// option parser (CLI11), one command per file (cmd_<name>.cpp).
//
// Exit status, the same for every command (README "Command-line tool"):
//   0 success; 1 failure while loading or running (the message names the
//   ErrorCode); 2 usage error (unknown option, malformed or out-of-range value,
//   missing file, unknown method, input that does not fit the method);
//   3 not runnable here (inspect found a failed check, or run/bench met a
//   program, method or machine it cannot run on); 4 outputs differ from --expect.
//
// Each command registers its options on a CLI11 subcommand and returns the
// function that runs it after parsing. Commands may throw aoti_cuda::Error or
// UsageError; the dispatcher prints them once, as text or (with --json) as a
// JSON object on stdout, and maps them to the exit status.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "aoti_cuda/aoti_cuda.hpp"

namespace aoti_cuda_cli {

enum ExitStatus : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitNotRunnable = 3, kExitMismatch = 4 };

/// A command-line problem found after parsing (e.g. a method name the program lacks).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The exit status for an SDK error: 2 for kInvalidArgument (the caller's
/// input), 3 for kUnsupported / kNoDevice (cannot run here), 1 otherwise.
int exit_status_for(aoti_cuda::ErrorCode code) noexcept;

using Runner = std::function<int()>;
Runner add_inspect(CLI::App& app);
Runner add_run(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_devices(CLI::App& app);

// ---- shared option helpers (cli.cpp) ----
/// Positional MODEL.pte (required, must exist).
void add_model_option(CLI::App& cmd, std::string& model);
/// --data FILE.ptd (repeatable, must exist).
void add_data_option(CLI::App& cmd, std::vector<std::string>& files);
/// --device N: a CUDA ordinal 0..1023.
void add_device_option(CLI::App& cmd, int& device);
/// --json flag.
void add_json_flag(CLI::App& cmd, bool& json);
/// The LoadOptions::tuning flags (--upload-threads, --staging, --page-lock-weights,
/// --block-cache-mib, --small-copy, --gemv-max-rows, --int4-dequant-m,
/// --cublas-workspace-mib): each sets its field of `tuning` when given. The
/// ranges are the SDK's: commands call aoti_cuda::resolve_tuning before
/// loading, so a value out of range (or a bad AOTI_CUDA_* variable) is an
/// Error(kInvalidArgument), exit 2, before anything is read.
void add_tuning_options(CLI::App& cmd, aoti_cuda::TuningOptions& tuning);
/// One line describing resolved tuning ("upload threads 8, staging huge, ..."), for text output.
std::string describe_tuning(const aoti_cuda::TuningOptions& resolved);
/// Resolved tuning as a JSON object, one key per TuningOptions field.
nlohmann::json tuning_json(const aoti_cuda::TuningOptions& resolved);
/// Validator: a finite number >= 0 (rejects nan, inf, negatives).
CLI::Validator finite_non_negative();
/// Validator: an existing file, ignoring an "@SHAPE" suffix (run --input).
CLI::Validator existing_file_with_shape();

/// The method to use: `requested` when given (UsageError listing the methods
/// when the program lacks it), else "forward" when present, else the first.
std::string choose_method(const aoti_cuda::Program& program, const std::string& requested);

/// Throws aoti_cuda::Error(kUnsupported) (exit 3) when `method` is one this
/// SDK cannot run, with the reader's reason.
void check_method_runnable(const aoti_cuda::Program& program, const std::string& method);

/// Load-progress printer for interactive terminals (one updating line on stderr).
void terminal_progress(const aoti_cuda::LoadProgress& p);

/// Compute capability (e.g. 90) of CUDA device `device`, or -1 with `why` set.
int device_sm(int device, std::string* why);

}  // namespace aoti_cuda_cli
