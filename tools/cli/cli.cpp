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

void add_tuning_options(CLI::App& cmd, aoti_cuda::TuningOptions& t) {
  const std::string group = "Tuning (LoadOptions::tuning; unset: the AOTI_CUDA_* variable, else the default)";
  cmd.add_option_function<int>(
         "--upload-threads", [&t](const int& v) { t.upload_threads = v; },
         "threads copying the weights to the device at load, 1..256 (default: one per core, at most 8)")
      ->group(group);
  cmd.add_option_function<std::string>(
         "--staging",
         [&t](const std::string& v) {
           t.staging = v == "wc"          ? aoti_cuda::StagingMemory::kWriteCombined
                       : v == "hostalloc" ? aoti_cuda::StagingMemory::kHostAlloc
                                          : aoti_cuda::StagingMemory::kHugePages;
         },
         "pinned staging memory of the weights upload: huge, wc or hostalloc (default huge)")
      ->check(CLI::IsMember({"huge", "wc", "hostalloc"}))
      ->group(group);
  cmd.add_flag_function(
         "--page-lock-weights", [&t](std::int64_t) { t.page_lock_weights = true; },
         "page-lock the weights file mapping in place instead of staging it (may stall on large files)")
      ->group(group);
  cmd.add_option_function<std::size_t>(
         "--block-cache-mib", [&t](const std::size_t& v) { t.block_cache_mib = v; },
         "MiB of freed device blocks each call slot keeps for its next call, 0 = off (default 1024)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option_function<std::string>(
         "--small-copy", [&t](const std::string& v) { t.small_copy_kernels = v == "kernel"; },
         "graph replays: copies up to 64 KiB as kernel nodes or dma (memcpy) nodes (default kernel)")
      ->check(CLI::IsMember({"kernel", "dma"}))
      ->group(group);
  cmd.add_option_function<int>(
         "--gemv-max-rows", [&t](const int& v) { t.gemv_max_rows = v; },
         "cuBLAS-GEMM programs: multiplies of at most N rows on the few-row kernels, 0..8 (default 1)")
      ->group(group);
  cmd.add_option_function<std::int64_t>(
         "--int4-dequant-m", [&t](const std::int64_t& v) { t.int4_dequant_min_m = v; },
         "int4 matmuls from M rows on: dequantize + cuBLAS, 0 = never (default 65)")
      ->group(group);
  cmd.add_option_function<std::size_t>(
         "--cublas-workspace-mib", [&t](const std::size_t& v) { t.cublas_workspace_mib = v; },
         "cuBLAS workspace per stream in MiB, 0..4096 (default 32)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  cmd.add_option_function<std::string>(
         "--dependent-launch", [&t](const std::string& v) { t.dependent_launch = v == "on"; },
         "sm_90+: decode kernels launch while the previous kernel finishes, on or off (default on)")
      ->check(CLI::IsMember({"on", "off"}))
      ->group(group);
  cmd.add_option_function<std::string>(
         "--attention-cluster",
         [&t](const std::string& v) {
           t.attention_cluster = v == "auto" ? aoti_cuda::kAttentionClusterAuto : std::stoi(v);
         },
         "sm_90+: decode attention as one kernel over thread-block clusters of 8 or 16 blocks, 0 for two kernels, or "
         "auto: clusters of 8 for KV caches of at most 512 positions (default auto)")
      ->check(CLI::IsMember({"auto", "0", "8", "16"}))
      ->group(group);
}

std::string describe_tuning(const aoti_cuda::TuningOptions& r) {
  auto num = [](auto v) { return v ? std::to_string(*v) : std::string("?"); };
  return "upload threads " + num(r.upload_threads) + ", staging " +
         (r.staging ? aoti_cuda::to_string(*r.staging) : "?") +
         (r.page_lock_weights.value_or(false) ? " (page-locking in place)" : "") + ", block cache " +
         num(r.block_cache_mib) + " MiB, small copies " +
         (r.small_copy_kernels.value_or(true) ? "kernel" : "dma") + ", gemv rows " + num(r.gemv_max_rows) +
         ", int4 dequantize from M " + num(r.int4_dequant_min_m) + ", cuBLAS workspace " +
         num(r.cublas_workspace_mib) + " MiB, dependent launch " +
         (r.dependent_launch.value_or(true) ? "on" : "off") + ", attention cluster " +
         (r.attention_cluster == aoti_cuda::kAttentionClusterAuto ? std::string("auto") : num(r.attention_cluster));
}

nlohmann::json tuning_json(const aoti_cuda::TuningOptions& r) {
  nlohmann::json j = nlohmann::json::object();
  auto put = [&j](const char* key, const auto& v) {
    if (v) j[key] = *v;
  };
  put("upload_threads", r.upload_threads);
  if (r.staging) j["staging"] = aoti_cuda::to_string(*r.staging);
  put("page_lock_weights", r.page_lock_weights);
  put("block_cache_mib", r.block_cache_mib);
  if (r.small_copy_kernels) j["small_copy"] = *r.small_copy_kernels ? "kernel" : "dma";
  put("gemv_max_rows", r.gemv_max_rows);
  put("int4_dequant_min_m", r.int4_dequant_min_m);
  put("cublas_workspace_mib", r.cublas_workspace_mib);
  put("dependent_launch", r.dependent_launch);
  if (r.attention_cluster == aoti_cuda::kAttentionClusterAuto) j["attention_cluster"] = "auto";
  else put("attention_cluster", r.attention_cluster);
  return j;
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
