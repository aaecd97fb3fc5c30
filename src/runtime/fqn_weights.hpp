// Private runtime: installing the weights of a delegate whose program stores
// them per tensor (ExecuTorch 1.5, ExporterGeneration::kFqnWeights: ETCUDAFQN3
// metadata, one `cuda_fqn_weight:<cpu|cuda>:<fqn>` storage per constant, one
// store for every method of the file).
//
// Why the constants are bound, not assembled into a blob: ExecuTorch 1.5
// compiles its model libraries with package_constants_in_so=False and
// AOTInductor's "pickle_weights" format, so AOTInductor serializes no weights
// blob at all. The library is built without external-blob support (or, in
// ExecuTorch's low-memory mode, for an external blob of 0 bytes), and its
// AOTInductorModelUpdateConstantsFromBlob reads nothing: a blob assembled
// from the storages, in the library's constant-table order, would never be
// read. What such a library takes is user-managed constants:
// AOTInductorModelContainerUpdateUserManagedConstantBufferPairs binds, by
// constant name, one tensor handle per constant over memory the caller owns
// (no copy), which is also how ExecuTorch's own runtime binds them.
//
// FqnWeightInstaller::install, per delegate (after ConstantSharing::read_table):
//   1. match: each non-folded constant of the library's table to the metadata
//      entry of its original FQN (else of its name). A constant without one,
//      or whose dtype differs, or whose storage is larger than the library's
//      data size allows, fails the load with kInvalidProgram: the files do not
//      belong to this library.
//   2. memory: read-only constants (parameters, tensor constants, Unknown)
//      use one copy per storage key for the whole Module when
//      LoadOptions::deduplicate_constants is on (the file says they are the
//      same bytes); buffers (state) get their own copy per delegate, unless
//      LoadOptions::share_state asks to share them and an earlier method holds
//      one with the same view (ConstantSharing::state_to_share). A copy is
//      max(storage bytes, the library's data size) long, zero-padded. CUDA
//      constants (device type 1) go to device memory through the pinned
//      staging pipeline of weight_upload.hpp (read from the .ptd with pread);
//      CPU constants (device type 0), and every constant of a CPU Module,
//      to host memory.
//   3. bind: one aoti_torch_create_tensor_from_blob_v2 view per constant (the
//      metadata's sizes, strides and storage offset), all bound in one call
//      with validate_full_update (the library refuses a device type it did not
//      expect). Handles and memory are owned by the Delegate
//      (Delegate::fqn_handles, fqn_storage).
// Sessions and reset_state read a buffer's initial bytes from its storage
// (ConstantEntry::initial) when the library's data size equals the storage
// size, else from a snapshot taken at load (runtime/state.hpp).
//
// Not thread-safe; one installer per Module load.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "runtime/constant_sharing.hpp"
#include "runtime/method.hpp"
#include "runtime/weight_upload.hpp"

namespace aoti_cuda::runtime {

/// For each of d's constants (d.constants, table order), the index of its
/// entry in d.spec->fqn_weights (step 1 above). Throws kInvalidProgram naming
/// the constant when one has no entry or does not fit it, kLoad when the
/// library cannot describe its constants.
std::vector<std::size_t> match_fqn_constants(const Delegate& d);

/// Total storage bytes of a delegate's per-FQN weights.
std::size_t fqn_weight_bytes(const DelegateSpec& ds) noexcept;

class FqnWeightInstaller {
 public:
  /// `staging`: pinned blocks for the uploads (may be nullptr); must outlive the installer.
  FqnWeightInstaller(TargetDevice target, bool deduplicate, LoadStats& stats, StagingBlocks* staging)
      : target_(target), deduplicate_(deduplicate), stats_(stats), staging_(staging) {}

  /// Steps 1-3 for `d` (generation kFqnWeights). Throws Error: kInvalidProgram
  /// (files that do not fit the library), kLoad (a library that cannot bind
  /// user-managed constants), kModel (the library refused), kCuda /
  /// kOutOfMemory (allocation, upload), kInvalidArgument (share_state).
  void install(Delegate& d, ConstantSharing& sharing);

 private:
  struct Copy {
    std::shared_ptr<void> memory;  // owns the bytes
    void* data = nullptr;
    std::size_t size = 0;          // bytes allocated
  };
  struct Shared {  // what a delegate did not install itself
    std::size_t constants = 0, bytes = 0;  // read-only constants (and their storage bytes) of earlier delegates
    std::size_t state = 0;                 // buffers of earlier delegates (LoadOptions::share_state)
  };
  Copy make_copy(const FqnWeightSpec& w, std::size_t bytes, bool host, std::vector<RecordedCopy>& uploads);
  Copy read_only_copy(const FqnWeightSpec& w, std::size_t bytes, bool host, std::vector<RecordedCopy>& uploads,
                      Shared& shared);
  AtenTensorHandle view(const Delegate& d, const FqnWeightSpec& w, void* data, bool host) const;
  void upload(const Delegate& d, const std::vector<RecordedCopy>& uploads);

  TargetDevice target_;
  bool deduplicate_;
  LoadStats& stats_;
  StagingBlocks* staging_;
  std::map<std::string, Copy> read_only_;  ///< storage key -> the Module's one copy of a read-only storage
};

}  // namespace aoti_cuda::runtime
