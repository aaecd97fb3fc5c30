// aoti_cuda — DLPack interop: exchange tensors with PyTorch, CuPy, JAX, NumPy
// or any other DLPack-aware library without copying.
//
// Optional header: it is NOT included by the umbrella header aoti_cuda.hpp,
// because it needs the DLPack C header <dlpack/dlpack.h> (Debian/Ubuntu:
// libdlpack-dev), which the rest of the SDK does not. Include it explicitly:
//
//     #include <aoti_cuda/dlpack.hpp>
//
//     DLManagedTensor* in = producer_export();        // e.g. torch.utils.dlpack capsule
//     aoti_cuda::Tensor x = aoti_cuda::from_dlpack(in);  // x now owns `in`
//     auto y = module.forward({x});
//     DLManagedTensor* out = aoti_cuda::to_dlpack(y[0]);  // consumer calls out->deleter(out)
//
// Only the unversioned DLManagedTensor is handled. Its memory layout is the
// same in DLPack 0.x and 1.x headers, so producers and consumers built against
// a newer DLPack header interoperate with this one. The versioned
// DLManagedTensorVersioned (DLPack >= 1.0) is not supported yet: the DLPack
// header this SDK is built and tested against (Debian libdlpack-dev 0.6) does
// not define it.
#pragma once

#include <dlpack/dlpack.h>

#include "aoti_cuda/export.h"
#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda {

/// Wraps the memory described by `managed` as a Tensor without copying.
///
/// On success the returned Tensor takes ownership of `managed`: its
/// `deleter` (when not null) is called exactly once, when the last copy of the
/// Tensor (including copies held by a Module run or exported again with
/// to_dlpack) is destroyed. The caller must not use `managed` afterwards.
///
/// On failure an aoti_cuda::Error is thrown and ownership stays with the
/// caller: the deleter is NOT called, so the caller may hand the tensor to
/// someone else or release it itself.
///
/// Accepted:
///  - dtype (lanes must be 1): float 16/32/64, bfloat 16, complex 32/64/128,
///    int 8/16/32/64, uint 8/16/32/64, bool (code 6, 8 bits);
///  - device: kDLCPU and kDLCUDAHost (-> Device::cpu()), kDLCUDA and
///    kDLCUDAManaged (-> Device::cuda(device_id));
///  - strides: null (contiguous) or non-negative element strides;
///  - byte_offset: the tensor starts at data + byte_offset, which must be
///    aligned to the element size.
/// Rejected with ErrorCode::kUnsupported: other dtypes, vector lanes, other
/// device types, negative strides, more than 64 dimensions. Rejected with
/// ErrorCode::kInvalidArgument: a null `managed`, negative ndim, sizes or device id,
/// null shape / data where they are needed, misaligned data.
///
/// The memory is not synchronized: for CUDA tensors the producer's pending
/// work must be ordered before your use of it (the DLPack `stream` protocol of
/// the Python libraries does this on their side).
AOTI_CUDA_API Tensor from_dlpack(DLManagedTensor* managed);

/// Exports `tensor` as a DLManagedTensor without copying.
///
/// The returned object holds a reference to the tensor's memory (and its own
/// shape/strides arrays), so the memory stays alive after every aoti_cuda copy
/// of `tensor` is gone. The consumer must call `result->deleter(result)` exactly
/// once when done. A borrowed tensor (Tensor::from_blob without an owner)
/// stays borrowed: its memory must outlive the export.
///
/// The export always fills `strides` (in elements), sets byte_offset = 0 and
/// points `data` at the first element (as PyTorch does). Device:
/// Device::cpu() -> kDLCPU, Device::cuda(i) -> kDLCUDA with device_id i.
/// bool is exported with the DLPack bool type code (kDLBool = 6, DLPack >= 0.8;
/// consumers built against older DLPack do not know it).
///
/// Throws aoti_cuda::Error: kInvalidArgument for an undefined tensor,
/// kUnsupported for a dtype DLPack cannot describe here (quantized, float8,
/// bits).
AOTI_CUDA_API DLManagedTensor* to_dlpack(const Tensor& tensor);

}  // namespace aoti_cuda
