// Shared pieces of the CLI commands: option helpers with strict validation,
// method choice, exit-status mapping, device queries.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>

#include <cuda_runtime_api.h>

#include "cli.hpp"

namespace aoti_cuda_cli {

int exit_status_for(aoti_cuda::ErrorCode code) noexcept {
  switch (code) {
    case aoti_cuda::ErrorCode::kInvalidArgument: return kExitUsage;
    case aoti_cuda::ErrorCode::kUnsupported:
    case aoti_cuda::ErrorCode::kNoDevice: return kExitNotRunnable;
    default: return kExitFailure;
  }
}

void add_model_option(CLI::App& cmd, std::string& model) {
  cmd.add_option("model", model, "the program (.pte)")->required()->check(CLI::ExistingFile);
}

void add_data_option(CLI::App& cmd, std::vector<std::string>& files) {
  cmd.add_option("--data", files, "data file (repeatable; default: aoti_cuda_blob.ptd beside the .pte)")
      ->check(CLI::ExistingFile)
      ->take_all()
      ->allow_extra_args(false);
}

void add_device_option(CLI::App& cmd, int& device) {
  cmd.add_option("--device", device, "CUDA device ordinal (default 0)")->check(CLI::Range(0, 1023));
}

void add_json_flag(CLI::App& cmd, bool& json) {
  cmd.add_flag("--json", json, "print one JSON document (errors too) instead of text");
}

CLI::Validator finite_non_negative() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) {
          return "needs a finite number >= 0, got '" + s + "'";
        }
        return "";
      },
      "NUMBER>=0");
}

CLI::Validator existing_file_with_shape() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::string path = s.substr(0, s.rfind('@') == std::string::npos ? s.size() : s.rfind('@'));
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return "file does not exist: " + path;
        if (S_ISDIR(st.st_mode)) return "is a directory, not a file: " + path;
        return "";
      },
      "FILE[@SHAPE]");
}

std::string choose_method(const aoti_cuda::Program& program, const std::string& requested) {
  const std::vector<std::string> names = program.method_names();
  if (requested.empty()) {
    for (const std::string& n : names) {
      if (n == "forward") return n;
    }
    if (names.empty()) throw UsageError("the program has no methods");
    return names.front();
  }
  for (const std::string& n : names) {
    if (n == requested) return n;
  }
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("--method " + requested + ": the program has no such method (methods: " + list + ")");
}

void check_method_runnable(const aoti_cuda::Program& program, const std::string& method) {
  const aoti_cuda::MethodSpec& m = program.method(method);
  if (!m.runnable) {
    throw aoti_cuda::Error(aoti_cuda::ErrorCode::kUnsupported,
                           "method '" + method + "' cannot be run by aoti_cuda: " + m.not_runnable_reason);
  }
}

void terminal_progress(const aoti_cuda::LoadProgress& p) {
  std::fprintf(stderr, "\r\033[K%s%s%s %zu/%zu", p.phase.c_str(), p.method.empty() ? "" : " ", p.method.c_str(), p.done,
               p.total);
  if (p.done >= p.total) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

int device_sm(int device, std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    *why = std::string("no GPU (") + (err != cudaSuccess ? cudaGetErrorName(err) : "0 devices") + ")";
    return -1;
  }
  if (device >= count) {
    *why = "no GPU cuda:" + std::to_string(device) + " (" + std::to_string(count) + " present)";
    return -1;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    *why = "cannot query cuda:" + std::to_string(device);
    return -1;
  }
  return p.major * 10 + p.minor;
}

}  // namespace aoti_cuda_cli
