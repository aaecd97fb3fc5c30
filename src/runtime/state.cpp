// Mutable state and sessions. See state.hpp.
#include "runtime/state.hpp"

#include <algorithm>
#include <cstring>

#include "common/cuda.hpp"
#include "common/host_memory.hpp"
#include "common/text.hpp"
#include "runtime/weights_io.hpp"

namespace aoti_cuda::runtime {
namespace {

using common::check_cuda;
using common::DeviceGuard;

constexpr std::size_t kAlign = 64;  // like the containers' own constant chunks

// Start of the memory a constant handle views (its data pointer minus the storage offset).
char* chunk_start(AtenTensorHandle h) {
  void* data = nullptr;
  int64_t offset = 0;
  int32_t dtype = 0;
  if (aoti_torch_get_data_ptr(h, &data) || aoti_torch_get_storage_offset(h, &offset) || aoti_torch_get_dtype(h, &dtype)) {
    return nullptr;
  }
  return static_cast<char*>(data) - offset * static_cast<int64_t>(aoti_torch_dtype_element_size(dtype));
}

bool all_zero(ByteView b) {
  return b.size == 0 || (b.data[0] == 0 && std::memcmp(b.data, b.data + 1, b.size - 1) == 0);
}

bool holds_state(const ConstantEntry& e) { return e.holds_state(); }

}  // namespace

StateManager::~StateManager() {
  DeviceGuard guard(target_.ordinal(), DeviceGuard::OnFailure::kIgnore);
  if (target_.device.is_cuda()) {
    if (last_ != nullptr) (void)cudaEventSynchronize(last_), (void)cudaEventDestroy(last_);
    if (aux_ != nullptr) (void)cudaStreamSynchronize(aux_), (void)cudaStreamDestroy(aux_);
    for (void* p : {default_.storage, initial_, snapshot_}) {
      if (p != nullptr) (void)cudaFree(p);
    }
    (void)cudaGetLastError();
  } else {
    for (void* p : {default_.storage, initial_, snapshot_}) common::host_free(p);
  }
}

void StateManager::collect(std::vector<std::unique_ptr<Method>>& methods) {
  std::vector<std::size_t> needs_snapshot;
  for (const auto& m : methods) {
    bool stateful = false;
    for (const auto& d : m->delegates) {
      if (!d->constants_known || d->in_use.size() != d->constants.size()) {
        // Unknown state: not isolated by sessions (create_session refuses), and not serialized.
        if (!d->constants_known || std::any_of(d->constants.begin(), d->constants.end(), holds_state)) {
          unknown_.push_back(d->label);
        }
        continue;
      }
      for (std::size_t k = 0; k < d->constants.size(); ++k) {
        const ConstantEntry& e = d->constants[k];
        if (!holds_state(e)) continue;
        stateful = true;
        char* live = chunk_start(d->in_use[k]);
        if (live == nullptr) throw Error(ErrorCode::kInternal, d->label + ": cannot read buffer '" + e.fqn + "'");
        auto same = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& x) { return x.live == live; });
        const bool own = k < d->constant_handles.size() && d->constant_handles[k] == d->in_use[k];
        if (same == entries_.end()) {
          Entry x;
          x.live = live;
          x.bytes = e.data_size;
          x.offset = total_;
          x.label = "'" + e.fqn + "' (" + d->label + ")";
          total_ += (e.data_size + kAlign - 1) / kAlign * kAlign;
          entries_.push_back(x);
          same = entries_.end() - 1;
        }
        // Only the method that installed the buffer from its files knows its initial bytes.
        if (own && e.initial.size == e.data_size) same->initial = e.initial;
      }
    }
    if (stateful) m->state = this;
  }
  // Buffers whose blob range is unknown: keep their load-time bytes now, before any call writes them.
  std::size_t snap = 0;
  for (const Entry& x : entries_) snap += x.initial.empty() && x.bytes > 0 ? (x.bytes + kAlign - 1) / kAlign * kAlign : 0;
  if (snap == 0) return;
  DeviceGuard guard(target_.ordinal());
  if (target_.device.is_cuda()) check_cuda(cudaMalloc(&snapshot_, snap), "cudaMalloc (state snapshot)");
  else snapshot_ = common::host_allocate(snap);
  std::size_t at = 0;
  for (Entry& x : entries_) {
    if (!x.initial.empty() || x.bytes == 0) continue;
    x.initial_dev = static_cast<char*>(snapshot_) + at;
    copy(const_cast<char*>(x.initial_dev), x.live, x.bytes, aux_stream());
    at += (x.bytes + kAlign - 1) / kAlign * kAlign;
  }
  if (target_.device.is_cuda()) check_cuda(cudaStreamSynchronize(aux_stream()), "snapshotting the initial state");
}

cudaStream_t StateManager::aux_stream() {
  if (aux_ == nullptr && target_.device.is_cuda()) {
    check_cuda(cudaStreamCreateWithFlags(&aux_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (state)");
  }
  return aux_;
}

void StateManager::copy(void* dst, const void* src, std::size_t n, cudaStream_t s) {
  if (n == 0 || dst == src) return;
  if (!target_.device.is_cuda()) {
    std::memcpy(dst, src, n);
    return;
  }
  check_cuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s), "cudaMemcpyAsync (session state)");
}

void StateManager::prepare() {
  if (prepared_) return;
  DeviceGuard guard(target_.ordinal());
  const bool cuda = target_.device.is_cuda();
  std::size_t non_zero = 0;
  for (Entry& x : entries_) {
    if (x.initial_dev != nullptr) continue;  // snapshot
    x.zero = all_zero(x.initial);
    if (!x.zero) non_zero += (x.bytes + kAlign - 1) / kAlign * kAlign;
  }
  if (non_zero > 0) {
    if (cuda) check_cuda(cudaMalloc(&initial_, non_zero), "cudaMalloc (initial state)");
    else initial_ = common::host_allocate(non_zero);
    std::size_t at = 0;
    for (Entry& x : entries_) {
      if (x.zero || x.initial_dev != nullptr) continue;
      x.initial_dev = static_cast<char*>(initial_) + at;
      copy(const_cast<char*>(x.initial_dev), x.initial.data, x.bytes, aux_stream());
      at += (x.bytes + kAlign - 1) / kAlign * kAlign;
    }
    if (cuda) check_cuda(cudaStreamSynchronize(aux_stream()), "copying the initial state");
  }
  for (const Entry& x : entries_) release_blob_pages(x.initial);
  if (cuda) {
    check_cuda(cudaMalloc(&default_.storage, std::max<std::size_t>(total_, 1)), "cudaMalloc (default state storage)");
  } else {
    default_.storage = common::host_allocate(std::max<std::size_t>(total_, 1));
  }
  prepared_ = true;
}

void StateManager::fill_initial(char* base, cudaStream_t s) {
  for (const Entry& x : entries_) {
    char* dst = base != nullptr ? base + x.offset : x.live;
    if (x.initial_dev != nullptr) {
      copy(dst, x.initial_dev, x.bytes, s);
    } else if (!target_.device.is_cuda()) {
      std::memset(dst, 0, x.bytes);
    } else {
      check_cuda(cudaMemsetAsync(dst, 0, x.bytes, s), "cudaMemsetAsync (session state)");
    }
  }
}

void StateManager::order_after_last(cudaStream_t s) {
  if (last_valid_ && target_.device.is_cuda() && last_stream_ != static_cast<void*>(s)) {
    check_cuda(cudaStreamWaitEvent(s, last_, 0), "cudaStreamWaitEvent (state order)");
  }
}

void StateManager::mark_last(cudaStream_t s) noexcept {
  if (!target_.device.is_cuda()) return;
  if (last_ == nullptr && cudaEventCreateWithFlags(&last_, cudaEventDisableTiming) != cudaSuccess) {
    last_ = nullptr;
    last_valid_ = false;
    (void)cudaGetLastError();
    return;
  }
  last_valid_ = cudaEventRecord(last_, s) == cudaSuccess;
  last_stream_ = s;
  if (!last_valid_) {
    // Nothing to wait on: order the next user by draining this stream now.
    (void)cudaStreamSynchronize(s);
    (void)cudaGetLastError();
  }
}

void StateManager::swap_in(StateOwner* want, cudaStream_t s) {
  if (resident_ != nullptr) {
    for (const Entry& x : entries_) copy(static_cast<char*>(resident_->storage) + x.offset, x.live, x.bytes, s);
  }
  for (const Entry& x : entries_) copy(x.live, static_cast<char*>(want->storage) + x.offset, x.bytes, s);
  resident_ = want;
}

StateManager::Lease StateManager::enter(Method& m, Session* session, void* stream) {
  if (session != nullptr && !session->impl_) {
    throw Error(ErrorCode::kInvalidArgument, "RunOptions::session is an empty (moved-from or default) Session");
  }
  Lease lease;
  if (m.state == nullptr) return lease;
  StateManager& sm = *m.state;
  if (session != nullptr && session->impl_->manager != &sm) {
    throw Error(ErrorCode::kInvalidArgument,
                "RunOptions::session belongs to another Module (method '" + m.spec->name + "')");
  }
  sm.mu_.lock();
  lease.manager_ = &sm;  // from here on the destructor unlocks
  lease.stream_ = stream;
  auto s = static_cast<cudaStream_t>(stream);
  sm.order_after_last(s);
  StateOwner* want = session != nullptr ? &session->impl_->owner : &sm.default_;
  if (want != sm.resident_) {
    common::DeviceGuard guard(sm.target_.ordinal());
    sm.swap_in(want, s);
  }
  return lease;
}

StateManager::Lease::~Lease() {
  if (manager_ == nullptr) return;
  manager_->mark_last(static_cast<cudaStream_t>(stream_));
  manager_->mu_.unlock();
}

void StateManager::require_known(const char* what) const {
  if (!unknown_.empty()) {
    throw Error(ErrorCode::kUnsupported, std::string(what) + ": the state of " + common::join(unknown_) +
                                             " cannot be enumerated (its model library does not describe its "
                                             "constants), so it cannot be isolated or reset");
  }
}

void StateManager::create(Session::Impl& s) {
  require_known("create_session");
  std::lock_guard<std::mutex> lock(mu_);
  prepare();
  DeviceGuard guard(target_.ordinal());
  const bool cuda = target_.device.is_cuda();
  if (cuda) check_cuda(cudaMalloc(&s.owner.storage, std::max<std::size_t>(total_, 1)), "cudaMalloc (session state)");
  else s.owner.storage = common::host_allocate(std::max<std::size_t>(total_, 1));
  s.manager = this;
  try {
    fill_initial(static_cast<char*>(s.owner.storage), aux_stream());
    if (cuda) check_cuda(cudaStreamSynchronize(aux_stream()), "initializing a session's state");
  } catch (...) {
    if (cuda) (void)cudaFree(s.owner.storage);
    else common::host_free(s.owner.storage);
    s.owner.storage = nullptr;
    s.manager = nullptr;
    throw;
  }
}

void StateManager::reset(Session::Impl& s, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  reset_owner(s.owner, stream);
}

void StateManager::reset_default(void* stream) {
  if (entries_.empty() && unknown_.empty()) return;  // stateless
  require_known("reset_state");
  std::lock_guard<std::mutex> lock(mu_);
  prepare();  // the device copy of non-zero initial bytes (and the default storage) exist from here on
  reset_owner(default_, stream);
}

// The caller holds mu_. The resident owner's bytes are the live copies; any
// other owner's are in its storage.
void StateManager::reset_owner(StateOwner& owner, void* stream) {
  DeviceGuard guard(target_.ordinal());
  const cudaStream_t on = stream != nullptr ? static_cast<cudaStream_t>(stream) : aux_stream();
  order_after_last(on);
  fill_initial(resident_ == &owner ? nullptr : static_cast<char*>(owner.storage), on);
  mark_last(on);
  if (stream == nullptr && target_.device.is_cuda()) check_cuda(cudaStreamSynchronize(on), "resetting state");
}

void StateManager::destroy(Session::Impl& s) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceGuard guard(target_.ordinal(), DeviceGuard::OnFailure::kIgnore);
  if (target_.device.is_cuda()) {
    if (last_valid_) (void)cudaEventSynchronize(last_);
    (void)cudaFree(s.owner.storage);
    (void)cudaGetLastError();
  } else {
    common::host_free(s.owner.storage);
  }
  if (resident_ == &s.owner) resident_ = nullptr;  // the live copy is garbage now: nobody saves it
  s.owner.storage = nullptr;
  s.manager = nullptr;
}

}  // namespace aoti_cuda::runtime

// ---------------------------------------------------------------------------
namespace aoti_cuda {

Session::Session() noexcept = default;
Session::Session(Session&&) noexcept = default;

Session& Session::operator=(Session&& o) noexcept {
  if (this != &o) {
    if (impl_ && impl_->manager != nullptr) impl_->manager->destroy(*impl_);
    impl_ = std::move(o.impl_);
  }
  return *this;
}

Session::~Session() {
  if (impl_ && impl_->manager != nullptr) impl_->manager->destroy(*impl_);
}

void Session::reset(void* stream) {
  if (!impl_ || impl_->manager == nullptr) throw Error(ErrorCode::kInvalidArgument, "use of an empty aoti_cuda::Session");
  impl_->manager->reset(*impl_, stream);
}

std::size_t Session::state_bytes() const {
  if (!impl_ || impl_->manager == nullptr) throw Error(ErrorCode::kInvalidArgument, "use of an empty aoti_cuda::Session");
  return impl_->manager->state_bytes();
}

}  // namespace aoti_cuda
