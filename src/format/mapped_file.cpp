#include "format/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
}  // namespace

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
}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace format
}  // namespace aoti_cuda
