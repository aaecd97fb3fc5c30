// Private: a per-thread pool of small blocks for the records the call path
// makes and drops on every call (a shared_ptr's control block, a tensor's
// storage record), so that a steady-state call does not go to the heap.
//
// ChunkAllocator<T> is a standard allocator for std::allocate_shared and the
// shared_ptr constructors that take one: single objects of up to kChunkBytes
// come from the calling thread's pool (at most kPooledChunks kept), anything
// else from operator new. A chunk freed on another thread than the one that
// took it joins that thread's pool. The pool's state word is trivially
// destructible: a chunk freed while its thread (or the process) is ending,
// after the pool was destroyed, goes straight to operator delete.
#pragma once

#include <cstddef>
#include <new>

namespace aoti_cuda::common {

/// The calling thread's instance of Pool, made on first use; nullptr once that
/// instance has been destroyed (the thread, or the process, is ending), when
/// callers fall back to plain new/delete. The state word is trivially
/// destructible, so it can still be read then. Pool's destructor frees what
/// it holds (anything returned while it runs is freed directly).
template <class Pool>
Pool* this_thread_pool() noexcept {
  enum class State : unsigned char { kUnborn, kLive, kGone };
  static thread_local State state = State::kUnborn;
  if (state == State::kGone) return nullptr;
  struct Holder {
    Pool pool;
    ~Holder() { state = State::kGone; }  // before `pool` is destroyed
  };
  static thread_local Holder holder;
  state = State::kLive;
  return &holder.pool;
}

constexpr std::size_t kChunkBytes = 128;
constexpr std::size_t kPooledChunks = 512;

/// One chunk of kChunkBytes (from the pool when it has one).
void* take_chunk();
/// Returns a chunk from take_chunk() to the calling thread's pool, or frees it.
void give_chunk(void* chunk) noexcept;

template <class T>
struct ChunkAllocator {
  using value_type = T;
  ChunkAllocator() = default;
  template <class U>
  ChunkAllocator(const ChunkAllocator<U>&) noexcept {}
  static constexpr bool kPooled = sizeof(T) <= kChunkBytes && alignof(T) <= alignof(std::max_align_t);

  T* allocate(std::size_t n) {
    if (kPooled && n == 1) return static_cast<T*>(take_chunk());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (kPooled && n == 1) give_chunk(p);
    else ::operator delete(p);
  }
  template <class U>
  bool operator==(const ChunkAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const ChunkAllocator<U>&) const noexcept { return false; }
};

}  // namespace aoti_cuda::common
