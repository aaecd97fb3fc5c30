// Small helpers shared by the test suites: process resources (for leak
// checks across load/unload cycles) and catching aoti_cuda::Error.
#pragma once

#include <dirent.h>
#include <doctest/doctest.h>

#include <fstream>
#include <string>

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
