// Private runtime: sharing model constants (parameters and buffers) across the
// methods of one Module (LoadOptions::share_constants_across_methods).
//
// Every method's model library holds its own copy of the module's constants.
// This class makes methods use one copy where the model libraries allow it:
//   1. read_table(): each delegate's constant table is read once, after its
//      container exists; install_before() orders delegates largest table first.
//   2. Before a delegate's weights blob is uploaded, try_adopt_all() binds ALL
//      its constants to copies an earlier delegate installed (same original
//      FQN, dtype and byte size); then the blob is never uploaded.
//   3. After a delegate uploaded its own blob, remember() records its constants
//      by original FQN (first one wins).
//   4. bind_remaining() (once every delegate has weights) binds each constant
//      whose FQN an earlier delegate holds with the same layout, so state one
//      method writes (e.g. a KV cache filled by prefill) is what the others read.
// Binding uses AOTInductorModelContainerUpdateUserManagedConstantBufferPairs;
// the aliases it makes are recorded in Delegate::shared_aliases.
// AOTI_CUDA_TRACE_SHARING=1 prints why a delegate uploads its own weights.
//
// Not thread-safe; used only while a Module loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/method.hpp"

namespace aoti_cuda::runtime {

class ConstantSharing {
 public:
  explicit ConstantSharing(TargetDevice target) : target_(target) {}

  /// Reads the delegate's constant table into d.constants / d.constants_known.
  static void read_table(Delegate& d);
  /// Install order: delegates with larger constant tables first, so that a
  /// method whose constants are a subset of an earlier one's can adopt them.
  static bool install_before(const Delegate& a, const Delegate& b) noexcept {
    return a.constants.size() > b.constants.size();
  }

  /// Binds every constant of `d` to an earlier delegate's copy; true when that
  /// worked and d's weights blob (weights_bytes) need not be uploaded.
  bool try_adopt_all(Delegate& d, std::uint64_t weights_bytes);
  /// Records the constants `d` installed from its own weights blob.
  void remember(const Delegate& d);
  /// Binds the constants of the delegates that did not adopt all of theirs.
  /// Throws kModel when a model library refuses the binding.
  void bind_remaining(const std::vector<std::unique_ptr<Method>>& methods);

  /// Constants bound to another method's copy so far.
  std::size_t shared_constants() const noexcept { return shared_constants_; }
  /// Bytes of weights blobs never uploaded because every constant was adopted.
  std::size_t shared_weights_bytes() const noexcept { return shared_weights_bytes_; }

 private:
  struct HeldConstant {
    AtenTensorHandle handle = nullptr;
    int32_t dtype = -1;
    std::size_t data_size = 0;
  };
  bool bind_delegate(Delegate& d);

  TargetDevice target_;
  std::map<std::string, HeldConstant> held_;  ///< installed so far, by original FQN (first wins)
  std::size_t shared_constants_ = 0;
  std::size_t shared_weights_bytes_ = 0;
};

}  // namespace aoti_cuda::runtime
