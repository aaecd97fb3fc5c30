// The parts of PyTorch the binding uses, found through Python (the extension
// never links libtorch): the Tensor type and dtypes, the current CUDA stream,
// and DLPack both ways.
//
// Two routes to the same facts. When torch publishes DLPack's C exchange
// table (`torch.Tensor.__dlpack_c_exchange_api__`, DLPack 1.2), tensors go in
// and out and the current stream is read through its C functions: no Python
// call and no capsule per tensor, which is most of what a call costs in
// Python. Otherwise through torch's Python entry points (_to_dlpack,
// _from_dlpack, _cuda_getCurrentRawStream).
//
// Every function needs the GIL.
#pragma once

#include <dlpack/dlpack.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "aoti_cuda/dtype.hpp"

namespace aoti_cuda::python {

namespace nb = nanobind;

/// DLPack >= 1.0's managed tensor ("dltensor_versioned"), laid out as the
/// DLPack specification defines it: the DLPack header the SDK builds against
/// (0.6) predates it. DLTensor itself is unchanged between versions.
struct VersionedManaged {
  struct {
    uint32_t major, minor;
  } version;
  void* manager_ctx;
  void (*deleter)(VersionedManaged*);
  uint64_t flags;
  DLTensor dl_tensor;
};
inline constexpr uint64_t kDlpackReadOnly = 1;

/// DLPack 1.2's C exchange table (`DLPackExchangeAPI`), as the specification
/// lays it out; only major version 1 is read. Each function returns 0, or -1
/// with a Python exception set.
struct DlpackExchangeApi {
  struct Header {
    struct {
      uint32_t major, minor;
    } version;
    Header* prev_api;
  } header;
  void* managed_tensor_allocator;  // not used
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, VersionedManaged** out);
  int (*managed_tensor_to_py_object_no_sync)(VersionedManaged* tensor, void** out_py_object);
  void* dltensor_from_py_object_no_sync;  // not used: the call may outlive the caller's view
  int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void** out_stream);
};

class TorchApi {
 public:
  /// The process's one instance.
  static TorchApi& get();

  /// True once torch has been imported by anyone (sys.modules is looked at
  /// again on each call until it is there). Never imports torch.
  bool available();
  /// Imports torch when it is installed; false when it is not.
  bool import_torch();

  /// `o` is a torch.Tensor (or a subclass). Requires available().
  bool is_tensor(PyObject* o) const { return PyObject_TypeCheck(o, tensor_type_) != 0; }
  /// The SDK dtype of a torch.dtype object (nullopt for one the SDK has no code for).
  std::optional<DType> dtype_of(PyObject* torch_dtype) const;
  /// torch's current stream on CUDA device `index`, as a cudaStream_t value
  /// (0: the legacy default stream).
  std::uintptr_t current_stream(int index) const;
  /// torch.utils.dlpack.to_dlpack(t): a "dltensor" capsule over a tensor's
  /// memory (no copy, no stream handling); an invalid object with the Python
  /// error set when torch refuses.
  nb::object to_dlpack(PyObject* tensor) const { return nb::steal(PyObject_CallOneArg(to_dlpack_.ptr(), tensor)); }
  /// A torch tensor that takes over a "dltensor" capsule (no copy).
  nb::object from_dlpack(nb::handle capsule) const { return from_dlpack_(capsule); }
  /// torch's C exchange table, or null when this torch has none (or one of
  /// another major version). AOTI_CUDA_PYTHON_NO_EXCHANGE_API=1 disables it,
  /// so that the Python route can be tested and compared.
  const DlpackExchangeApi* exchange() const { return exchange_; }

 private:
  TorchApi() = default;
  bool init(nb::handle torch);

  bool ready_ = false;
  nb::object torch_;
  PyTypeObject* tensor_type_ = nullptr;
  std::vector<std::pair<nb::object, DType>> dtypes_;
  nb::object raw_stream_;  // torch._C._cuda_getCurrentRawStream, when torch has it
  nb::object from_dlpack_;
  nb::object to_dlpack_;
  const DlpackExchangeApi* exchange_ = nullptr;
};

}  // namespace aoti_cuda::python
