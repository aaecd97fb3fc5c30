// PyTorch through Python, looked up once (torch_api.hpp).
#include "torch_api.hpp"

#include <cstdlib>
#include <string_view>

namespace aoti_cuda::python {

namespace {

// torch.Tensor's DLPack C exchange table: the attribute is a capsule named
// "dlpack_exchange_api" on the type (its first name, without "dlpack_" in
// front, is accepted too). Null when absent, disabled or of another major
// version.
const DlpackExchangeApi* find_exchange_api(nb::handle tensor_type) {
  const char* off = std::getenv("AOTI_CUDA_PYTHON_NO_EXCHANGE_API");
  if (off != nullptr && std::string_view(off) == "1") return nullptr;
  for (const char* name : {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"}) {
    nb::object capsule = nb::getattr(tensor_type, name, nb::none());
    if (capsule.is_none() || !PyCapsule_IsValid(capsule.ptr(), "dlpack_exchange_api")) continue;
    const auto* api = static_cast<const DlpackExchangeApi*>(PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
    // Walk back to a major version 1 table (a newer torch may chain older ones).
    for (const auto* h = api ? &api->header : nullptr; h != nullptr; h = h->prev_api) {
      const auto* table = reinterpret_cast<const DlpackExchangeApi*>(h);
      if (h->version.major == 1 && h->version.minor >= 2 && table->managed_tensor_from_py_object_no_sync != nullptr &&
          table->managed_tensor_to_py_object_no_sync != nullptr && table->current_work_stream != nullptr) {
        return table;
      }
    }
  }
  return nullptr;
}

}  // namespace

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
  exchange_ = find_exchange_api(tensor);
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
  if (exchange_ != nullptr) {
    void* stream = nullptr;
    if (exchange_->current_work_stream(kDLCUDA, index, &stream) != 0) throw nb::python_error();
    return reinterpret_cast<std::uintptr_t>(stream);
  }
  if (!raw_stream_.is_none()) return nb::cast<std::uintptr_t>(raw_stream_(index));
  nb::object stream = torch_.attr("cuda").attr("current_stream")(index);
  return nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
}

}  // namespace aoti_cuda::python
