// Per-thread pool of small blocks. See chunk_pool.hpp.
#include "common/chunk_pool.hpp"

namespace aoti_cuda::common {
namespace {

struct ChunkPool {
  void* head = nullptr;  // chunks linked through their first word
  std::size_t count = 0;
  ~ChunkPool() {
    while (head != nullptr) {
      void* next = *static_cast<void**>(head);
      ::operator delete(head);
      head = next;
    }
  }
};

ChunkPool* pool() noexcept { return this_thread_pool<ChunkPool>(); }

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
