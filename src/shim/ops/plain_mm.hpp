// aoti_cuda shim — ExecuTorch's weight-only "plain" quantized linear ops (private): the C entry
// points aoti_torch_cuda_int{4,5,6,8}_plain_mm live in plain_mm.cpp, the kernel in plain_mm.cu.
//
// ExecuTorch's CUDA backend (1.3 and later) exports decode-time linear layers of its own
// quantized weight tensors as the custom ops executorch_cuda::int{4,5,6,8}_plain_mm, which the
// AOTInductor library calls through these C shims. The formats, from the ops' Python definitions
// (backends/cuda/quantize_op_dispatch/*.py; the reference the GPU tests compare with):
//
//   self   activations [M, K], bf16 / fp16 / fp32 (unit stride along K); out [M, N], same dtype,
//          out[m][n] = sum_k self[m][k] * W[n][k].
//   G = K / group, S = number of 256-wide "super-blocks" per row (K / 256; int6: steps.size(1)),
//   g = k / group, s = g / (G / S). "code(t)" reads a uint8 or int8 tensor by its dtype.
//
//   kInt4Legacy (ExecuTorch 1.3; torchao Int4Tensor): qdata u8/i8 [N, K/2], byte k/2 holds k in
//          its low nibble when k is even, the high nibble when odd (q in 0..15); scale, zero bf16
//          [G, N]; W = (q - zero[g][n]) * scale[g][n].
//   kInt4  (1.4+): qdata as above; scale, zero u8/i8 codes [N, G]; scale_step, zero_step fp16
//          [N, S]; W = (q - code(zero)[n][g] * zero_step[n][s]) * code(scale)[n][g] * scale_step[n][s].
//   kInt5  (1.4+): ql u8/i8 [N, K/2] the low 4 bits as for int4; qh u8/i8 [N, K/8] the fifth bit:
//          k = 32c + 8w + j reads byte 4c + w, bit j/2 for even j, bit 4 + j/2 for odd j;
//          u = low | bit << 4 (0..31); scales and zeros as kInt4; W = scale * (u - zero).
//   kInt6  (1.4+): ql as int5; qh u8/i8 [N, K/4] the top two bits: k = 32c + 8w + j reads byte
//          8c + w (even j) or 8c + 4 + w (odd j), bits 2*(j/2)..+1; q = (low | bits << 4) - 32;
//          scale u8/i8 codes [N, G], steps fp16 [N, S] with G % S == 0; W = q * code(scale) * steps.
//   kInt8  (1.4+): qdata i8 [N, K]; scale bf16 [N, G]; zero i8 [N, G]; W = (q - zero) * scale.
//
// The kernel dequantizes in fp32 and accumulates in fp32 (the Python reference rounds its
// intermediates to the activation dtype; results agree to that rounding).
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace plainmm {

enum class Kind : int { kInt4Legacy = 0, kInt4 = 1, kInt5 = 2, kInt6 = 3, kInt8 = 4 };

/// One validated problem: pointers are device memory of one device, every weight operand
/// contiguous. Unused operands are null.
struct Problem {
  Kind kind = Kind::kInt4;
  int32_t x_dtype = 15;          ///< c10 code of self and out: bf16 (15), fp16 (5) or fp32 (6)
  const void* x = nullptr;       ///< [M, K], row stride ldx elements, unit stride along K
  int64_t ldx = 0;
  void* out = nullptr;           ///< [M, N] contiguous
  const void* q = nullptr;       ///< qdata / ql
  const void* qh = nullptr;      ///< int5 / int6 high bits
  const void* scale = nullptr;
  const void* scale_step = nullptr;  ///< int6: steps
  const void* zero = nullptr;
  const void* zero_step = nullptr;
  bool scale_signed = false;     ///< scale codes are int8 (else uint8)
  bool zero_signed = false;      ///< zero codes are int8 (else uint8)
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t group = 0;
  int64_t supers = 0;            ///< S (kInt4, kInt5, kInt6)
  int64_t groups = 0;            ///< G = K / group
  int64_t groups_per_super = 1;  ///< G / S
  int group_shift = -1;          ///< log2(group) when a power of two, else -1
  int groups_per_super_shift = -1;  ///< log2(G / S) when a power of two, else -1
  /// group % 8 == 0 and q 4-byte aligned (qh 1-byte): the kernel reads 8 weights per packed word.
  bool by8 = false;
  /// group % 32 == 0, q 16-byte aligned, int5 qh 4-byte, int6 qh 8-byte aligned: 32 weights per
  /// 16-byte load.
  bool by32 = false;
  /// x 16-byte aligned with a row stride of a multiple of 16 bytes (vector activation loads).
  bool x_vec = false;
};

/// Enqueues the multiply on `stream` (a cudaStream_t) of the current device. M == 0 or N == 0
/// enqueues nothing. Returns the launch's cudaError_t (0 = success).
int launch(const Problem& p, void* stream);

}  // namespace plainmm
}  // namespace shim
}  // namespace aoti_cuda
