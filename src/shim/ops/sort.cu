// Kernels of aoti_torch_cuda_sort_stable (contract: sort.hpp).
//
// Every element becomes an unsigned key whose integer order is PyTorch's order (NaN mapped
// above +inf, -0.0 onto 0.0, descending by inverting the key), paired with its position in a
// slice-major numbering. One CUB radix sort of the whole tensor orders all keys; radix sort is
// stable, so a second radix sort by slice number (skipped for one slice) regroups the slices
// while keeping each one's order. One instantiation (64-bit keys, 32-bit positions) serves
// every dtype: the radix passes cover only the key's real width.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cstdint>

#include "shim/ops/sort.hpp"

namespace aoti_cuda {
namespace shim {
namespace sortop {
namespace {

constexpr int kThreads = 256;

int bytes_of(int32_t dtype) {
  switch (dtype) {
    case 0: case 1: case 11: return 1;       // uint8, int8, bool
    case 2: case 5: case 15: case 27: return 2;  // int16, float16, bfloat16, uint16
    case 3: case 6: case 28: return 4;       // int32, float32, uint32
    case 4: case 7: case 29: return 8;       // int64, float64, uint64
    default: return 0;
  }
}

// Ordered key of a float's bits: canonical NaN above everything, -0 as +0, then the usual
// sign flip (negatives inverted so they order below positives, in reverse magnitude).
template <class U>
__device__ __forceinline__ U float_key(U bits, U abs_mask, U inf_bits) {
  const U sign = static_cast<U>(~abs_mask);
  if ((bits & abs_mask) > inf_bits) return static_cast<U>(~U{0});
  if ((bits & abs_mask) == 0) bits = 0;
  return (bits & sign) ? static_cast<U>(~bits) : static_cast<U>(bits | sign);
}

__device__ __forceinline__ uint64_t key_of(const void* in, int64_t i, int32_t dtype) {
  switch (dtype) {
    case 0: case 11: return static_cast<const uint8_t*>(in)[i];
    case 1: return static_cast<uint8_t>(static_cast<const uint8_t*>(in)[i] ^ 0x80u);
    case 2: return static_cast<uint16_t>(static_cast<const uint16_t*>(in)[i] ^ 0x8000u);
    case 27: return static_cast<const uint16_t*>(in)[i];
    case 3: return static_cast<uint32_t>(static_cast<const uint32_t*>(in)[i] ^ 0x80000000u);
    case 28: return static_cast<const uint32_t*>(in)[i];
    case 4: return static_cast<const uint64_t*>(in)[i] ^ (uint64_t{1} << 63);
    case 29: return static_cast<const uint64_t*>(in)[i];
    case 5: return float_key<uint16_t>(static_cast<const uint16_t*>(in)[i], 0x7FFFu, 0x7C00u);
    case 15: return float_key<uint16_t>(static_cast<const uint16_t*>(in)[i], 0x7FFFu, 0x7F80u);
    case 6: return float_key<uint32_t>(static_cast<const uint32_t*>(in)[i], 0x7FFFFFFFu, 0x7F800000u);
    case 7:
      return float_key<uint64_t>(static_cast<const uint64_t*>(in)[i], 0x7FFFFFFFFFFFFFFFull, 0x7FF0000000000000ull);
    default: return 0;
  }
}

// keys[t] / pos[t] for slice-major position t = slice * n + j.
__global__ void make_keys(Problem p, int bits, uint64_t* keys, uint32_t* pos, int64_t total) {
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t slice = t / p.n, j = t % p.n;
    const int64_t o = slice / p.inner, i = slice % p.inner;
    const uint64_t key = key_of(p.in, (o * p.n + j) * p.inner + i, p.dtype);
    keys[t] = p.descending ? (~key & mask) : key;
    pos[t] = static_cast<uint32_t>(t);
  }
}

__global__ void slice_keys(int64_t n, const uint32_t* pos_in, uint64_t* keys, uint32_t* pos, int64_t total) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    keys[t] = pos_in[t] / n;
    pos[t] = pos_in[t];
  }
}

__global__ void write_out(Problem p, int item, const uint32_t* sorted, int64_t total) {
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = sorted[q];
    const int64_t slice = t / p.n, j = t % p.n, r = q - slice * p.n;
    const int64_t o = slice / p.inner, i = slice % p.inner;
    const int64_t src = (o * p.n + j) * p.inner + i, dst = (o * p.n + r) * p.inner + i;
    switch (item) {
      case 1: static_cast<uint8_t*>(p.values)[dst] = static_cast<const uint8_t*>(p.in)[src]; break;
      case 2: static_cast<uint16_t*>(p.values)[dst] = static_cast<const uint16_t*>(p.in)[src]; break;
      case 4: static_cast<uint32_t*>(p.values)[dst] = static_cast<const uint32_t*>(p.in)[src]; break;
      default: static_cast<uint64_t*>(p.values)[dst] = static_cast<const uint64_t*>(p.in)[src]; break;
    }
    p.indices[dst] = j;
  }
}

std::size_t align_up(std::size_t v) { return (v + 255) / 256 * 256; }

std::size_t cub_bytes(int64_t elements) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint64_t*>(nullptr),
                                  static_cast<uint64_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                                  static_cast<uint32_t*>(nullptr), static_cast<int>(elements));
  return align_up(bytes);
}

unsigned grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

int bit_width(uint64_t v) {
  int bits = 0;
  while (v != 0) {
    ++bits;
    v >>= 1;
  }
  return bits;
}

}  // namespace

bool supported(int32_t dtype) { return bytes_of(dtype) != 0; }

std::size_t scratch_bytes(int64_t elements, int64_t /*segments*/) {
  const std::size_t e = static_cast<std::size_t>(elements);
  return 2 * align_up(e * 8) + 2 * align_up(e * 4) + cub_bytes(elements);
}

int run(const Problem& p, void* scratch, std::size_t scratch_size, void* stream_ptr) {
  const int64_t total = p.outer * p.n * p.inner;
  if (total == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::size_t e = static_cast<std::size_t>(total);
  char* base = static_cast<char*>(scratch);
  uint64_t* keys_a = reinterpret_cast<uint64_t*>(base);
  uint64_t* keys_b = reinterpret_cast<uint64_t*>(base + align_up(e * 8));
  uint32_t* pos_a = reinterpret_cast<uint32_t*>(base + 2 * align_up(e * 8));
  uint32_t* pos_b = reinterpret_cast<uint32_t*>(base + 2 * align_up(e * 8) + align_up(e * 4));
  void* temp = base + 2 * align_up(e * 8) + 2 * align_up(e * 4);
  std::size_t temp_bytes = scratch_size - (2 * align_up(e * 8) + 2 * align_up(e * 4));
  const int item = bytes_of(p.dtype);
  const int bits = item * 8;
  const unsigned grid = grid_for(total);

  make_keys<<<grid, kThreads, 0, stream>>>(p, bits, keys_a, pos_a, total);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return static_cast<int>(err);
  err = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_a, keys_b, pos_a, pos_b, static_cast<int>(total), 0,
                                        bits, stream);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int64_t slices = p.outer * p.inner;
  if (slices > 1) {
    slice_keys<<<grid, kThreads, 0, stream>>>(p.n, pos_b, keys_a, pos_a, total);
    err = cudaGetLastError();
    if (err != cudaSuccess) return static_cast<int>(err);
    err = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_a, keys_b, pos_a, pos_b, static_cast<int>(total), 0,
                                          bit_width(static_cast<uint64_t>(slices - 1)), stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  write_out<<<grid, kThreads, 0, stream>>>(p, item, pos_b, total);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace sortop
}  // namespace shim
}  // namespace aoti_cuda
