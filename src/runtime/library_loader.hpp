// Private: loading an AOTInductor model library from memory.
//
// The .so bytes come from a Program (mapped file). Before anything is executed
// the loader checks that they are a shared object for this machine, that every
// shim/cudart symbol they import resolves in the global scope (naming each one
// that does not), and optionally that their SHA-256 is pinned. The bytes are
// then written to an anonymous memfd (or an unlinked temp file when memfd is
// unavailable) and dlopen'ed RTLD_NOW|RTLD_LOCAL. File names never contain
// anything derived from the program.
//
// Environment switches (diagnostics): AOTI_CUDA_DISABLE_MEMFD=1 uses the temp
// file path; AOTI_CUDA_KEEP_UNIQUE_SYMBOLS=1 loads the bytes unmodified (the
// library then stays mapped until exit if it defines STB_GNU_UNIQUE symbols);
// AOTI_CUDA_KEEP_EH_POOL=1 skips freeing the exception-handling emergency pool
// of a library that links libstdc++ statically (it then leaks ~73 KB per load).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aoti_cuda/program.hpp"
#include "aoti_cuda/shim.h"
#include "runtime/cuda_hooks.hpp"
#include "shim/ops/gemm.hpp"

namespace aoti_cuda::runtime {

// The AOTInductor container C ABI (aoti-abi.md §3), as function pointer types.
using AOTIRuntimeError = int32_t;
struct AOTInductorModelContainerOpaque;
using ContainerHandle = AOTInductorModelContainerOpaque*;

struct ContainerApi {
  // required
  AOTIRuntimeError (*create_with_device)(ContainerHandle*, std::size_t num_models, const char* device,
                                         const char* cubin_dir) = nullptr;
  AOTIRuntimeError (*destroy)(ContainerHandle) = nullptr;
  AOTIRuntimeError (*get_num_inputs)(ContainerHandle, std::size_t*) = nullptr;
  AOTIRuntimeError (*get_num_outputs)(ContainerHandle, std::size_t*) = nullptr;
  AOTIRuntimeError (*run)(ContainerHandle, AtenTensorHandle* inputs, std::size_t n_in, AtenTensorHandle* outputs,
                          std::size_t n_out, void* stream, void* proxy_executor) = nullptr;
  // optional
  AOTIRuntimeError (*update_constants_from_blob)(ContainerHandle, const std::uint8_t* blob) = nullptr;
  AOTIRuntimeError (*get_input_name)(ContainerHandle, std::size_t, const char**) = nullptr;
  AOTIRuntimeError (*get_output_name)(ContainerHandle, std::size_t, const char**) = nullptr;
  AOTIRuntimeError (*get_num_constants)(ContainerHandle, std::size_t*) = nullptr;
  /// Bytes the model reads from the UpdateConstantsFromBlob pointer (binary_blob builds; fails otherwise).
  AOTIRuntimeError (*get_constants_blob_size)(ContainerHandle, std::uint64_t*) = nullptr;
  /// Constant table queries and user-managed constants (cross-method sharing).
  AOTIRuntimeError (*get_constant_name)(ContainerHandle, std::size_t, const char**) = nullptr;
  AOTIRuntimeError (*get_constant_original_fqn)(ContainerHandle, std::size_t, const char**) = nullptr;
  AOTIRuntimeError (*get_constant_from_folded)(ContainerHandle, std::size_t, bool*) = nullptr;
  AOTIRuntimeError (*get_constant_dtype)(ContainerHandle, std::size_t, int32_t*) = nullptr;
  /// ConstantType: Unknown=0, Parameter=1, Buffer=2, TensorConstant=3, FoldedConstant=4.
  AOTIRuntimeError (*get_constant_type)(ContainerHandle, std::size_t, int32_t*) = nullptr;
  AOTIRuntimeError (*get_constant_data_size)(ContainerHandle, std::size_t, std::size_t*) = nullptr;
  struct ConstantMapEntry {
    const char* name;
    AtenTensorHandle handle;
  };
  AOTIRuntimeError (*update_user_managed_constant_buffer_pairs)(ContainerHandle, const ConstantMapEntry* pairs,
                                                                std::size_t num_pairs, bool use_inactive,
                                                                bool validate_full_update) = nullptr;
  /// AOTInductorGetLastError (PyTorch > 2.11): thread-local message of the last failure.
  AOTIRuntimeError (*get_last_error)(const char**) = nullptr;
};

/// Imported symbols of `elf` that this process must provide (aoti_torch_*,
/// aoti_cuda_* and cudart cuda*) but whose dlsym(RTLD_DEFAULT) lookup fails.
/// Driver symbols (cu*) are left to the library's own DT_NEEDED libcuda.so.1.
std::vector<std::string> missing_imports(const ElfInfo& elf);

/// Makes libaoti_cuda's own symbols (the shim) global, in case the application
/// loaded it RTLD_LOCAL. Idempotent and best effort.
void promote_self_to_global() noexcept;

/// Offsets (in the file) of the st_info bytes of STB_GNU_UNIQUE dynamic
/// symbols. glibc marks a library that defines such a symbol "nodelete", so it
/// would never be unmapped; the loader rewrites these bindings to STB_GLOBAL
/// in its private copy. Empty for malformed input.
std::vector<std::size_t> gnu_unique_symbol_offsets(ByteView elf);

/// Libraries at least this large are copied into the file dlopen reads on a
/// helper thread while the load's checks run (below it, starting the thread
/// costs about what the overlap saves). Every AOTInductor library is over it.
constexpr std::size_t kCopyOnThreadFrom = std::size_t{256} << 10;

class ModelLibrary {
 public:
  /// Checks and loads `so`. `label` names the library in messages (method,
  /// delegate, file). Throws Error(kLoad / kInvalidProgram / kIo).
  static std::unique_ptr<ModelLibrary> load(ByteView so, const std::string& label,
                                            const std::vector<std::string>& allowed_sha256);
  ~ModelLibrary();
  ModelLibrary(const ModelLibrary&) = delete;
  ModelLibrary& operator=(const ModelLibrary&) = delete;

  const ContainerApi& api() const noexcept { return api_; }
  const std::string& label() const noexcept { return label_; }
  /// SHA-256 of the library bytes; computed only when a pin was given ("" otherwise).
  const std::string& sha256() const noexcept { return sha256_; }
  /// Embedded CUDA kernels found in the bytes (best effort; for error messages).
  const CudaKernelInfo& kernels() const noexcept { return kernels_; }
  /// True when the library carries its own libstdc++ (static link) whose
  /// exception-handling emergency pool the destructor frees before dlclose.
  bool frees_own_eh_pool() const noexcept { return freeres_ != nullptr; }
  /// How much its imports need cuBLAS: the most of any import (shim/ops/gemm.hpp).
  shim::gemm::CublasUse cublas_use() const noexcept { return cublas_use_; }
  /// Which of its imports are bound to the SDK's CUDA hooks, and what bypasses them.
  const HookBinding& hooks() const noexcept { return hooks_; }

 private:
  ModelLibrary() = default;
  void* handle_ = nullptr;
  void (*freeres_)() = nullptr;  // the library's own __gnu_cxx::__freeres, if any
  ContainerApi api_;
  std::string label_;
  std::string sha256_;
  CudaKernelInfo kernels_;
  shim::gemm::CublasUse cublas_use_ = shim::gemm::CublasUse::kNone;
  HookBinding hooks_;
};

}  // namespace aoti_cuda::runtime
