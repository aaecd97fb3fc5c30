// Private low layer: the one host allocator (64-byte aligned pageable
// memory) and page-locked memory, used by shim storages, runtime Tensors and
// the copy engine's staging buffers.
#pragma once

#include <cstddef>
#include <memory>

namespace aoti_cuda::common {

/// Alignment of every host allocation (bytes).
constexpr std::size_t kHostAlignment = 64;

/// 64-byte aligned pageable host memory (nbytes 0 -> nullptr). Requests beyond
/// physical memory are refused up front. Throws kOutOfMemory.
void* host_allocate(std::size_t nbytes);
void host_free(void* ptr) noexcept;
/// Page-locked host memory; falls back to host_allocate (and sets *pinned=false)
/// when cudaMallocHost fails: pinning is a performance property, not a semantic one.
void* pinned_allocate(std::size_t nbytes, bool* pinned);
/// Frees pinned_allocate memory (pass the `pinned` it reported).
void pinned_free(void* ptr) noexcept;

/// host_allocate memory owned by a shared_ptr (at least one byte, so data() is never null).
std::shared_ptr<void> host_shared(std::size_t nbytes);

/// A scoped host staging buffer.
class HostBuffer {
 public:
  explicit HostBuffer(std::size_t nbytes) : ptr_(host_allocate(nbytes)) {}
  ~HostBuffer() { host_free(ptr_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  char* get() const noexcept { return static_cast<char*>(ptr_); }

 private:
  void* ptr_;
};

}  // namespace aoti_cuda::common
