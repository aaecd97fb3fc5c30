// aoti_cuda — checks of a model library (.so) that need no loading.
//
// check_library() answers "can this process run this library?" as far as that
// is possible WITHOUT mapping or executing it: ELF structure and integrity,
// the shared libraries and symbol versions it needs (DT_NEEDED, VERNEED such
// as GLIBC_2.38) against what this machine has, the imports this process must
// provide (shims, CUDA runtime), the operator shims (aoti_torch_cuda_* /
// aoti_torch_cpu_*) and whether this build provides each, whether cuBLAS can be
// found when the library's GEMMs need it, the GPU kernel
// architectures against the GPUs given, and the size of the weights blob
// against the size the library was compiled for. Each check says pass, fail
// or "not checked" with the reason. `aoti_cuda inspect` prints the result.
//
// Nothing is loaded or executed: the libraries named by DT_NEEDED are looked
// up among those this process has loaded and in the loader's search
// directories (LD_LIBRARY_PATH, the system library directories), never
// dlopen'ed, since the names come from the untrusted file.
//
// Errors: check_library() does not throw for malformed bytes (that is a
// failed check); it may throw std::bad_alloc.
// Thread-safety: check_library() may be called concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aoti_cuda/export.h"
#include "aoti_cuda/program.hpp"

namespace aoti_cuda {

/// One symbol version a library needs from another (ELF VERNEED entry).
struct VersionNeed {
  std::string file;     ///< e.g. "libc.so.6"
  std::string version;  ///< e.g. "GLIBC_2.38"
};

/// Reads the VERNEED table (sorted by file, then version). Throws
/// Error(kInvalidProgram) naming the failed check when the table is malformed.
AOTI_CUDA_API std::vector<VersionNeed> elf_version_needs(ByteView so);

/// The weights-blob size an AOTInductor library was compiled for, when it
/// records one: with external weights (what ExecuTorch's CUDA backend
/// exports) the 8-byte constants section holds the blob size. nullopt when
/// the library embeds its weights or records nothing readable.
AOTI_CUDA_API std::optional<std::uint64_t> elf_external_weights_size(ByteView so);

/// Damage that the ELF structure reveals without loading: sections or
/// segments outside the file, zeroed symbol or relocation entries, empty
/// symbol names, a page of zero bytes in executable code, a malformed
/// symbol-version table or GNU hash table. Empty when none is found (which
/// does not prove the bytes intact: the format carries no checksum).
AOTI_CUDA_API std::vector<std::string> elf_integrity_problems(ByteView so);

enum class CheckStatus { kPass, kFail, kNotChecked };
/// "pass", "FAIL", "not checked".
AOTI_CUDA_API const char* to_string(CheckStatus s) noexcept;

struct LibraryCheck {
  /// "elf", "integrity", "needed_libraries", "symbol_versions", "imports", "cuda_hooks" (which imports the
  /// loader binds to the SDK's CUDA hooks, docs/cuda-hooks.md), "cublas" (only for a library that
  /// calls the extern GEMM shims, which run on cuBLAS), "gpu_architecture", "weights"
  std::string name;
  CheckStatus status = CheckStatus::kNotChecked;
  std::string detail;  ///< what was found; for kNotChecked, why not
};

/// An operator shim the library imports (a fallback ATen op, or a custom op's C shim).
struct OpShimImport {
  std::string name;       ///< e.g. "aoti_torch_cuda__weight_int4pack_mm"
  bool provided = false;  ///< exported by this build of libaoti_cuda
  /// One of aoti_cuda's own shims (aoti_torch_cuda_aoti_cuda_*, the C shims of the custom operators
  /// aoti_cuda::aoti_cuda_* that its exporter defines): no other runtime, ExecuTorch's included, has it.
  bool aoti_cuda_only = false;
};

/// Whether `name` is one of aoti_cuda's own operator shims (see OpShimImport::aoti_cuda_only).
AOTI_CUDA_API bool is_aoti_cuda_own_shim(const std::string& name);

struct LibraryCheckOptions {
  /// The weights blob the library will be given (DelegateSpec::weights) and
  /// its name for messages; `has_weights` false skips the weights check.
  bool has_weights = false;
  ByteView weights;
  std::string weights_label;
  /// When `has_weights` is false: the data key the delegate's weights should
  /// be under (DelegateSpec::weights_key) and the keys the data files hold. A
  /// library that records a weights-blob size then FAILS the weights check,
  /// naming the key, the bytes it needs and these keys (it cannot run).
  std::string weights_key;
  std::vector<std::string> available_keys;
  /// Compute capabilities (major*10+minor) of the GPUs the library would run
  /// on. Empty: the architecture check is "not checked" with `no_gpu_reason`.
  std::vector<int> gpu_sms;
  std::string no_gpu_reason = "no GPU";
};

struct AOTI_CUDA_API LibraryReport {
  std::vector<LibraryCheck> checks;     ///< in the order listed in LibraryCheck::name
  std::vector<OpShimImport> op_shims;   ///< sorted by name
  /// Imports (shims of any kind, CUDA runtime functions) that neither this build of
  /// libaoti_cuda nor the process provides, sorted: what the "imports" check fails on.
  std::vector<std::string> missing_imports;
  std::vector<VersionNeed> version_needs;
  /// True when no check failed (checks not made do not count against it).
  bool runnable() const noexcept;
  /// The failed checks' details joined with "; " ("" when runnable).
  std::string failures() const;
};

/// The "symbol_versions" check alone: every VERNEED entry of `so` against the
/// version definitions of the libraries this process's loader finds (glibc,
/// libgcc_s, libstdc++, ...). Module loading runs it before dlopen, so a
/// library built against a newer glibc is refused naming what it needs.
AOTI_CUDA_API LibraryCheck check_symbol_versions(ByteView so);

/// Runs every check above on `so` (e.g. DelegateSpec::so).
AOTI_CUDA_API LibraryReport check_library(ByteView so, const LibraryCheckOptions& options = {});

}  // namespace aoti_cuda
