// The one strided copy engine of the library. See strided_copy.hpp.
#include "common/strided_copy.hpp"
#include "common/strided_copy_kernel.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/error.hpp"
#include "common/cuda.hpp"
#include "common/dtype_convert.hpp"
#include "common/host_memory.hpp"
#include "common/layout.hpp"

namespace aoti_cuda::common {
namespace {

// More 2-D slabs than this and a CUDA copy goes through host staging instead
// (each slab is one cudaMemcpy2DAsync call).
constexpr int64_t kMaxSlabs = 1024;

// ---- dimension bookkeeping ----------------------------------------------------
// Shapes of a two-operand elementwise loop after reordering and merging.
struct LoopDims {
  std::vector<int64_t> sizes;
  std::vector<int64_t> dst;  // strides in elements
  std::vector<int64_t> src;
};

// Drops size-1 dims, orders dims by decreasing destination stride (the copy is
// elementwise, so any order is valid) and merges dims that are contiguous with
// their inner neighbour in both operands.
LoopDims plan_loop(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dst,
                   const std::vector<int64_t>& src) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 1) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (dst[a] != dst[b]) return dst[a] > dst[b];
    return src[a] > src[b];
  });
  LoopDims out;
  for (std::size_t i : order) {
    if (!out.sizes.empty() && out.dst.back() == dst[i] * sizes[i] && out.src.back() == src[i] * sizes[i]) {
      // previous (outer) dim steps exactly over this one: merge
      out.sizes.back() *= sizes[i];
      out.dst.back() = dst[i];
      out.src.back() = src[i];
      continue;
    }
    out.sizes.push_back(sizes[i]);
    out.dst.push_back(dst[i]);
    out.src.push_back(src[i]);
  }
  return out;
}

// Calls fn(dst_elem_offset, src_elem_offset) for every index of the outer
// dims [0, outer) of `loop`, in row-major order.
template <class Fn>
void for_each_outer(const LoopDims& loop, std::size_t outer, Fn&& fn) {
  std::vector<int64_t> index(outer, 0);
  int64_t d = 0;
  int64_t s = 0;
  for (;;) {
    fn(d, s);
    std::size_t k = outer;
    for (;;) {
      if (k == 0) return;
      --k;
      if (++index[k] < loop.sizes[k]) {
        d += loop.dst[k];
        s += loop.src[k];
        break;
      }
      d -= loop.dst[k] * (loop.sizes[k] - 1);
      s -= loop.src[k] * (loop.sizes[k] - 1);
      index[k] = 0;
    }
  }
}

void host_copy(char* dst, const std::vector<int64_t>& dst_strides, int32_t dst_dtype, const char* src,
               const std::vector<int64_t>& src_strides, int32_t src_dtype, const std::vector<int64_t>& sizes) {
  LoopDims loop = plan_loop(sizes, dst_strides, src_strides);
  const auto dsize = static_cast<int64_t>(element_size(dst_dtype));
  const auto ssize = static_cast<int64_t>(element_size(src_dtype));
  const bool same = dst_dtype == src_dtype;
  if (loop.sizes.empty()) {  // a single element
    if (same) std::memcpy(dst, src, static_cast<std::size_t>(dsize));
    else convert_element(src, src_dtype, dst, dst_dtype);
    return;
  }
  const std::size_t inner = loop.sizes.size() - 1;
  const int64_t n = loop.sizes[inner];
  const int64_t dstep = loop.dst[inner] * dsize;
  const int64_t sstep = loop.src[inner] * ssize;
  const bool contiguous_run = same && loop.dst[inner] == 1 && loop.src[inner] == 1;
  for_each_outer(loop, inner, [&](int64_t d, int64_t s) {
    char* dp = dst + d * dsize;
    const char* sp = src + s * ssize;
    if (contiguous_run) {
      std::memcpy(dp, sp, static_cast<std::size_t>(n * dsize));
      return;
    }
    for (int64_t k = 0; k < n; ++k, dp += dstep, sp += sstep) {
      if (same) std::memcpy(dp, sp, static_cast<std::size_t>(dsize));
      else convert_element(sp, src_dtype, dp, dst_dtype);
    }
  });
}

std::size_t span_bytes(const View& v) {
  return required_bytes(0, span_elements(v.sizes, v.strides), element_size(v.dtype));
}

// True when the byte ranges covered by two views in the same memory space intersect.
bool views_overlap(const View& a, const View& b) {
  if (a.cuda != b.cuda || (a.cuda && a.device != b.device)) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<uintptr_t>(b.data);
  const std::size_t as = span_bytes(a);
  const std::size_t bs = span_bytes(b);
  return as != 0 && bs != 0 && a0 < b0 + bs && b0 < a0 + as;
}

// Host staging for copies that touch CUDA and cannot be expressed as 2-D memcpys.
void staged_copy(const View& dst, const View& src, cudaStream_t stream) {
  const char* src_host = src.data;
  std::unique_ptr<HostBuffer> src_stage;
  if (src.cuda) {
    std::size_t bytes = span_bytes(src);
    src_stage = std::make_unique<HostBuffer>(bytes);
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(src_stage->get(), src.data, bytes, cudaMemcpyDefault, stream)),
               "cudaMemcpyAsync (device -> host staging)");
    check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (staging)");
    src_host = src_stage->get();
  } else if (dst.cuda) {
    // The host source may be written by earlier work on the stream (a pending
    // non_blocking D2H into pinned memory): order the CPU read after it.
    check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (staging)");
  }
  if (!dst.cuda) {
    host_copy(dst.data, dst.strides, dst.dtype, src_host, src.strides, src.dtype, dst.sizes);
    return;
  }
  // Read-modify-write of the destination's covering span, so bytes between the
  // view's elements (other tensors' data) are preserved.
  std::size_t bytes = span_bytes(dst);
  HostBuffer dst_stage(bytes);
  check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst_stage.get(), dst.data, bytes, cudaMemcpyDefault, stream)),
             "cudaMemcpyAsync (device -> host staging)");
  check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (staging)");
  host_copy(dst_stage.get(), dst.strides, dst.dtype, src_host, src.strides, src.dtype, dst.sizes);
  check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst.data, dst_stage.get(), bytes, cudaMemcpyDefault, stream)),
             "cudaMemcpyAsync (host staging -> device)");
  check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (staging)");  // before the buffer is freed
}

// Tries to express the copy as <= kMaxSlabs 2-D memcpys; returns false when it cannot.
bool memcpy2d_copy(const View& dst, const View& src, cudaStream_t stream) {
  const auto item = static_cast<int64_t>(element_size(dst.dtype));
  LoopDims loop = plan_loop(dst.sizes, dst.strides, src.strides);
  if (loop.sizes.empty()) {
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(item), cudaMemcpyDefault, stream)),
               "cudaMemcpyAsync");
    return true;
  }
  const std::size_t nd = loop.sizes.size();
  int64_t width = item;
  int64_t height = 1;
  int64_t dpitch = item;
  int64_t spitch = item;
  std::size_t outer = 0;
  if (loop.dst[nd - 1] == 1 && loop.src[nd - 1] == 1) {
    width = loop.sizes[nd - 1] * item;
    if (nd == 1) {
      check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(width), cudaMemcpyDefault, stream)),
                 "cudaMemcpyAsync");
      return true;
    }
    height = loop.sizes[nd - 2];
    dpitch = loop.dst[nd - 2] * item;
    spitch = loop.src[nd - 2] * item;
    outer = nd - 2;
  } else {
    height = loop.sizes[nd - 1];
    dpitch = loop.dst[nd - 1] * item;
    spitch = loop.src[nd - 1] * item;
    outer = nd - 1;
  }
  if (dpitch < width || spitch < width) return false;  // overlapping rows (e.g. broadcast): not a 2-D memcpy
  int64_t slabs = 1;
  for (std::size_t k = 0; k < outer; ++k) {
    slabs *= loop.sizes[k];
    if (slabs > kMaxSlabs) return false;
  }
  bool ok = true;
  for_each_outer(loop, outer, [&](int64_t d, int64_t s) {
    if (!ok) return;
    cudaError_t err = cudaMemcpy2DAsync(dst.data + d * item, static_cast<std::size_t>(dpitch), src.data + s * item,
                                        static_cast<std::size_t>(spitch), static_cast<std::size_t>(width),
                                        static_cast<std::size_t>(height), cudaMemcpyDefault, stream);
    if (err == cudaErrorInvalidPitchValue) {
      (void)cudaGetLastError();
      ok = false;  // pitch beyond the device limit; only possible on the first slab
      return;
    }
    check_cuda(err, "cudaMemcpy2DAsync");
  });
  return ok;
}

// A device-to-device copy on one device as one strided-copy kernel (enqueued,
// nothing staged or waited for); false when the kernel cannot express it.
bool device_kernel_copy(const View& dst, const View& src, cudaStream_t stream) {
  if (!dst.cuda || !src.cuda || dst.device != src.device) return false;
  return copy_by_kernel(dst.data, dst.strides.data(), src.data, src.strides.data(), dst.sizes.data(),
                        static_cast<int>(dst.sizes.size()), element_size(dst.dtype), stream);
}

}  // namespace

bool copy_by_kernel(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
                    const int64_t* sizes, int ndim, std::size_t element_bytes, void* stream) {
  const int err = AOTI_CUDA_FAULTABLE(launch_strided_copy(dst, dst_strides, src, src_strides, sizes, ndim,
                                                          element_bytes, static_cast<cudaStream_t>(stream)));
  if (err == cudaErrorInvalidValue) return false;
  check_cuda(static_cast<cudaError_t>(err), "strided copy kernel launch");
  return true;
}

int copy_device(const View& dst, const View& src) noexcept {
  if (dst.cuda) return dst.device;
  return src.cuda ? src.device : -1;
}

void copy_views(const View& dst, const View& src_in, bool non_blocking, void* stream_handle) {
  if (!conversion_supported(src_in.dtype, dst.dtype)) {
    throw Error(ErrorCode::kUnsupported, std::string("dtype conversion ") + dtype_name(src_in.dtype) + " -> " +
                                             dtype_name(dst.dtype) + " is not supported");
  }
  // Broadcast src to dst's sizes (trailing dims aligned; size-1 dims get stride 0).
  View src = src_in;
  if (src.sizes != dst.sizes) {
    bool ok = src.sizes.size() <= dst.sizes.size();
    const std::size_t lead = dst.sizes.size() - (ok ? src.sizes.size() : 0);
    std::vector<int64_t> strides(dst.sizes.size(), 0);
    for (std::size_t i = 0; ok && i < src.sizes.size(); ++i) {
      const int64_t want = dst.sizes[lead + i];
      if (src.sizes[i] == want) strides[lead + i] = src.strides[i];
      else if (src.sizes[i] != 1) ok = false;
    }
    if (!ok) {
      throw Error(ErrorCode::kInvalidArgument, "shape mismatch: cannot copy a source of sizes " + format_dims(src_in.sizes) +
                    " into a destination of sizes " + format_dims(dst.sizes));
    }
    src.sizes = dst.sizes;
    src.strides = std::move(strides);
  }
  const int64_t numel = checked_numel(dst.sizes);
  if (numel == 0) return;
  if (views_overlap(dst, src)) {
    // Reading and writing the same bytes in one pass is undefined for memcpy and
    // cudaMemcpy: materialize the source in a temporary contiguous buffer first.
    const std::size_t bytes = static_cast<std::size_t>(numel) * element_size(src.dtype);
    View tmp = src;
    tmp.strides = contiguous_strides(src.sizes);
    tmp.pinned = false;
    if (!src.cuda) {
      HostBuffer buffer(bytes);
      tmp.data = buffer.get();
      host_copy(tmp.data, tmp.strides, tmp.dtype, src.data, src.strides, src.dtype, src.sizes);
      copy_views(dst, tmp, non_blocking, stream_handle);
      return;
    }
    DeviceGuard on_device(src.device);
    auto stream = static_cast<cudaStream_t>(stream_handle);
    void* scratch = nullptr;
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMallocAsync(&scratch, bytes, stream)), "cudaMallocAsync (overlapping copy)");
    struct FreeOnExit {
      void* ptr;
      cudaStream_t stream;
      ~FreeOnExit() {  // stream-ordered after the copies
        if (cudaFreeAsync(ptr, stream) != cudaSuccess) (void)cudaGetLastError();
      }
    } release{scratch, stream};
    tmp.data = static_cast<char*>(scratch);
    copy_views(tmp, src, false, stream_handle);
    copy_views(dst, tmp, non_blocking, stream_handle);
    return;
  }
  if (!dst.cuda && !src.cuda) {
    host_copy(dst.data, dst.strides, dst.dtype, src.data, src.strides, src.dtype, dst.sizes);
    return;
  }
  const int device = dst.cuda ? dst.device : src.device;
  DeviceGuard on_device(device);
  auto stream = static_cast<cudaStream_t>(stream_handle);
  if (dst.dtype != src.dtype || !memcpy2d_copy(dst, src, stream)) {
    if (dst.dtype == src.dtype && device_kernel_copy(dst, src, stream)) return;
    staged_copy(dst, src, stream);
    return;
  }
  const bool host_involved = !dst.cuda || !src.cuda;
  const bool host_pinned = !dst.cuda ? dst.pinned : src.pinned;
  if (host_involved && (!non_blocking || !host_pinned)) {
    check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (after host copy)");
  }
}

void zero_view(const View& dst, void* stream) {
  const int64_t numel = checked_numel(dst.sizes);
  if (numel == 0) return;
  const std::size_t item = element_size(dst.dtype);
  const bool dense = is_non_overlapping_and_dense(dst.sizes, dst.strides);
  if (dense) {
    const std::size_t bytes = static_cast<std::size_t>(numel) * item;
    if (!dst.cuda) {
      std::memset(dst.data, 0, bytes);
      return;
    }
    DeviceGuard on_device(dst.device);
    check_cuda(AOTI_CUDA_FAULTABLE(cudaMemsetAsync(dst.data, 0, bytes, static_cast<cudaStream_t>(stream))),
               "cudaMemsetAsync");
    return;
  }
  // Non-dense: copy from a zero-filled contiguous host buffer (broadcast over nothing).
  HostBuffer zeros(static_cast<std::size_t>(numel) * item);
  std::memset(zeros.get(), 0, static_cast<std::size_t>(numel) * item);
  View src;
  src.data = zeros.get();
  src.sizes = dst.sizes;
  src.strides = contiguous_strides(dst.sizes);
  src.dtype = dst.dtype;
  copy_views(dst, src, false, stream);  // synchronizes: the buffer dies at return
}

void read_single_element(const View& view, void* out, void* stream_handle) {
  const std::size_t item = element_size(view.dtype);
  if (!view.cuda) {
    std::memcpy(out, view.data, item);
    return;
  }
  DeviceGuard on_device(view.device);
  auto stream = static_cast<cudaStream_t>(stream_handle);
  check_cuda(AOTI_CUDA_FAULTABLE(cudaMemcpyAsync(out, view.data, item, cudaMemcpyDeviceToHost, stream)), "cudaMemcpyAsync (item)");
  check_cuda(AOTI_CUDA_FAULTABLE(cudaStreamSynchronize(stream)), "cudaStreamSynchronize (item)");
}

}  // namespace aoti_cuda::common
