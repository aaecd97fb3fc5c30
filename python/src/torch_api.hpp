// The parts of PyTorch the binding uses, found through Python (the extension
// never links libtorch): the Tensor type and dtypes (to read a tensor's
// memory, shape and strides without a DLPack round trip), the current CUDA
// stream, and the DLPack import that turns outputs into torch tensors.
//
// Every function needs the GIL.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "aoti_cuda/dtype.hpp"

namespace aoti_cuda::python {

namespace nb = nanobind;

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
};

}  // namespace aoti_cuda::python
