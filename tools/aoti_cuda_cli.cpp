// `aoti_cuda`: subcommand dispatcher. Each subcommand lives in tools/cmd_<name>.cpp.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/version.hpp"
#include "cli.hpp"

namespace {

const char* kUsage =
    "usage: aoti_cuda <command> [args]\n"
    "\n"
    "commands:\n"
    "  inspect MODEL.pte [--data F.ptd ...] [--json]   describe a program without running it\n"
    "  run MODEL.pte [options]                         run one method\n"
    "  bench MODEL.pte [options]                       load and latency benchmark\n"
    "  devices                                         list CUDA devices, or say why none is usable\n"
    "  --help, --version\n"
    "\n"
    "`aoti_cuda <command> --help` lists the options of a command.\n";

}  // namespace

namespace aoti_cuda_cli {

std::string option_value(const char* command, int& i, int argc, char** argv) {
  if (i + 1 >= argc) {
    throw aoti_cuda::Error(aoti_cuda::ErrorCode::kInvalidArgument,
                           std::string(command) + ": " + argv[i] + " needs a value");
  }
  return argv[++i];
}

namespace {
template <typename T, typename Parse>
T parse_option(const char* command, int& i, int argc, char** argv, Parse parse, const char* what) {
  const std::string option = argv[i];
  const std::string text = option_value(command, i, argc, argv);
  try {
    std::size_t used = 0;
    const T v = parse(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw aoti_cuda::Error(aoti_cuda::ErrorCode::kInvalidArgument,
                         std::string(command) + ": " + option + " needs " + what + ", got '" + text + "'");
}
}  // namespace

long long int_option(const char* command, int& i, int argc, char** argv) {
  return parse_option<long long>(command, i, argc, argv,
                                 [](const std::string& t, std::size_t* n) { return std::stoll(t, n); }, "a whole number");
}

double double_option(const char* command, int& i, int argc, char** argv) {
  return parse_option<double>(command, i, argc, argv, [](const std::string& t, std::size_t* n) { return std::stod(t, n); },
                              "a number");
}

int take_program_arg(const char* command, const std::string& arg, std::string& program, const char* help) {
  if (!arg.empty() && arg[0] == '-') {
    std::fprintf(stderr, "aoti_cuda %s: unknown option '%s'\n\n%s", command, arg.c_str(), help);
    return 2;
  }
  if (!program.empty()) {
    std::fprintf(stderr, "aoti_cuda %s: more than one program given ('%s' and '%s')\n", command, program.c_str(),
                 arg.c_str());
    return 2;
  }
  program = arg;
  return 0;
}

std::string default_method(const aoti_cuda::Module& module) {
  const std::vector<std::string> names = module.method_names();
  return names.size() == 1 ? names.front() : "forward";
}

void terminal_progress(const aoti_cuda::LoadProgress& p) {
  std::fprintf(stderr, "\r\033[K%s%s%s %zu/%zu", p.phase.c_str(), p.method.empty() ? "" : " ", p.method.c_str(), p.done,
               p.total);
  if (p.done >= p.total) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace aoti_cuda_cli

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("aoti_cuda %s\n", aoti_cuda::version());
    return 0;
  }
  int (*fn)(int, char**) = nullptr;
  if (cmd == "inspect") fn = cmd_inspect;
  if (cmd == "run") fn = cmd_run;
  if (cmd == "bench") fn = cmd_bench;
  if (cmd == "devices") fn = cmd_devices;
  if (fn == nullptr) {
    std::fprintf(stderr, "aoti_cuda: unknown command \"%s\"\n\n%s", cmd.c_str(), kUsage);
    return 2;
  }
  try {
    return fn(argc - 1, argv + 1);
  } catch (const aoti_cuda::Error& e) {
    std::fprintf(stderr, "aoti_cuda %s: error (%s): %s\n", cmd.c_str(), aoti_cuda::to_string(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoti_cuda %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
