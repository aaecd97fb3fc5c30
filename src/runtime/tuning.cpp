// TuningOptions: the one place its fields and their environment variables are
// read and checked. See runtime/tuning.hpp and docs/configuration.md.
#include "runtime/tuning.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "aoti_cuda/log.hpp"
#include "common/env.hpp"
#include "shim/allocator.hpp"

namespace aoti_cuda {
namespace {

// One integer setting: its field, its variable, the range both must be in and the default.
struct IntegerSetting {
  const char* field;     // as messages name it
  const char* variable;  // its diagnostic override
  int64_t min, max, fallback;
};

std::string field_name(const char* field) { return std::string("LoadOptions::tuning.") + field; }

template <typename T>
bool in_range(T v, int64_t min, int64_t max) {
  if constexpr (std::is_unsigned_v<T>) {
    return v <= static_cast<uint64_t>(max) && (min <= 0 || v >= static_cast<uint64_t>(min));
  } else {
    return static_cast<int64_t>(v) >= min && static_cast<int64_t>(v) <= max;
  }
}

void note_shadowed(const char* variable, const std::string& value, const char* field) {
  log(LogLevel::kInfo, std::string(variable) + "=" + value + " is not used: " + field_name(field) + " is set");
}

// The field when set (checked), else the variable when set (checked), else
// the default. The variable is checked even when the field wins.
template <typename T>
T resolve_integer(const std::optional<T>& field, const IntegerSetting& s) {
  const std::optional<int64_t> from_env = env_integer(s.variable, s.min, s.max);
  if (!field) return static_cast<T>(from_env.value_or(s.fallback));
  if (!in_range(*field, s.min, s.max)) {
    throw Error(ErrorCode::kInvalidArgument, field_name(s.field) + " = " + std::to_string(*field) +
                                                 " is invalid: expected an integer from " + std::to_string(s.min) +
                                                 " to " + std::to_string(s.max));
  }
  if (from_env && static_cast<int64_t>(*field) != *from_env) {
    note_shadowed(s.variable, std::to_string(*from_env), s.field);
  }
  return *field;
}

// The names AOTI_CUDA_STAGING takes, in enumerator order.
constexpr const char* kStagingNames[] = {"huge", "wc", "hostalloc"};

StagingMemory resolve_staging(const std::optional<StagingMemory>& field) {
  const char* variable = "AOTI_CUDA_STAGING";
  const std::optional<std::size_t> from_env =
      env_choice(variable, {kStagingNames[0], kStagingNames[1], kStagingNames[2]});
  if (!field) return from_env ? static_cast<StagingMemory>(*from_env) : StagingMemory::kHugePages;
  const int v = static_cast<int>(*field);
  if (v < 0 || v > static_cast<int>(StagingMemory::kHostAlloc)) {
    throw Error(ErrorCode::kInvalidArgument, field_name("staging") + " = " + std::to_string(v) +
                                                 " is invalid: expected kHugePages, kWriteCombined or kHostAlloc");
  }
  if (from_env && static_cast<int>(*from_env) != v) note_shadowed(variable, kStagingNames[*from_env], "staging");
  return *field;
}

// A switch: the field when set, else its variable's value (`from_env`, read
// and checked by the caller; `env_value_text` for the message), else `fallback`.
bool resolve_switch(const std::optional<bool>& field, const char* name, const char* variable,
                    const std::optional<bool>& from_env, const char* env_value_text, bool fallback) {
  if (!field) return from_env.value_or(fallback);
  if (from_env && *from_env != *field) note_shadowed(variable, env_value_text, name);
  return *field;
}

// attention_cluster: kAttentionClusterAuto (the variable's "auto"), 0, 8 or 16.
static_assert(kAttentionClusterAuto == shim::OpSettings::kClusterAuto, "one value for auto");
int resolve_attention_cluster(const std::optional<int>& field, int fallback) {
  constexpr const char* kName = "attention_cluster";
  constexpr const char* kVariable = "AOTI_CUDA_ATTENTION_CLUSTER";
  constexpr const char* kTexts[] = {"auto", "0", "8", "16"};
  constexpr int kValues[] = {kAttentionClusterAuto, 0, 8, 16};
  const std::optional<std::size_t> from_env = env_choice(kVariable, {kTexts[0], kTexts[1], kTexts[2], kTexts[3]});
  if (!field) return from_env ? kValues[*from_env] : fallback;
  if (*field != kAttentionClusterAuto && *field != 0 && *field != 8 && *field != 16) {
    throw Error(ErrorCode::kInvalidArgument, field_name(kName) + " = " + std::to_string(*field) +
                                                 " is invalid: expected -1 (kAttentionClusterAuto), 0, 8 or 16");
  }
  if (from_env && kValues[*from_env] != *field) note_shadowed(kVariable, kTexts[*from_env], kName);
  return *field;
}

}  // namespace

const char* to_string(StagingMemory memory) noexcept {
  const int v = static_cast<int>(memory);
  return v >= 0 && v <= static_cast<int>(StagingMemory::kHostAlloc) ? kStagingNames[v] : "?";
}

TuningOptions resolve_tuning(const TuningOptions& t) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const shim::OpSettings ops;  // the operator shims' defaults
  TuningOptions r;
  r.upload_threads = resolve_integer(t.upload_threads, {"upload_threads", "AOTI_CUDA_UPLOAD_THREADS", 1, 256,
                                                        runtime::default_upload_threads()});
  r.staging = resolve_staging(t.staging);
  const std::optional<bool> page_lock = env_bool("AOTI_CUDA_PAGE_LOCK_WEIGHTS");
  r.page_lock_weights = resolve_switch(t.page_lock_weights, "page_lock_weights", "AOTI_CUDA_PAGE_LOCK_WEIGHTS",
                                       page_lock, page_lock.value_or(false) ? "on" : "off", false);
  constexpr auto kBlockCacheMib = static_cast<int64_t>(shim::BlockCache::kDefaultCapacity >> 20);
  r.block_cache_mib =
      resolve_integer(t.block_cache_mib, {"block_cache_mib", "AOTI_CUDA_BLOCK_CACHE_MIB", 0, 1 << 20, kBlockCacheMib});
  const std::optional<std::size_t> small_copy = env_choice("AOTI_CUDA_SMALL_COPY", {"kernel", "dma"});
  const std::optional<bool> kernels = small_copy ? std::optional<bool>(*small_copy == 0) : std::nullopt;
  r.small_copy_kernels = resolve_switch(t.small_copy_kernels, "small_copy_kernels", "AOTI_CUDA_SMALL_COPY", kernels,
                                        kernels.value_or(true) ? "kernel" : "dma", true);
  r.gemv_max_rows = resolve_integer(t.gemv_max_rows, {"gemv_max_rows", "AOTI_CUDA_GEMV_MAX_ROWS", 0,
                                                      shim::OpSettings::kMaxGemvRows, ops.gemv_max_rows});
  r.int4_dequant_min_m = resolve_integer(t.int4_dequant_min_m, {"int4_dequant_min_m", "AOTI_CUDA_INT4_DEQUANT_M", 0,
                                                                kInt32Max, ops.int4_dequant_min_m});
  r.cublas_workspace_mib =
      resolve_integer(t.cublas_workspace_mib, {"cublas_workspace_mib", "AOTI_CUDA_CUBLAS_WORKSPACE_MIB", 0, 4096,
                                               static_cast<int64_t>(ops.cublas_workspace_bytes >> 20)});
  const std::optional<bool> dependent = env_bool("AOTI_CUDA_DEPENDENT_LAUNCH");
  r.dependent_launch = resolve_switch(t.dependent_launch, "dependent_launch", "AOTI_CUDA_DEPENDENT_LAUNCH", dependent,
                                      dependent.value_or(ops.dependent_launch) ? "on" : "off", ops.dependent_launch);
  r.attention_cluster = resolve_attention_cluster(t.attention_cluster, ops.attention_cluster);
  return r;
}

namespace runtime {

StagedUploadOptions upload_options(const TuningOptions& resolved) {
  StagedUploadOptions o;
  o.threads = resolved.upload_threads.value_or(0);
  o.memory = resolved.staging.value_or(StagingMemory::kHugePages);
  return o;
}

shim::OpSettings op_settings_of(const TuningOptions& resolved) {
  shim::OpSettings s;
  s.gemv_max_rows = resolved.gemv_max_rows.value_or(s.gemv_max_rows);
  s.int4_dequant_min_m = resolved.int4_dequant_min_m.value_or(s.int4_dequant_min_m);
  if (resolved.cublas_workspace_mib) s.cublas_workspace_bytes = *resolved.cublas_workspace_mib << 20;
  s.dependent_launch = resolved.dependent_launch.value_or(s.dependent_launch);
  s.attention_cluster = resolved.attention_cluster.value_or(s.attention_cluster);
  return s;
}

std::size_t block_cache_bytes(const TuningOptions& resolved) {
  return resolved.block_cache_mib ? *resolved.block_cache_mib << 20 : shim::BlockCache::kDefaultCapacity;
}

}  // namespace runtime
}  // namespace aoti_cuda
