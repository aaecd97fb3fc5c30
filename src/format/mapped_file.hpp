// Read-only memory mapping of a whole file (RAII). Private to src/format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aoti_cuda {
namespace format {

/// Maps `path` read-only. The file descriptor is closed right after mmap
/// (the mapping keeps the file alive; a loaded program holds no descriptor). Throws Error(kNotFound) when the file
/// does not exist and Error(kIo) for any other open/stat/mmap failure.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  /// reopen_file_of for this mapping: -1 unless [p, p + n) lies inside it.
  int reopen_if_contains(const std::uint8_t* p, std::size_t n, std::uint64_t* offset) const;

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  void* mapping_ = nullptr;  // nullptr for empty files (mmap of length 0 is invalid)
  std::string path_;
  std::uint64_t device_ = 0, inode_ = 0;  // identity of the mapped file
};

/// If [p, p + n) lies inside a live MappedFile: that file opened again
/// (read-only; the caller closes the descriptor) and the file offset of p in
/// *offset. -1 when the range is in no MappedFile, or its path now names
/// another file (replaced or removed since it was mapped). Large ranges are
/// read faster with pread than through the mapping (no page faults, no pages
/// in the process): the weights upload does so. Thread-safe.
int reopen_file_of(const void* p, std::size_t n, std::uint64_t* offset);

}  // namespace format
}  // namespace aoti_cuda
