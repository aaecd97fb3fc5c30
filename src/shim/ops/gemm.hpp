// aoti_cuda shim — dense matrix multiply on cuBLAS (private).
//
// Serves the extern GEMM shims (aoti_torch_cuda_mm_out / addmm_out / bmm_out, which a program
// calls when it was exported with Inductor's ATEN GEMM backend) and the int4 shim's large-M
// path (dequantize, then one bf16 GEMM).
//
// cuBLAS is opened on first use, not linked: programs that never multiply through it cost
// nothing (no libcublas in the process, no handle, no workspace). It is looked up as
// libcublas.so.<cudart major> on the normal search path, then beside the process's cudart
// (the toolkit's lib64, or the nvidia-cublas wheel next to a pip cudart); AOTI_CUDA_CUBLAS
// names the file explicitly (read through common/env.hpp when cuBLAS is first opened). A missing
// cuBLAS is a clear error of the call that needs it.
//
// Handles: one per (thread, device), taken from a process-wide pool the first time a thread
// multiplies on a device and given back when the thread exits (never destroyed: cuBLAS may be
// gone at process exit). Workspace: one per (device, stream, size), the size being the calling
// Module's TuningOptions::cublas_workspace_mib (op_settings.hpp), allocated on first use outside
// stream capture, so a captured graph and later direct calls on that stream share it safely
// (one stream runs its GEMMs in order). A GEMM captured on a stream that has none runs without
// workspace (cuBLAS then picks algorithms that need none). The owner of a stream releases its
// workspace (release_stream) once nothing will run on it any more: the Module does so for its
// own streams and for the caller streams its calls ran on, when it is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace gemm {

/// A strided matrix (element strides; either may be 0 or anything for an extent of 1).
struct Matrix {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  ///< elements between rows
  int64_t col_stride = 0;  ///< elements between columns
};

/// A batch of equally shaped matrices `batch_stride` elements apart (0: the same matrix).
struct Batch {
  Matrix m;
  int64_t batch_stride = 0;
};

/// True when cuBLAS can read `m` as it is (one unit stride, a leading dimension that fits).
bool blas_compatible(const Matrix& m);

/// True when multiply() would run these operands on aoti_cuda's own few-row kernels (gemv.hpp:
/// at most op_settings().gemv_max_rows rows, the calling Module's TuningOptions::gemv_max_rows,
/// in layouts they read) rather than cuBLAS; such calls never open cuBLAS.
bool uses_gemv(int32_t dtype, const Batch& a, const Batch& b, const Batch& c, int64_t count);

/// How many multiplies ran on the few-row kernels in this process (for tests).
uint64_t gemv_calls();

/// c[i] = alpha * a[i]·b[i] + beta * c[i] for i < count, in `dtype` (float32, float16 or bfloat16,
/// the same for all three) with fp32 accumulation, on `device`, enqueued on `stream` (a
/// cudaStream_t; the caller has made `device` current); on the few-row kernels where uses_gemv(),
/// else on cuBLAS. Shapes must agree (a: MxK, b: KxN,
/// c: MxN, K >= 1) and every matrix must be blas_compatible. Throws aoti_cuda::Error
/// (kInvalidArgument for shapes, kUnsupported for other dtypes, kLoad when cuBLAS cannot be
/// opened, kCuda when it fails).
void multiply(int32_t dtype, const Batch& a, const Batch& b, const Batch& c, int64_t count, float alpha, float beta,
              int device, void* stream);

/// Starts opening cuBLAS and creating a handle for `device` (a CUDA ordinal; < 0: none) on a
/// background thread (once per process; later calls do nothing), so that the first multiply does
/// not wait for them. The Module's loader calls it once its libraries are loaded, when one imports
/// a shim that multiplies through cuBLAS (see uses_cublas). Never throws; a missing cuBLAS is
/// reported by the call that needs it.
void open_in_background(int device) noexcept;

/// True once open_in_background() has started (for tests).
bool opening_started() noexcept;

/// Frees the workspaces of (device, stream) (one per size asked for), if any, and makes every handle bind its stream and
/// workspace again before its next multiply. Call it when nothing more will run on that stream
/// through this Module (the caller made `device` current; work already queued that uses the
/// workspace completes first: cudaFree waits for it). Never throws.
void release_stream(int device, void* stream) noexcept;

/// (device, stream, size) entries that currently exist (for tests).
std::size_t workspace_count() noexcept;

/// How a shim symbol needs cuBLAS: never, only for many rows (the int4 matmul's dequantize +
/// GEMM path, from TuningOptions::int4_dequant_min_m rows on), or on every call (the extern GEMMs).
enum class CublasUse { kNone = 0, kManyRows = 1, kAlways = 2 };
CublasUse cublas_use(const char* symbol) noexcept;

/// True for the shim symbols that may multiply through cuBLAS (cublas_use() != kNone).
bool uses_cublas(const char* symbol) noexcept;

/// Where cuBLAS was loaded from, or "" when nothing has needed it yet (for logs and tests).
const char* loaded_library();

}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
