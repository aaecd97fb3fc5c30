// Per-thread pool of small blocks. See chunk_pool.hpp.
#include "common/chunk_pool.hpp"

#include <cstdint>

namespace aoti_cuda::common {
namespace {

enum class PoolState : std::uint8_t { kUnborn, kLive, kGone };
thread_local PoolState t_state = PoolState::kUnborn;

struct ChunkPool {
  void* head = nullptr;  // chunks linked through their first word
  std::size_t count = 0;
  ~ChunkPool() {
    t_state = PoolState::kGone;
    while (head != nullptr) {
      void* next = *static_cast<void**>(head);
      ::operator delete(head);
      head = next;
    }
  }
};

ChunkPool* pool() noexcept {
  if (t_state == PoolState::kGone) return nullptr;
  thread_local ChunkPool p;
  t_state = PoolState::kLive;
  return &p;
}

}  // namespace

void* take_chunk() {
  if (ChunkPool* p = pool(); p != nullptr && p->head != nullptr) {
    void* c = p->head;
    p->head = *static_cast<void**>(c);
    --p->count;
    return c;
  }
  return ::operator new(kChunkBytes);
}

void give_chunk(void* chunk) noexcept {
  if (chunk == nullptr) return;
  ChunkPool* p = pool();
  if (p == nullptr || p->count >= kPooledChunks) {
    ::operator delete(chunk);
    return;
  }
  *static_cast<void**>(chunk) = p->head;
  p->head = chunk;
  ++p->count;
}

}  // namespace aoti_cuda::common
