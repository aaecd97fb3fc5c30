// Private runtime: what a loaded method is made of (delegates with their model
// library and container, the pool of per-call slots), and the small RAII
// scopes and helpers every stage (loading, constant sharing, execution) uses
// to talk to a model library through the shim.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/module.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/shim.h"
#include "aoti_cuda/tensor.hpp"
#include "runtime/driver_modules.hpp"
#include "runtime/library_loader.hpp"
#include "shim/allocator.hpp"
#include "shim/op_settings.hpp"

namespace aoti_cuda::runtime {

/// The device a Module runs on, as every stage needs it.
struct TargetDevice {
  Device device = Device::cpu();
  int gpu_sm = 0;  ///< e.g. 90 for compute capability 9.0 (CUDA modules)

  /// CUDA ordinal for DeviceGuard, -1 for CPU modules (the guard then does nothing).
  int ordinal() const noexcept { return device.is_cuda() ? device.index : -1; }
};

/// AOTInductor's ConstantType codes (GetConstantType), plus kNotReported for a
/// library without GetConstantType (or a code outside 0..3).
enum class ConstantType : int32_t {
  kNotReported = -1,
  kUnknown = 0,
  kParameter = 1,
  kBuffer = 2,
  kTensorConstant = 3,
  kFolded = 4
};

/// One entry of a model library's constant table (non-folded constants only).
struct ConstantEntry {
  std::string name, fqn;
  int32_t dtype = -1;
  std::size_t data_size = 0;
  ConstantType type = ConstantType::kNotReported;
  std::uint64_t blob_offset = 0;  ///< where its bytes start in the weights blob (Delegate::blob_layout_known)
  /// Its initial bytes in the program's files, `data_size` of them, when known:
  /// its range of the weights blob, or its per-FQN storage (empty otherwise).
  ByteView initial;

  /// The model never writes it: parameters, tensor constants, and constants
  /// the library reports as Unknown. Unknown is what Inductor reports for a
  /// tensor that was neither a parameter nor a registered buffer of the module
  /// it compiled (ExecuTorch's lowering hands it weights that way); a tensor a
  /// graph mutates is always a registered buffer (torch.export allows in-place
  /// updates of buffers only), which the library reports as Buffer.
  bool read_only() const noexcept {
    return type == ConstantType::kParameter || type == ConstantType::kTensorConstant || type == ConstantType::kUnknown;
  }
  /// Buffers, and constants whose type the library cannot tell: sessions keep
  /// a copy of these, and they are shared across methods only on request.
  bool holds_state() const noexcept { return type == ConstantType::kBuffer || type == ConstantType::kNotReported; }
};

/// One delegate call site of a method: its model library and container.
struct Delegate {
  const DelegateSpec* spec = nullptr;
  std::string label;  ///< "method 'forward' delegate 0 (.so 'k' in file)", for messages
  std::unique_ptr<ModelLibrary> library;
  ContainerHandle container = nullptr;
  std::size_t n_in = 0;
  std::size_t n_out = 0;
  int cuda_device = -1;            ///< -1 for CPU modules
  ModuleTracker kernel_modules;    ///< CUDA modules the model's runtime loaded
  /// Handles the library created while installing its weights: one per
  /// non-folded constant, in constant-table order. Owned by the container.
  std::vector<AtenTensorHandle> constant_handles;
  /// Aliases the library made of constants shared from another method
  /// (UpdateUserManagedConstantBufferPairs); PyTorch 2.11 never frees them, so
  /// they are deleted here once the container is gone.
  std::vector<AtenTensorHandle> shared_aliases;
  /// The library's constant table (read at load); constants_known says it was
  /// readable, blob_layout_known that each entry's blob_offset is right.
  std::vector<ConstantEntry> constants;
  bool constants_known = false;
  bool blob_layout_known = false;
  /// Parallel to `constants`: the handle whose memory the container uses for
  /// each constant (its own, or another method's it was bound to). Empty when
  /// the handles are unknown.
  std::vector<AtenTensorHandle> in_use;
  /// True when every constant came from earlier methods and the weights blob
  /// was never uploaded (ConstantSharing::try_adopt_all).
  bool constants_adopted = false;
  /// Per-FQN weights (runtime/fqn_weights.hpp): the handles this runtime made
  /// for the constants it bound (deleted after the container), and the memory
  /// they view (shared with the delegates that bind the same read-only storage;
  /// freed with the last of them).
  std::vector<AtenTensorHandle> fqn_handles;
  std::vector<std::shared_ptr<void>> fqn_storage;

  Delegate() = default;
  Delegate(const Delegate&) = delete;
  Delegate& operator=(const Delegate&) = delete;
  ~Delegate();  ///< deletes the container, then unloads the kernel modules (library dlclosed last)
};

class SlotGraphs;   // runtime/graph_cache.hpp
struct MethodGraphs;

/// A value of the method's value table during one call.
struct Value {
  Tensor tensor;
  AtenTensorHandle handle = nullptr;  ///< the shim handle owned by tensor's owner, when it came from the model
};

/// Resources of one in-flight call (a method allows LoadOptions::num_models).
struct Slot {
  int device = -1;                ///< CUDA ordinal, -1 for CPU modules
  cudaStream_t stream = nullptr;  ///< the Module's own stream for this slot
  void* pinned = nullptr;         ///< host staging for inputs
  std::size_t pinned_capacity = 0;
  cudaEvent_t staging_done = nullptr;  ///< recorded after the last copy out of `pinned`
  bool staging_pending = false;
  void* pinned_out = nullptr;          ///< host staging for outputs (filled and drained within one call)
  std::size_t pinned_out_capacity = 0;
  /// Per-call scratch kept between calls so a steady-state call does not
  /// allocate them again (emptied, capacity kept, at the end of each call).
  std::vector<Value> values;
  std::vector<AtenTensorHandle> ins, outs;
  /// This slot's captured graphs (created on first use).
  std::unique_ptr<SlotGraphs> graphs;
  /// Device blocks the model freed during this slot's calls, for its next
  /// calls (shim/allocator.hpp). Destroyed after the stream: it waits for the
  /// last call by its own event.
  shim::BlockCache block_cache;
  /// Caller streams (RunOptions::stream) this slot's calls ran on: their
  /// cuBLAS workspaces are released with the slot (shim/ops/gemm.hpp).
  std::vector<void*> caller_streams;

  /// `block_cache_bytes`: the block cache's capacity (TuningOptions::block_cache_mib).
  explicit Slot(std::size_t block_cache_bytes);
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot();

  /// The slot's stream, created on first use.
  cudaStream_t own_stream();
  /// Records that a call runs on the caller's `stream` (cheap after the first time).
  void used_caller_stream(void* stream);
  /// A pinned buffer of at least `bytes`, free of in-flight copies.
  void* staging(std::size_t bytes);
  /// Records that copies out of the staging buffer were queued on `s`.
  void staging_used(cudaStream_t s);
  /// A pinned buffer of at least `bytes` for downloading outputs (no copy in flight uses it).
  void* output_staging(std::size_t bytes);
};

/// A loaded method: its delegates (parallel to spec->delegates) and slot pool.
class StateManager;

struct Method {
  const MethodSpec* spec = nullptr;
  /// The Module's state manager when this method holds mutable state (calls
  /// go through StateManager::enter), else nullptr.
  StateManager* state = nullptr;
  std::vector<std::unique_ptr<Delegate>> delegates;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<std::size_t> free_slots;
  std::mutex mu;
  std::condition_variable cv;
  /// CUDA graph settings and counters (runtime/graph_cache.hpp).
  std::unique_ptr<MethodGraphs> graphs;
  /// The operator shims' tuning, installed for each call (shim/op_settings.hpp).
  shim::OpSettings op_settings;
  /// Module::method_meta, built on first request (names and dynamic dimensions
  /// are read from the libraries, which costs a scan of their bytes).
  mutable std::once_flag meta_once;
  mutable MethodMeta meta;

  Method();
  ~Method();
};

/// Takes a free slot of a method (waits for one) and gives it back.
class SlotLease {
 public:
  explicit SlotLease(Method& m);
  ~SlotLease();
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  Slot& slot() { return *m_.slots[index_]; }

 private:
  Method& m_;
  std::size_t index_ = 0;
};

/// Installs `stream` as the shim's current stream of `device` on this thread.
class CurrentStreamScope {
 public:
  CurrentStreamScope(int device, void* stream);
  ~CurrentStreamScope();
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  int device_;
  void* previous_ = nullptr;
  bool active_ = false;
};

/// The reason of the last failed shim call / model entry point on this thread.
std::string model_failure_detail(const ContainerApi& api);
/// The code for a failed container entry point: kOutOfMemory when it failed
/// because a shim allocation did (the caller can free memory and retry),
/// kModel otherwise. Read it before deleting handles.
ErrorCode model_failure_code() noexcept;

/// Owner of one AtenTensorHandle, shared by the Tensors wrapping it.
std::shared_ptr<void> own_handle(AtenTensorHandle h);

/// "tensor", "int", ... for messages.
const char* kind_name(ValueKind k);

/// Fills meta's input/output names and dynamic dimensions from the method's
/// delegates (method_io.cpp). `meta.inputs` / `outputs` must be filled.
void describe_io(const Method& m, MethodMeta& meta);

}  // namespace aoti_cuda::runtime
