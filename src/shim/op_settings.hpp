// aoti_cuda shim — the tuning the operator shims read while a model runs
// (private to the shim; the Module installs it).
//
// Five settings of LoadOptions::tuning are read deep inside operator shims
// that a model library calls with no Module at hand: the few-row GEMM limit
// (gemm.hpp), the M from which int4 matmuls dequantize for cuBLAS
// (weight_int4pack_mm.cpp), the cuBLAS workspace size, whether the
// decode kernels launch with programmatic dependent launch
// (ops/dependent_launch.hpp) and decode attention's form
// (ops/decode_attention.hpp). They travel the way
// the call's stream and block cache already do: the Module's executor
// installs its method's OpSettings on the calling thread for the duration of
// the call (OpSettingsScope, beside CurrentStreamScope and BlockCacheScope),
// and the shims read op_settings(). Why this design: the model library runs
// its whole Run (and a graph capture, which runs inside a call) on the
// calling thread, so a thread-local pointer is exact, costs one load per
// read, needs no lock, and keeps two Modules with different tuning in one
// process (even on one thread, one call after the other) from seeing each
// other's settings. A process-wide value would make the last loaded Module's
// tuning win for all; passing the settings through the C ABI is impossible
// (the model library's calls carry none).
//
// Shim calls outside a Module call (tests, benchmarks, a model library driven
// by hand) read the built-in defaults (OpSettings{}); tests install their own
// with OpSettingsScope.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda::shim {

/// OpSettings::merge_slices' default: AOTI_CUDA_MERGE_SLICES (1 or 0, read once per process; unset or an invalid
/// value, which is reported, reads as 1).
bool merge_slices_default() noexcept;

/// The operator shims' tuning. Defaults: those of TuningOptions (module.hpp).
struct OpSettings {
  /// The most rows the few-row kernels take (gemv::kMaxRows).
  static constexpr int kMaxGemvRows = 8;
  /// Multiplies with at most this many rows of activations run on the
  /// few-row kernels (gemv.hpp) instead of cuBLAS: 0..kMaxGemvRows, 0 never.
  int gemv_max_rows = 1;
  /// int4 matmuls with at least this many rows of activations dequantize
  /// the weights for cuBLAS; 0: never.
  int64_t int4_dequant_min_m = 65;
  /// cuBLAS workspace per stream, in bytes (0: none).
  std::size_t cublas_workspace_bytes = std::size_t{32} << 20;
  /// The few-row GEMV, the int4 weight-streaming and the decode attention
  /// kernels launch with programmatic dependent launch on sm_90 and newer
  /// (their launch overlaps the end of the previous kernel, and the fused
  /// linear and int4 kernels' first weight loads too); false: plain
  /// launches. On by default since 2026-12-05: a fused-form LLM decode step
  /// ran 9.7-11 % faster with it (H100, docs/benchmarks/llm.md).
  bool dependent_launch = true;
  /// Decode attention's form (ops/decode_attention.hpp): 0, two kernels
  /// (chunks, then their merge); 8 or 16, one kernel whose thread-block
  /// clusters of that many blocks merge the chunks in distributed shared
  /// memory (sm_90 and newer; 8 where 16 does not fit, two kernels where
  /// neither does); kClusterAuto (the default), what
  /// decode_attention::auto_cluster() picks for the call
  /// (TuningOptions::attention_cluster, kAttentionClusterAuto).
  static constexpr int kClusterAuto = -1;
  int attention_cluster = kClusterAuto;
  /// Decode attention's merge kernel past 8 chunks (512 positions): the
  /// chunks split among 4 slices of the block, merged in shared memory at
  /// the end, instead of one column a thread walking them in order. Results
  /// agree to float32 rounding. Kernel tuning only, on by default (decode
  /// 4.9-6.9 % faster at position 4,000 in the 1.1 B model, H100);
  /// AOTI_CUDA_MERGE_SLICES=0 turns it off (merge_slices_default()).
  bool merge_slices = merge_slices_default();
};

/// The calling thread's settings: those of the innermost OpSettingsScope,
/// else the defaults. The reference stays valid while that scope lives.
const OpSettings& op_settings() noexcept;

/// RAII: installs `settings` (which must outlive the scope) as the calling
/// thread's for its lifetime; restores the previous ones on exit.
class OpSettingsScope {
 public:
  explicit OpSettingsScope(const OpSettings* settings) noexcept;
  ~OpSettingsScope();
  OpSettingsScope(const OpSettingsScope&) = delete;
  OpSettingsScope& operator=(const OpSettingsScope&) = delete;

 private:
  const OpSettings* previous_;
};

}  // namespace aoti_cuda::shim
