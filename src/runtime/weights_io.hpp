// Private runtime: host-side handling of weights blobs at load — comparing
// blob ranges (deduplication), page-locking a blob in place so the model
// library's per-constant cudaMemcpy runs at pinned speed, prefetching, and
// releasing the blob's pages once it is on the device.
//
// The blobs live in the Program's read-only file mappings (or caller memory
// for Program::from_memory). Nothing here copies a blob: page-locking uses
// cudaHostRegister on the mapped range itself (cudaHostRegisterReadOnly, as
// the mapping is PROT_READ), and releasing uses madvise(MADV_DONTNEED), which
// for a read-only private file mapping only drops the process's references to
// page-cache pages (the bytes are re-read from the file if touched again).
// Caller memory is never released.
//
// AOTI_CUDA_TRACE_WEIGHTS=1 logs (debug level, aoti_cuda/log.hpp), per blob,
// how it was uploaded and why page-locking was refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda::runtime {

/// memcmp of two ranges; ranges of 64 MiB and more are split across threads.
bool bytes_equal(const std::uint8_t* a, const std::uint8_t* b, std::size_t n);

/// True when `bytes` lies in a read-only, private, file-backed mapping (so
/// its pages may be dropped and re-read from the file).
bool is_read_only_file_mapping(ByteView bytes);

/// Asks the kernel to read the range ahead (MADV_WILLNEED); best effort.
void prefetch_pages(ByteView bytes) noexcept;

/// Drops the process's pages of `bytes` (whole pages inside the range only);
/// only for ranges is_read_only_file_mapping accepts. Best effort.
void release_pages(ByteView bytes) noexcept;

/// release_pages(bytes) when the range is 1 MiB or more (smaller ones are not
/// worth reading /proc/self/maps for) and is_read_only_file_mapping.
void release_blob_pages(ByteView bytes);

/// Page-locks `bytes` in place for the lifetime of the object
/// (cudaHostRegister with cudaHostRegisterReadOnly, then without the flag);
/// unlocked on destruction. When refused, locked() is false and reason() says
/// why; nothing else changes (the upload then runs from pageable memory).
class PageLock {
 public:
  PageLock(ByteView bytes, int device);
  ~PageLock();
  PageLock(const PageLock&) = delete;
  PageLock& operator=(const PageLock&) = delete;

  bool locked() const noexcept { return locked_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  void* base_ = nullptr;
  bool locked_ = false;
  bool registered_here_ = false;  // false when the range was page-locked already
  int device_ = -1;
  std::string reason_;
};

/// Whether AOTI_CUDA_TRACE_WEIGHTS is set.
bool trace_weights() noexcept;

}  // namespace aoti_cuda::runtime
