// Python objects <-> aoti_cuda::Tensor, without copies.
//
// In: a torch.Tensor through torch's DLPack C exchange table when it has one
// (a C call, no capsule), else torch's own DLPack export; anything else through DLPack:
// a "dltensor" / "dltensor_versioned" capsule, or an object with __dlpack__
// (NumPy arrays, CuPy, JAX, ...). The Tensor keeps the Python object (or the
// DLPack producer's memory) alive for as long as the SDK uses it.
//
// Out: torch tensors through the same C table (else a DLPack capsule); otherwise NumPy arrays for
// host memory and DLPack-capable objects (__dlpack__, __dlpack_device__) for
// device memory. Each output keeps the SDK tensor alive.
//
// Every function needs the GIL and throws aoti_cuda::Error (kInvalidArgument
// naming the method, input/output and what was wrong; kUnsupported for a
// dtype or device the SDK cannot take).
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda::python {

namespace nb = nanobind;

/// The cudaStream_t the SDK gets for a stream value as Python libraries
/// report it (torch's `cuda_stream`, DLPack's): 0 is the legacy default
/// stream, which the SDK would otherwise read as "the Module's own stream".
void* sdk_stream(std::uintptr_t value);

/// What one call needs to read its tensors and where it runs.
struct CallContext {
  Device device;            ///< the Module's
  std::string_view method;  ///< for messages
  /// Who chose the CUDA stream: the caller (stream=...), torch (the current
  /// stream of the first torch CUDA input), another DLPack producer (the
  /// legacy default stream, which it was asked to order its work on; the call
  /// then waits before returning), or nobody (the Module's own stream).
  enum class StreamFrom { kNone, kCaller, kTorch, kDlpack };
  StreamFrom stream_from = StreamFrom::kNone;
  std::uintptr_t stream = 0;
};

/// Sets ctx's stream from a `stream=` argument: None (leave it to the
/// inputs), an int (a cudaStream_t value) or an object with `cuda_stream`
/// (torch.cuda.Stream, cupy.cuda.Stream).
void set_caller_stream(nb::handle stream, CallContext& ctx);

/// `obj` as a Tensor. `role` ("input"/"output") and `index` name it in
/// messages; a `writable` one (a bound output) must not be read-only.
Tensor read_tensor(nb::handle obj, CallContext& ctx, const char* role, std::size_t index, bool writable);

/// What outputs become in Python.
enum class OutputType {
  kAuto,    ///< NumPy arrays (host) or DLPack objects (device); torch once resolved at load
  kTorch,   ///< torch tensors
  kNumpy,   ///< NumPy arrays (outputs are brought to the host)
  kDlpack,  ///< objects with __dlpack__ / __dlpack_device__ (and the buffer protocol on the host)
};
/// "auto", "torch", "numpy" or "dlpack"; anything else is kInvalidArgument.
OutputType parse_output_type(std::string_view name);
const char* output_type_name(OutputType type);

/// The Python object for an SDK output (shares its memory).
nb::object wrap_tensor(const Tensor& t, OutputType type);

}  // namespace aoti_cuda::python
