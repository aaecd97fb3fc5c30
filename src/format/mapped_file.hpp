// Read-only memory mapping of a whole file (RAII). Private to src/format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aoti_cuda {
namespace format {

/// Maps `path` read-only. The file descriptor is closed right after mmap
/// (the mapping keeps the file alive). Throws Error(kNotFound) when the file
/// does not exist and Error(kIo) for any other open/stat/mmap failure.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  void* mapping_ = nullptr;  // nullptr for empty files (mmap of length 0 is invalid)
};

}  // namespace format
}  // namespace aoti_cuda
