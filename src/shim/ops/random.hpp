// aoti_cuda shim — random tensors (private): aoti_torch_cuda_rand and
// aoti_torch_cuda_randint_low_out are in random.cpp, the kernels in random.cu.
//
// Counter-based: element e of a call gets splitmix64(seed + (base + e) * golden), where base is
// taken from a per-device counter in device memory that each call advances by its element
// count with one atomic, on the GPU. So calls recorded in a CUDA graph draw new numbers on every
// replay, and no host synchronisation is needed. The seed is fixed (reproducible runs, like
// PyTorch's default generator) unless AOTI_CUDA_RNG_SEED gives another (read once).
// The numbers are not PyTorch's (its Philox streams differ); only their distribution is.
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace randop {

struct Problem {
  void* out = nullptr;   ///< `count` elements, consecutive in memory
  int64_t count = 0;
  int32_t dtype = 6;     ///< c10 code of out
  bool integers = false; ///< randint: low + (r mod range); else uniform [0, 1)
  int64_t low = 0;
  uint64_t range = 1;    ///< high - low, > 0
  uint64_t seed = 0;
};

/// Whether uniform [0, 1) can be written in this dtype (float16, bfloat16, float32, float64).
bool supports_uniform(int32_t dtype);
/// Whether integers can be written in this dtype (every integer type, and the float types).
bool supports_integers(int32_t dtype);

/// Enqueues the fill on `stream` of the current device; `base_slot` is 8 bytes of device
/// scratch for the call's counter base. Returns the first cudaError_t (0 = success).
int fill(const Problem& p, void* base_slot, void* stream);

}  // namespace randop
}  // namespace shim
}  // namespace aoti_cuda
