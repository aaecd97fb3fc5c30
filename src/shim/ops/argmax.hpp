// Private: the row argmax kernel behind aoti_torch_cuda_aoti_cuda_argmax, the C shim of the custom operator
// aoti_cuda::aoti_cuda_argmax (tools/export/llm/argmax_op.py; argmax.cpp validates the operand and allocates the
// output, then calls launch()).
//
// What it computes, per row r of x (rows of n elements, row_stride elements apart, unit-stride within a row):
//   out[r] = the index of the row's largest element, the first one when several are equal (torch.argmax); a NaN
//            counts as larger than any number, so the first NaN's index when the row has one.
// bf16, fp16 or float32 in, int64 out.
//
// Why: a greedy LLM decode step ends with the argmax over the vocabulary (32,000 logits on the 1.1 B model), which
// Inductor makes one reduction kernel that walks the row in steps, one memory latency each: 6.0-6.5 us on the H200
// (docs/benchmarks/llm.md, traces of 2026-12-04 20:55). Here one block per row has every load of its row in flight
// at once, then reduces in registers, shuffles and one shared-memory round.
#pragma once

#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace argmax {

enum class Dtype { kBFloat16, kFloat16, kFloat32 };

/// One call.
struct Problem {
  const void* x = nullptr;  ///< rows of n elements of `dtype`
  int64_t rows = 0;
  int64_t n = 0;            ///< 1 .. kMaxN
  int64_t row_stride = 0;   ///< elements from one row's start to the next's
  Dtype dtype = Dtype::kBFloat16;
  int64_t* out = nullptr;   ///< rows int64 indices, contiguous
};

/// Rows must be shorter than this (indices are 32-bit inside the kernel, with room for its strides).
constexpr int64_t kMaxN = int64_t{1} << 30;

/// Threads of the block that reduces a row of n elements: enough for 32 elements each, 32 to 1024.
int block_threads(int64_t n);

/// Enqueues the kernel on `stream` (a cudaStream_t of the current device): one block per row. Requires
/// 1 <= n < kMaxN and rows <= 2^31 - 1; rows 0 enqueues nothing. Returns the launch's cudaError_t (0 = success).
int launch(const Problem& p, void* stream);

}  // namespace argmax
}  // namespace shim
}  // namespace aoti_cuda
