// Private runtime: a Module's mutable state (buffers such as KV caches) and
// its Sessions, by copy-swap residency.
//
// The model libraries read and write each buffer at a fixed device address
// (the "live" copy inside the container; CUDA graphs captured over it stay
// valid). Every state owner — the Module's default state and each Session —
// has a storage area holding one copy of every buffer while another owner's
// copy is live. A call with owner O first makes O resident: when it is not,
// it queues on the call's stream copies live -> storage of the resident owner
// and storage of O -> live. A buffer several methods share (share_state) is
// one entry; a constant of unknown type counts as state.
//
// Initial bytes (Session creation and reset) come from the weights blob
// ranges; all-zero buffers (typical KV caches) are memset, the others are
// copied once to the device at the first create_session().
//
// Ordering: calls of stateful methods enter one at a time (a mutex held for
// the whole call); each waits, on its stream, for an event recorded at the end
// of the previous stateful call, so state is never touched by two streams at
// once. Stateless methods never enter.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "runtime/method.hpp"

namespace aoti_cuda::runtime {

/// Device (or, for CPU modules, host) storage of one copy of the state.
struct StateOwner {
  void* storage = nullptr;
};

}  // namespace aoti_cuda::runtime

namespace aoti_cuda {
struct Session::Impl {
  runtime::StateManager* manager = nullptr;
  runtime::StateOwner owner;
};
}  // namespace aoti_cuda

namespace aoti_cuda::runtime {

class StateManager {
 public:
  explicit StateManager(TargetDevice target) : target_(target) {}
  ~StateManager();
  StateManager(const StateManager&) = delete;
  StateManager& operator=(const StateManager&) = delete;

  /// Finds every buffer of the loaded methods (after all weights and
  /// bindings are installed) and points the stateful methods' Method::state here.
  void collect(std::vector<std::unique_ptr<Method>>& methods);
  /// Bytes of one copy of the state.
  std::size_t state_bytes() const noexcept { return total_; }

  /// Held for the duration of one call of a stateful method (see enter()).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : manager_(o.manager_), stream_(o.stream_) { o.manager_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();

   private:
    friend class StateManager;
    StateManager* manager_ = nullptr;
    void* stream_ = nullptr;
  };
  /// THE executor hook: call once per call, before any of its work is queued
  /// on `stream`, and keep the lease until all of it is queued. Methods
  /// without state get an empty lease. Throws kInvalidArgument for a session
  /// of another Module (or a moved-from one), CUDA errors as kCuda.
  static Lease enter(Method& m, Session* session, void* stream);

  /// Module::create_session / Session members.
  void create(Session::Impl& s);
  void reset(Session::Impl& s, void* stream);
  /// Module::reset_state: the default (no-session) state to its initial bytes.
  void reset_default(void* stream);
  void destroy(Session::Impl& s) noexcept;

 private:
  struct Entry {
    char* live = nullptr;        ///< the container's copy (chunk start)
    std::size_t bytes = 0;
    std::size_t offset = 0;      ///< in every owner's storage
    ByteView initial;            ///< initial bytes in the weights blob (empty: snapshot taken at load)
    bool zero = false;           ///< initial bytes are all zero
    const char* initial_dev = nullptr;  ///< device copy of the initial bytes (in initial_ or snapshot_)
    std::string label;           ///< "fqn (method)" for messages
  };
  void prepare();                            // first create(): default storage, initial copies
  void fill_initial(char* base, cudaStream_t s);  // base nullptr: into the live copies
  void reset_owner(StateOwner& owner, void* stream);
  void require_known(const char* what) const;
  void swap_in(StateOwner* want, cudaStream_t s);
  void order_after_last(cudaStream_t s);
  void mark_last(cudaStream_t s) noexcept;
  cudaStream_t aux_stream();
  void copy(void* dst, const void* src, std::size_t n, cudaStream_t s);

  TargetDevice target_;
  std::vector<Entry> entries_;
  std::size_t total_ = 0;
  std::vector<std::string> unknown_;  ///< delegates whose state cannot be enumerated
  std::mutex mu_;                     ///< one stateful call (or session operation) at a time
  StateOwner default_;
  StateOwner* resident_ = &default_;  ///< whose copy is live (nullptr: a destroyed session's)
  bool prepared_ = false;
  void* initial_ = nullptr;           ///< device copy of the non-zero initial bytes (first create())
  void* snapshot_ = nullptr;          ///< load-time copy of buffers whose blob range is unknown
  cudaEvent_t last_ = nullptr;        ///< end of the last stateful call's work
  void* last_stream_ = nullptr;
  bool last_valid_ = false;
  cudaStream_t aux_ = nullptr;        ///< session operations without a caller stream
};

}  // namespace aoti_cuda::runtime
