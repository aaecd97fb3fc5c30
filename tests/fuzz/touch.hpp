// Reads the first and last byte of a view the reader handed out, so that
// AddressSanitizer reports any view reaching outside the fuzzer's input.
#pragma once

#include "aoti_cuda/program.hpp"

namespace aoti_cuda_fuzz {

inline void touch(aoti_cuda::ByteView v) {
  if (v.size == 0) return;
  volatile std::uint8_t sink = v.data[0];
  sink = v.data[v.size - 1];
  (void)sink;
}

}  // namespace aoti_cuda_fuzz
