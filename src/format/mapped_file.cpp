#include "format/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda {
namespace format {

namespace {
// Closes the descriptor on every path out of the constructor.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};
// The live mappings, for reopen_file_of: few (one per open .pte/.ptd), so a
// vector under a mutex. Never destroyed: a static Module may outlive any
// other static object.
struct LiveFiles {
  std::mutex mutex;
  std::vector<const MappedFile*> files;
};
LiveFiles& live_files() {
  static LiveFiles* live = new LiveFiles;
  return *live;
}

}  // namespace

int MappedFile::reopen_if_contains(const std::uint8_t* p, std::size_t n, std::uint64_t* offset) const {
  if (p < data_ || static_cast<std::size_t>(p - data_) > size_ || n > size_ - static_cast<std::size_t>(p - data_)) {
    return -1;
  }
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != device_ ||
      static_cast<std::uint64_t>(st.st_ino) != inode_) {
    ::close(fd);  // the path names another file now
    return -1;
  }
  *offset = static_cast<std::uint64_t>(p - data_);
  return fd;
}

int reopen_file_of(const void* p, std::size_t n, std::uint64_t* offset) {
  const auto* q = static_cast<const std::uint8_t*>(p);
  LiveFiles& live = live_files();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const MappedFile* f : live.files) {
    if (const int fd = f->reopen_if_contains(q, n, offset); fd >= 0) return fd;
  }
  return -1;
}

MappedFile::MappedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw Error(ErrorCode::kNotFound, path + ": file not found");
    throw Error(ErrorCode::kIo, path + ": cannot open: " + std::strerror(err));
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw Error(ErrorCode::kIo, path + ": fstat failed: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw Error(ErrorCode::kIo, path + ": not a regular file");
  if (st.st_size < 0) throw Error(ErrorCode::kIo, path + ": negative file size");
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;  // an empty file is reported by the format checks, not here
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kIo, path + ": mmap of " + std::to_string(size_) +
                                    " bytes failed: " + std::strerror(errno));
  }
  mapping_ = p;
  data_ = static_cast<const std::uint8_t*>(p);
  path_ = path;
  device_ = static_cast<std::uint64_t>(st.st_dev);
  inode_ = static_cast<std::uint64_t>(st.st_ino);
  try {
    LiveFiles& live = live_files();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.files.push_back(this);
  } catch (...) {
    ::munmap(mapping_, size_);
    throw;
  }
}

MappedFile::~MappedFile() {
  if (mapping_ == nullptr) return;
  {
    LiveFiles& live = live_files();
    std::lock_guard<std::mutex> lock(live.mutex);
    const auto it = std::find(live.files.begin(), live.files.end(), this);
    if (it != live.files.end()) live.files.erase(it);
  }
  ::munmap(mapping_, size_);
}

}  // namespace format
}  // namespace aoti_cuda
