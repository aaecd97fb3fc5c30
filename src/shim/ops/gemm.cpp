// aoti_cuda shim — dense matrix multiply on a lazily opened cuBLAS (see gemm.hpp).
#include "shim/ops/gemm.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/error.hpp"
#include "common/cublas_shims.hpp"
#include "common/env.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/op_settings.hpp"
#include "shim/ops/gemv.hpp"

namespace aoti_cuda {
namespace shim {
namespace gemm {
namespace {

// The few cuBLAS entry points and constants used, declared here (values from cublas_api.h and
// library_types.h, stable across releases) so that building needs no cuBLAS headers.
using Handle = void*;
using Status = int;
constexpr Status kStatusSuccess = 0;
constexpr int kOpN = 0;             // CUBLAS_OP_N
constexpr int kOpT = 1;             // CUBLAS_OP_T
constexpr int kCompute32F = 68;     // CUBLAS_COMPUTE_32F: fp32 accumulation, no TF32 for fp32 data
constexpr int kGemmDefault = -1;    // CUBLAS_GEMM_DEFAULT
constexpr int kCudaR32F = 0;        // CUDA_R_32F
constexpr int kCudaR16F = 2;        // CUDA_R_16F
constexpr int kCudaR16BF = 14;      // CUDA_R_16BF

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  Status (*set_workspace)(Handle, void*, size_t) = nullptr;
  Status (*gemm_strided_batched)(Handle, int, int, int, int, int, const void*, const void*, int, int, long long,
                                 const void*, int, int, long long, const void*, void*, int, int, long long, int, int,
                                 int) = nullptr;
  const char* (*status_string)(Status) = nullptr;
  std::string path;   // where it was loaded from
  std::string error;  // why it could not be loaded ("" when loaded)
};

std::string cudart_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cudaMalloc), &info) == 0 || info.dli_fname == nullptr) return {};
  std::string path = info.dli_fname;
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

Api open_api() {
  Api api;
  const std::string soname = AOTI_CUDA_CUBLAS_SONAME;  // the toolkit's major version (CMakeLists.txt)
  std::vector<std::string> candidates;
  if (const std::optional<std::string> explicit_path = env_text("AOTI_CUDA_CUBLAS")) {
    candidates.push_back(*explicit_path);
  } else {
    candidates.push_back(soname);
    const std::string dir = cudart_directory();
    if (!dir.empty()) {
      candidates.push_back(dir + "/" + soname);
      // pip layout: nvidia/cuda_runtime/lib (or nvidia/cu13/lib, which holds both).
      candidates.push_back(dir + "/../../cublas/lib/" + soname);
    }
  }
  void* lib = nullptr;
  std::string tried;
  for (const std::string& c : candidates) {
    lib = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      api.path = c;
      break;
    }
    const char* why = ::dlerror();
    tried += "\n  " + c + ": " + (why != nullptr ? why : "not found");
  }
  if (lib == nullptr) {
    api.error = "cuBLAS is needed by this program (a matrix multiply exported with cuBLAS GEMMs) but " + soname +
                " could not be opened; install the CUDA toolkit's cuBLAS or set AOTI_CUDA_CUBLAS to its path. Tried:" +
                tried;
    return api;
  }
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    if (fn == nullptr && api.error.empty()) api.error = api.path + " has no " + name;
  };
  bind(api.create, "cublasCreate_v2");
  bind(api.set_stream, "cublasSetStream_v2");
  bind(api.set_workspace, "cublasSetWorkspace_v2");
  bind(api.gemm_strided_batched, "cublasGemmStridedBatchedEx");
  bind(api.status_string, "cublasGetStatusString");
  return api;  // never dlclosed: handles and captured graphs may refer to it until exit
}

std::atomic<const Api*> g_opened{nullptr};
std::atomic<bool> g_opening_started{false};
std::mutex g_opening_mu;
std::shared_future<void> g_opening;  // the background open (see open_in_background), once started

// A first multiply on a thread waits for a background open in progress rather than making a
// second handle beside it.
void wait_for_background_open() {
  std::shared_future<void> opening;
  {
    std::lock_guard<std::mutex> lock(g_opening_mu);
    opening = g_opening;
  }
  if (opening.valid()) opening.wait();
}

const Api& api() {
  static const Api instance = open_api();
  g_opened.store(&instance, std::memory_order_release);
  return instance;
}

[[noreturn]] void throw_status(Status status, const std::string& what) {
  const char* text = api().status_string != nullptr ? api().status_string(status) : nullptr;
  throw Error(ErrorCode::kCuda, what + " failed: cuBLAS status " + std::to_string(status) +
                                    (text != nullptr ? std::string(" (") + text + ")" : std::string()));
}

// Process-wide pool of handles per device; a thread borrows one per device until it exits.
class HandlePool {
 public:
  Handle take(int device) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<Handle>& free = free_[device];
      if (!free.empty()) {
        Handle h = free.back();
        free.pop_back();
        return h;
      }
    }
    Handle h = nullptr;
    const Status status = api().create(&h);  // the caller made `device` current
    if (status != kStatusSuccess) throw_status(status, "cublasCreate on device " + std::to_string(device));
    return h;
  }
  void give_back(int device, Handle h) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    free_[device].push_back(h);
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<Handle>> free_;
};

HandlePool& pool() {
  static HandlePool* instance = new HandlePool;  // leaked: threads may exit after static destruction
  return *instance;
}

// A thread's handle on a device, and the stream (with its workspace) last bound to it, so that
// consecutive multiplies on one stream with one workspace size skip cublasSetStream /
// cublasSetWorkspace.
struct BoundHandle {
  Handle handle = nullptr;
  void* stream = nullptr;
  std::uint64_t epoch = 0;          // g_workspace_epoch when bound
  std::size_t workspace_bytes = 0;  // the size asked for (op_settings) when bound
  bool bound = false;
};

struct ThreadHandles {
  std::map<int, BoundHandle> by_device;
  ~ThreadHandles() {
    for (auto& [device, h] : by_device) pool().give_back(device, h.handle);
  }
};

BoundHandle& thread_handle(int device) {
  thread_local ThreadHandles handles;
  auto it = handles.by_device.find(device);
  if (it != handles.by_device.end()) return it->second;
  wait_for_background_open();
  BoundHandle h;
  h.handle = pool().take(device);
  return handles.by_device.emplace(device, h).first->second;
}

// Workspace per (device, stream, size); see gemm.hpp. The size is the calling Module's
// (op_settings), so Modules with different sizes sharing a caller's stream each get theirs (one
// stream runs its GEMMs in order: they never overlap). Bounded: past kMaxWorkspaces, new ones
// are not made. release_stream() frees a stream's workspaces when its owner is done with it and
// bumps g_workspace_epoch, so that every thread's handle binds its stream and workspace again
// before its next multiply (a later stream may get the same address).
constexpr std::size_t kMaxWorkspaces = 64;
std::atomic<std::uint64_t> g_workspace_epoch{0};

struct Workspaces {
  std::mutex mu;
  std::map<std::tuple<int, void*, std::size_t>, void*> by_stream;  // nullptr: the stream runs without one
};

Workspaces& workspaces() {
  static auto* instance = new Workspaces;  // leaked, like the handles: threads may outlive statics
  return *instance;
}

std::pair<void*, std::size_t> stream_workspace(int device, void* stream, std::size_t bytes) {
  if (bytes == 0) return {nullptr, 0};
  Workspaces& w = workspaces();
  std::lock_guard<std::mutex> lock(w.mu);
  auto it = w.by_stream.find({device, stream, bytes});
  if (it != w.by_stream.end()) return {it->second, it->second != nullptr ? bytes : 0};
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    return {nullptr, 0};
  }
  if (capture != cudaStreamCaptureStatusNone || w.by_stream.size() >= kMaxWorkspaces) return {nullptr, 0};
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    ptr = nullptr;  // remembered as "none": cuBLAS still works without
  }
  w.by_stream.emplace(std::make_tuple(device, stream, bytes), ptr);
  return {ptr, ptr != nullptr ? bytes : 0};
}

int cuda_type(int32_t dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32: return kCudaR32F;
    case DType::kFloat16: return kCudaR16F;
    case DType::kBFloat16: return kCudaR16BF;
    default:
      throw Error(ErrorCode::kUnsupported, std::string("matrix multiply of ") + dtype_name(dtype) +
                                               " is not supported (float32, float16 and bfloat16 are)");
  }
}

// A matrix as cuBLAS (column-major) sees it: op(buffer) with leading dimension ld.
struct ColumnMajor {
  int op = kOpN;
  int64_t ld = 1;
};

// `m` read as a column-major rows x cols matrix: column-major storage as it is (op N), row-major
// storage as the transpose of a column-major cols x rows matrix (op T).
ColumnMajor column_major(const Matrix& m) {
  if (m.row_stride == 1 || m.rows <= 1) {
    if (m.cols <= 1) return {kOpN, std::max<int64_t>(m.rows, 1)};
    if (m.col_stride >= std::max<int64_t>(m.rows, 1)) return {kOpN, m.col_stride};
  }
  if (m.col_stride == 1 || m.cols <= 1) {
    if (m.rows <= 1) return {kOpT, std::max<int64_t>(m.cols, 1)};
    if (m.row_stride >= std::max<int64_t>(m.cols, 1)) return {kOpT, m.row_stride};
  }
  return {-1, 0};
}

Matrix transposed(const Matrix& m) { return Matrix{m.data, m.cols, m.rows, m.col_stride, m.row_stride}; }

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

bool blas_compatible(const Matrix& m) {
  const ColumnMajor cm = column_major(m);
  return cm.op >= 0 && fits_int(cm.ld) && fits_int(m.rows) && fits_int(m.cols);
}

namespace {

std::optional<gemv::Element> gemv_element(int32_t dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32: return gemv::Element::kFloat32;
    case DType::kFloat16: return gemv::Element::kFloat16;
    case DType::kBFloat16: return gemv::Element::kBFloat16;
    default: return std::nullopt;
  }
}

std::atomic<uint64_t> g_gemv_calls{0};
static_assert(OpSettings::kMaxGemvRows == gemv::kMaxRows, "the tuning's row range is the kernels'");

// The row limit is the calling Module's (op_settings; one row by default: there the kernels beat
// cuBLAS, an LLM's decode step, while with 4 rows cuBLAS was faster for weight-sized operands,
// docs/benchmarks/gemv.md). The load checked it; clamped all the same.
gemv::Kernel gemv_kernel(int32_t dtype, const Batch& a, const Batch& b, const Batch& c, int64_t count) {
  const std::optional<gemv::Element> e = gemv_element(dtype);
  const int max_rows = std::clamp(op_settings().gemv_max_rows, 0, gemv::kMaxRows);
  if (!e || a.m.rows > max_rows) return gemv::Kernel::kNone;
  return gemv::pick(*e, a, b, c, count);
}

}  // namespace

uint64_t gemv_calls() { return g_gemv_calls.load(std::memory_order_relaxed); }

bool uses_gemv(int32_t dtype, const Batch& a, const Batch& b, const Batch& c, int64_t count) {
  return gemv_kernel(dtype, a, b, c, count) != gemv::Kernel::kNone;
}

bool opening_started() noexcept { return g_opening_started.load(std::memory_order_acquire); }

void open_in_background(int device) noexcept {
  static std::once_flag once;
  try {
    std::call_once(once, [device] {
      g_opening_started.store(true, std::memory_order_release);
      // Held in a static: its destructor waits for the thread at exit rather than abandoning it.
      static std::shared_future<void> opening = std::async(std::launch::async, [device] {
        if (!api().error.empty() || device < 0) return;
        try {  // a handle made here goes to the pool, where the first multiply on `device` finds it
          DeviceSwitch on_device(device);
          pool().give_back(device, pool().take(device));
        } catch (...) {
          // The first multiply will try again and report what fails.
        }
      }).share();
      std::lock_guard<std::mutex> lock(g_opening_mu);
      g_opening = opening;
    });
  } catch (...) {
    // No thread to spare: the first multiply opens cuBLAS itself.
  }
}

void release_stream(int device, void* stream) noexcept {
  std::vector<void*> spaces;
  {
    Workspaces& w = workspaces();
    std::lock_guard<std::mutex> lock(w.mu);
    // Every size made for this stream (Modules with different TuningOptions may have shared it).
    bool found = false;
    auto it = w.by_stream.lower_bound({device, stream, 0});
    while (it != w.by_stream.end() && std::get<0>(it->first) == device && std::get<1>(it->first) == stream) {
      if (it->second != nullptr) spaces.push_back(it->second);
      it = w.by_stream.erase(it);
      found = true;
    }
    if (!found) return;
    g_workspace_epoch.fetch_add(1, std::memory_order_acq_rel);
  }
  for (void* space : spaces) (void)cudaFree(space);  // waits for the work that used it
  (void)cudaGetLastError();
}

std::size_t workspace_count() noexcept {
  Workspaces& w = workspaces();
  std::lock_guard<std::mutex> lock(w.mu);
  return w.by_stream.size();
}

CublasUse cublas_use(const char* symbol) noexcept {
  if (common::is_extern_gemm_shim(symbol)) return CublasUse::kAlways;
  if (symbol == common::kInt4MatmulShim) return CublasUse::kManyRows;
  return CublasUse::kNone;
}

bool uses_cublas(const char* symbol) noexcept { return cublas_use(symbol) != CublasUse::kNone; }

const char* loaded_library() {
  const Api* opened = g_opened.load(std::memory_order_acquire);
  return opened != nullptr ? opened->path.c_str() : "";
}

void multiply(int32_t dtype, const Batch& a, const Batch& b, const Batch& c, int64_t count, float alpha, float beta,
              int device, void* stream) {
  const int64_t m = c.m.rows, n = c.m.cols, k = a.m.cols;
  if (a.m.rows != m || b.m.rows != k || b.m.cols != n) {
    throw_invalid("matrix multiply shapes disagree: [" + std::to_string(a.m.rows) + ", " + std::to_string(a.m.cols) +
                  "] x [" + std::to_string(b.m.rows) + ", " + std::to_string(b.m.cols) + "] -> [" +
                  std::to_string(m) + ", " + std::to_string(n) + "]");
  }
  if (!blas_compatible(a.m) || !blas_compatible(b.m) || !blas_compatible(c.m) || !fits_int(count)) {
    throw_invalid("matrix multiply operands need one unit stride and sizes below 2^31 (internal: the caller "
                  "should have made them so)");
  }
  if (m == 0 || n == 0 || count == 0) return;
  if (k <= 0) throw_invalid("matrix multiply with K = 0 (internal: the caller handles it)");
  if (const gemv::Kernel few_rows = gemv_kernel(dtype, a, b, c, count); few_rows != gemv::Kernel::kNone) {
    const int err = gemv::launch(few_rows, *gemv_element(dtype), a, b, c, count, alpha, beta, stream);
    if (err != 0) throw_cuda_error(err, "few-row matrix multiply kernel");
    g_gemv_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int type = cuda_type(dtype);
  const Api& blas = api();
  if (!blas.error.empty()) throw Error(ErrorCode::kLoad, blas.error);

  // Row-major thinking, column-major cuBLAS: C = A·B is computed as C^T = B^T·A^T when C's
  // columns are contiguous; when its rows are, directly.
  const bool swap = column_major(c.m).op == kOpT;
  const Batch& first = swap ? b : a;
  const Batch& second = swap ? a : b;
  const Matrix cc = swap ? transposed(c.m) : c.m;
  const Matrix f = swap ? transposed(first.m) : first.m;
  const Matrix s = swap ? transposed(second.m) : second.m;
  const ColumnMajor cf = column_major(f), cs = column_major(s), cout = column_major(cc);
  if (cout.op != kOpN || cf.op < 0 || cs.op < 0) throw_invalid("matrix multiply: internal layout error");

  BoundHandle& bh = thread_handle(device);
  Handle h = bh.handle;
  Status status = kStatusSuccess;
  const std::uint64_t epoch = g_workspace_epoch.load(std::memory_order_acquire);
  const std::size_t want_workspace = op_settings().cublas_workspace_bytes;
  if (!bh.bound || bh.stream != stream || bh.epoch != epoch || bh.workspace_bytes != want_workspace) {
    bh.bound = false;
    status = blas.set_stream(h, static_cast<cudaStream_t>(stream));  // also resets the workspace
    if (status != kStatusSuccess) throw_status(status, "cublasSetStream");
    const auto [space, space_bytes] = stream_workspace(device, stream, want_workspace);
    status = blas.set_workspace(h, space, space_bytes);
    if (status != kStatusSuccess) throw_status(status, "cublasSetWorkspace");
    // Kept unless the stream got no workspace (e.g. first seen while capturing): retried next time.
    bh.stream = stream;
    bh.epoch = epoch;
    bh.workspace_bytes = want_workspace;
    bh.bound = space != nullptr || want_workspace == 0;
  }
  status = blas.gemm_strided_batched(
      h, cf.op, cs.op, static_cast<int>(cc.rows), static_cast<int>(cc.cols), static_cast<int>(k), &alpha, f.data, type,
      static_cast<int>(cf.ld), static_cast<long long>(first.batch_stride), s.data, type, static_cast<int>(cs.ld),
      static_cast<long long>(second.batch_stride), &beta, cc.data, type, static_cast<int>(cout.ld),
      static_cast<long long>(c.batch_stride), static_cast<int>(count), kCompute32F, kGemmDefault);
  if (status != kStatusSuccess) {
    throw_status(status, "cublasGemmStridedBatchedEx (" + std::to_string(count) + " x [" + std::to_string(m) + ", " +
                             std::to_string(k) + "] x [" + std::to_string(k) + ", " + std::to_string(n) + "], " +
                             dtype_name(dtype) + ")");
  }
}

}  // namespace gemm
}  // namespace shim
}  // namespace aoti_cuda
