// The `aoti_cuda` command-line tool: one function per subcommand, each in its
// own cmd_<name>.cpp. argv[0] is the subcommand name; the return value is the
// process exit status (0 ok, 1 failure, 2 usage error). Subcommands may throw
// aoti_cuda::Error: the dispatcher prints it and exits 1.
#pragma once

#include <string>

#include "aoti_cuda/module.hpp"

int cmd_inspect(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_devices(int argc, char** argv);

namespace aoti_cuda_cli {

/// The value of the option at argv[i] (advancing i past it). Throws
/// aoti_cuda::Error(kInvalidArgument) "<command>: <option> needs a value".
std::string option_value(const char* command, int& i, int argc, char** argv);

/// option_value() parsed as a whole number / a number; a malformed value
/// throws Error(kInvalidArgument) naming the option and the text.
long long int_option(const char* command, int& i, int argc, char** argv);
double double_option(const char* command, int& i, int argc, char** argv);

/// For an argument that is no known option: takes it as the program path if
/// none was given yet (returns 0); otherwise prints a usage error naming it and
/// returns 2 (the exit status).
int take_program_arg(const char* command, const std::string& arg, std::string& program, const char* help);

/// The method run/bench use when --method is not given: the only one, else "forward".
std::string default_method(const aoti_cuda::Module& module);

/// Load-progress printer for interactive terminals (writes one updating line to stderr).
void terminal_progress(const aoti_cuda::LoadProgress& p);

}  // namespace aoti_cuda_cli
