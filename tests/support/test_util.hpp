// Small helpers shared by the test suites: process resources (for leak
// checks across load/unload cycles) and catching aoti_cuda::Error.
#pragma once

#include <dirent.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"

namespace aoti_cuda_test {

/// Open file descriptors of this process.
inline int count_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

/// Mappings of memfd-backed files (model libraries loaded from memory).
inline int count_memfd_maps() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("memfd:") != std::string::npos;
  return n;
}

/// Resident set size of this process in bytes (/proc/self/statm).
inline long long rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<long long>(sysconf(_SC_PAGESIZE));
}

/// A temp directory (under $TMPDIR or /tmp) removed with its files at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/aoti_cuda_test_XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") std::remove((path + "/" + n).c_str());
      }
      closedir(d);
    }
    rmdir(path.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// Runs fn, expecting it to throw aoti_cuda::Error; returns the error (a test
/// failure, and an kInternal placeholder, when nothing is thrown).
template <typename Fn>
aoti_cuda::Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const aoti_cuda::Error& e) {
    return e;
  }
  FAIL("expected aoti_cuda::Error");
  return aoti_cuda::Error(aoti_cuda::ErrorCode::kInternal, "unreachable");
}

}  // namespace aoti_cuda_test
