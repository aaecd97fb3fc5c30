// aoti_cuda shim — int4 weight-only matrix multiply (private; the C entry point
// aoti_torch_cuda__weight_int4pack_mm lives in weight_int4pack_mm.cpp, the CUDA
// kernels in weight_int4pack_mm.cu (tile kernels, dispatch) and weight_int4pack_gemv.cu
// (weight streaming for few rows)).
//
// Operand formats (PyTorch's CUDA `_weight_int4pack_mm`, "tinygemm" layout; facts
// checked against torch 2.11 on an H200 by tools/int4/gen_vectors.py):
//   x    bf16 [M, K], row-major.
//   w    int32 [N/8, K/(ikt*16), 32, ikt/2], ikt ("innerKTiles") in {2, 4, 8}: for n-tile
//        nt (8 output columns), k-super-tile s (16*ikt values of k), lane l (0..31) and
//        word p (0..ikt/2-1), the 32-bit word holds 8 unsigned 4-bit values q (0..15),
//        nibble i at bits 4i..4i+3, for
//            n = 8*nt + l/4,
//            k = 16*(ikt*s + 2p + (i%4)/2) + 8*(i%2) + 2*(l%4) + i/4.
//        This is exactly the B-operand fragment of two mma.m16n8k16 k-tiles for lane l:
//        the word's bits (i, i+4) form the bf16x2 register pair {k, k+1}.
//   sz   bf16 [K/g, N, 2]: (scale, zero) of group k/g for column n.
//   out  bf16 [M, N] = x · dequant(w)^T with fp32 accumulation, where
//        dequant(q) = bf16((q - 8) * scale + zero), rounded once.
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace int4mm {

/// One validated problem (pointers are device memory of one device).
struct Problem {
  const void* x = nullptr;      ///< bf16 [M, K]
  const void* w = nullptr;      ///< int32 packed, see above
  const void* sz = nullptr;     ///< bf16 [K/group, N, 2]
  void* out = nullptr;          ///< bf16 [M, N]
  int64_t m = 0;
  int64_t n = 0;                ///< multiple of 8
  int64_t k = 0;                ///< multiple of 16*inner_k_tiles and of group
  int group = 0;                ///< 32, 64, 128 or 256
  int inner_k_tiles = 0;        ///< 2, 4 or 8
  /// w and sz are never written by any kernel (program constants, shim::is_program_constant): with dependent
  /// launch the few-row kernel requests its first weights before it waits for the previous kernel
  /// (dependent_launch.hpp); x only after that wait.
  bool weights_early = false;
};

/// Which kernel configuration launch() picks for a problem (for benchmarks and logs).
const char* config_name(const Problem& p, int sm_count);

/// Enqueues the multiply on `stream` (a cudaStream_t) of the current device, whose
/// multiprocessor count is `sm_count`. M == 0 enqueues nothing. Returns the
/// cudaError_t of the launch (0 = success).
int launch(const Problem& p, void* stream, int sm_count);

/// Writes rows [n0, n0 + rows) of dequant(w) as bf16 [rows, K] row-major to `dst` (device
/// memory of rows * K * 2 bytes), with the same rounding as the multiply kernels, on `stream`.
/// n0 and rows multiples of 8. Returns the launch's cudaError_t. The large-M path of the shim
/// (weight_int4pack_mm.cpp) multiplies what it writes with cuBLAS.
int dequantize(const Problem& p, int64_t n0, int64_t rows, void* dst, void* stream);

/// Benchmark hooks (bench/int4_bench.cu --variants compiles the kernels in): tuning candidates
/// for innerKTiles 8; variant 0 is launch() itself. launch_variant returns cudaErrorInvalidValue
/// for a variant that does not apply to the problem.
int variant_count();
const char* variant_name(int variant);
int launch_variant(const Problem& p, void* stream, int variant);

}  // namespace int4mm
}  // namespace shim
}  // namespace aoti_cuda
