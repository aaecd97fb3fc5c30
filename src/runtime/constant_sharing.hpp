// Private runtime: which constants of different methods of one Module use a
// single copy — correct by default:
//
//   * Read-only constants (Parameter, TensorConstant, as GetConstantType
//     reports them) are deduplicated (LoadOptions::deduplicate_constants)
//     only when their bytes are identical: same original FQN, dtype and byte
//     size, and the two ranges of the weights blobs compare equal. The FQN
//     stands in for the layout, which the container API cannot report before
//     a blob is uploaded (a handle that only shares the bytes but not the
//     shape would break extern kernels that read its sizes).
//   * Mutable buffers are bound across methods only when LoadOptions::
//     share_state asks (all buffers, or a list of FQNs); then the first
//     installed method's copy (its initial bytes) is the one every method uses.
//   * Constants of unknown type, and every constant of a library whose table
//     cannot be read, are never bound.
//
// Steps (MethodLoader drives them):
//   1. read_table(): each delegate's constant table (names, FQNs, types,
//      dtypes, sizes) and where each constant's bytes lie in its weights blob
//      (unpadded or 64-byte padded chunks: the one whose total matches the
//      blob size; neither: no deduplication for that delegate).
//      install_before() orders delegates largest table first.
//   2. check_requests(): every FQN of share_state.fqns exists, with one dtype
//      and size (kNotFound / kInvalidArgument otherwise).
//   3. Per delegate, before its blob is uploaded: try_adopt_all() binds ALL
//      its constants to earlier copies when each one is an identical
//      read-only constant or requested state; the blob is then never uploaded.
//   4. Otherwise, after the upload, after_upload() binds its requested state
//      to the earlier copy (layouts compared) and records its constants.
// Binding uses AOTInductorModelContainerUpdateUserManagedConstantBufferPairs;
// the aliases it makes are recorded in Delegate::shared_aliases.
// AOTI_CUDA_TRACE_SHARING=1 prints why a delegate uploads its own weights.
//
// Not thread-safe; used only while a Module loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "runtime/method.hpp"

namespace aoti_cuda::runtime {

/// Offsets of chunks of `sizes` bytes laid end to end (padded to 64 bytes
/// each when `padded`); the total in `*total`.
std::vector<std::uint64_t> blob_offsets(const std::vector<std::size_t>& sizes, bool padded, std::uint64_t* total);

/// Binds `pairs` in d's container (UpdateUserManagedConstantBufferPairs,
/// validate_full_update = `full`); the aliases the library makes are recorded
/// in d.shared_aliases for release. False (everything undone) when the
/// library refuses; model_failure_detail() then says why.
bool bind_pairs(Delegate& d, int device, const std::vector<ContainerApi::ConstantMapEntry>& pairs, bool full);

/// Marks the storage of every read-only constant (ConstantEntry::read_only: parameters, tensor
/// constants and constants of type Unknown, the weights ExecuTorch's lowering hands Inductor) that the
/// containers of `delegates` use as memory no kernel writes (shim::is_program_constant), after their
/// weights are installed and before any call. A storage that any of them uses as state (a buffer, a
/// constant of unreported type) stays unmarked. Returns how many storages it marked.
std::size_t mark_program_constants(const std::vector<const Delegate*>& delegates);

class ConstantSharing {
 public:
  ConstantSharing(TargetDevice target, bool deduplicate, StateSharing share_state)
      : target_(target), deduplicate_(deduplicate), share_state_(std::move(share_state)) {}

  /// Reads the delegate's constant table into d.constants (see step 1).
  static void read_table(Delegate& d);
  /// Install order: delegates with larger constant tables first, so that a
  /// method whose constants are a subset of an earlier one's can adopt them.
  static bool install_before(const Delegate& a, const Delegate& b) noexcept {
    return a.constants.size() > b.constants.size();
  }

  /// Step 2. Throws kNotFound / kInvalidArgument naming the FQN.
  void check_requests(const std::vector<const Delegate*>& all) const;
  /// Step 3: true when every constant of `d` was bound to an earlier copy and
  /// its weights blob need not be uploaded.
  bool try_adopt_all(Delegate& d);
  /// Step 4, after `d` installed its own blob. Throws kInvalidArgument for a
  /// requested buffer whose layout differs, kModel when the library refuses.
  void after_upload(Delegate& d);

  /// For delegates that bind their constants themselves (per-FQN weights,
  /// runtime/fqn_weights.hpp), instead of try_adopt_all / after_upload:
  /// the earlier copy that requested shared state `e` of `d` must use, or
  /// nullptr when `d` keeps its own (not requested, the first holder, or,
  /// with StateSharing::all(), a different layout than `view`). Throws
  /// kInvalidArgument when an explicitly requested buffer's layout differs.
  AtenTensorHandle state_to_share(const Delegate& d, const ConstantEntry& e, const FqnWeightSpec& view) const;
  /// Records d's installed constants (d.in_use, where d holds its own copy) for
  /// later methods' shared state.
  void record_installed(const Delegate& d);
  /// Adds what such a delegate shared to the counters below.
  void count_shared(std::size_t deduplicated_constants, std::size_t deduplicated_bytes, std::size_t state_constants) {
    deduplicated_constants_ += deduplicated_constants;
    deduplicated_bytes_ += deduplicated_bytes;
    shared_state_constants_ += state_constants;
  }

  /// Counts for LoadStats.
  std::size_t deduplicated_constants() const noexcept { return deduplicated_constants_; }
  std::size_t shared_state_constants() const noexcept { return shared_state_constants_; }
  std::size_t deduplicated_bytes() const noexcept { return deduplicated_bytes_; }
  double compare_ms() const noexcept { return compare_ms_; }

 private:
  struct Held {
    const Delegate* owner = nullptr;
    std::size_t index = 0;  ///< in owner->constants
    AtenTensorHandle handle = nullptr;
  };
  bool shares_state(const ConstantEntry& e) const;
  bool explicitly_requested(const ConstantEntry& e) const;
  const Held* find_match(const Delegate& d, const ConstantEntry& e);

  TargetDevice target_;
  bool deduplicate_;
  StateSharing share_state_;
  std::multimap<std::string, Held> held_;  ///< constants installed from a blob so far, by FQN
  std::size_t deduplicated_constants_ = 0;
  std::size_t shared_state_constants_ = 0;
  std::size_t deduplicated_bytes_ = 0;
  double compare_ms_ = 0;
};

}  // namespace aoti_cuda::runtime
