// PyTorch through Python, looked up once (torch_api.hpp).
#include "torch_api.hpp"

namespace aoti_cuda::python {

TorchApi& TorchApi::get() {
  // Leaked on purpose: Python objects must not be released after the
  // interpreter has gone (static destructors run after Py_Finalize).
  static TorchApi* api = new TorchApi();
  return *api;
}

bool TorchApi::available() {
  if (ready_) return true;
  PyObject* modules = PySys_GetObject("modules");  // borrowed
  if (modules == nullptr) return false;
  PyObject* torch = PyDict_GetItemString(modules, "torch");  // borrowed
  return torch != nullptr && init(nb::handle(torch));
}

bool TorchApi::import_torch() {
  if (available()) return true;
  try {
    return init(nb::module_::import_("torch"));
  } catch (const nb::python_error& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    return false;
  }
}

bool TorchApi::init(nb::handle torch) {
  // A torch that is still importing (sys.modules has it half made) is not used yet.
  if (!nb::hasattr(torch, "Tensor") || !nb::hasattr(torch, "from_dlpack")) return false;
  nb::object tensor = torch.attr("Tensor");
  if (!PyType_Check(tensor.ptr())) return false;
  std::vector<std::pair<nb::object, DType>> dtypes;
  for (int code = 0; code < 64; ++code) {
    if (!is_valid_dtype(code)) continue;
    const char* name = dtype_name(code);
    if (nb::hasattr(torch, name)) dtypes.emplace_back(torch.attr(name), static_cast<DType>(code));
  }
  nb::object c = nb::getattr(torch, "_C", nb::none());
  raw_stream_ = c.is_none() ? nb::none() : nb::getattr(c, "_cuda_getCurrentRawStream", nb::none());
  // torch.from_dlpack on a capsule goes straight to torch's converter; its
  // private C entry point skips a Python frame and a hasattr when present.
  nb::object fast = c.is_none() ? nb::none() : nb::getattr(c, "_from_dlpack", nb::none());
  from_dlpack_ = fast.is_none() ? torch.attr("from_dlpack") : fast;
  nb::object to = c.is_none() ? nb::none() : nb::getattr(c, "_to_dlpack", nb::none());  // = torch.utils.dlpack.to_dlpack
  to_dlpack_ = to.is_none() ? nb::module_::import_("torch.utils.dlpack").attr("to_dlpack") : to;
  torch_ = nb::borrow(torch);
  tensor_type_ = reinterpret_cast<PyTypeObject*>(tensor.ptr());
  dtypes_ = std::move(dtypes);
  ready_ = true;
  return true;
}

std::optional<DType> TorchApi::dtype_of(PyObject* torch_dtype) const {
  for (const auto& [obj, dtype] : dtypes_) {
    if (obj.ptr() == torch_dtype) return dtype;
  }
  return std::nullopt;
}

std::uintptr_t TorchApi::current_stream(int index) const {
  if (!raw_stream_.is_none()) return nb::cast<std::uintptr_t>(raw_stream_(index));
  nb::object stream = torch_.attr("cuda").attr("current_stream")(index);
  return nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
}

}  // namespace aoti_cuda::python
