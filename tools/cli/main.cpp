// `aoti_cuda`: the dispatcher. Parses the command line with CLI11, runs the
// chosen command, and turns every error into one message and one exit status
// (cli.hpp lists them).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace {

struct Failure {
  int status;
  std::string code;  // ErrorCode name, "usage" or "internal"
  std::string message;
};

// Prints `f` once: text on stderr, or with --json a JSON object on stdout
// (so that a consumer reading stdout always gets JSON).
int report(const Failure& f, const std::string& command, bool json) {
  if (json) {
    nlohmann::json j = {{"error", {{"command", command}, {"code", f.code}, {"message", f.message}, {"exit_status", f.status}}}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fprintf(stderr, "aoti_cuda%s%s: %s%s%s\n", command.empty() ? "" : " ", command.c_str(),
                 f.code == "usage" ? "" : ("error (" + f.code + "): ").c_str(), f.message.c_str(),
                 f.code == "usage" ? "\nRun with --help for more information." : "");
  }
  return f.status;
}

bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aoti_cuda: inspect, run and benchmark ExecuTorch CUDA programs (.pte + .ptd) without libtorch.\n"
               "Exit status: 0 ok, 1 failure, 2 usage error, 3 not runnable here, 4 outputs differ from --expect.",
               "aoti_cuda"};
  app.set_version_flag("--version", std::string("aoti_cuda ") + aoti_cuda::version());
  app.require_subcommand(1);
  app.fallthrough(false);
  struct Entry {
    CLI::App* app;
    aoti_cuda_cli::Runner run;
  };
  std::vector<Entry> commands;
  for (auto add : {aoti_cuda_cli::add_inspect, aoti_cuda_cli::add_run, aoti_cuda_cli::add_bench,
                   aoti_cuda_cli::add_devices}) {
    aoti_cuda_cli::Runner run = add(app);
    commands.push_back({app.get_subcommands([](CLI::App*) { return true; }).back(), std::move(run)});
  }
  const bool json = wants_json(argc, argv);
  std::string command;
  bool known = argc < 2 || argv[1][0] == '-';
  for (const Entry& e : commands) known = known || e.app->get_name() == argv[1];
  if (!known) {
    return report({aoti_cuda_cli::kExitUsage, "usage",
                   std::string("unknown command '") + argv[1] + "' (commands: inspect, run, bench, devices)"},
                  "", json);
  }
  try {
    app.parse(argc, argv);
    for (const Entry& e : commands) {
      if (e.app->parsed()) {
        command = e.app->get_name();
        return e.run();
      }
    }
    return report({aoti_cuda_cli::kExitUsage, "usage", "no command given"}, "", json);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return aoti_cuda_cli::kExitOk;
  } catch (const CLI::CallForVersion&) {
    std::printf("aoti_cuda %s\n", aoti_cuda::version());
    return aoti_cuda_cli::kExitOk;
  } catch (const CLI::ParseError& e) {
    for (const Entry& c : commands) {
      if (c.app->parsed()) command = c.app->get_name();
    }
    return report({aoti_cuda_cli::kExitUsage, "usage", e.what()}, command, json);
  } catch (const aoti_cuda_cli::UsageError& e) {
    return report({aoti_cuda_cli::kExitUsage, "usage", e.what()}, command, json);
  } catch (const aoti_cuda::Error& e) {
    return report({aoti_cuda_cli::exit_status_for(e.code()), aoti_cuda::to_string(e.code()), e.what()}, command, json);
  } catch (const std::exception& e) {
    return report({aoti_cuda_cli::kExitFailure, "internal", e.what()}, command, json);
  }
}
