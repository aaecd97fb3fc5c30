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

/// Load-progress printer for interactive terminals (writes one updating line to stderr).
void terminal_progress(const aoti_cuda::LoadProgress& p);

}  // namespace aoti_cuda_cli
