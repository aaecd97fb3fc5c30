// aoti_cuda shim — what the int4 matmul's kernel files share (weight_int4pack_mm.cu: the
// tile kernels and the dispatch; weight_int4pack_gemv.cu: the weight-streaming kernel).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace aoti_cuda {
namespace shim {
namespace int4mm {

constexpr int kLanes = 32;

__device__ __forceinline__ uint32_t bf162_bits(__nv_bfloat162 v) {
  uint32_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}

__device__ __forceinline__ __nv_bfloat162 bits_bf162(uint32_t u) {
  __nv_bfloat162 v;
  memcpy(&v, &u, sizeof(u));
  return v;
}

// A problem's sizes as the kernels take them (by value): n-tiles of 8 columns, k-super-tiles of
// 16 * innerKTiles rows, log2 of the group size.
struct Shape {
  int m, n_tiles, k_super, k, n, group_shift;
};

}  // namespace int4mm
}  // namespace shim
}  // namespace aoti_cuda
