// Python objects <-> aoti_cuda::Tensor (convert.hpp).
#include "convert.hpp"

#include <dlpack/dlpack.h>
#include <nanobind/ndarray.h>

#include <memory>
#include <optional>
#include <vector>

#include "aoti_cuda/dlpack.hpp"
#include "aoti_cuda/error.hpp"
#include "torch_api.hpp"

namespace aoti_cuda::python {
namespace {

// A legacy DLManagedTensor over a versioned one, so that the SDK's
// from_dlpack can take it over: deleting the adapter deletes the original.
struct VersionedAdapter {
  DLManagedTensor legacy{};
  VersionedManaged* original = nullptr;
  static void release(DLManagedTensor* self) {
    auto* a = static_cast<VersionedAdapter*>(self->manager_ctx);
    if (a->original->deleter != nullptr) a->original->deleter(a->original);
    delete a;
  }
};

[[noreturn]] void fail(ErrorCode code, const CallContext& ctx, const char* role, std::size_t index,
                       const std::string& what) {
  throw Error(code, "method '" + std::string(ctx.method) + "' " + role + " " + std::to_string(index) + " " + what);
}

std::string py_type_name(nb::handle obj) { return nb::type_name(obj.type()).c_str(); }

PyObject* interned(const char* s) { return PyUnicode_InternFromString(s); }

void check_device(Device dev, const CallContext& ctx, const char* role, std::size_t index) {
  if (dev.is_cpu()) return;  // host memory is copied to the Module's device
  if (ctx.device.is_cpu()) fail(ErrorCode::kInvalidArgument, ctx, role, index, "is on " + dev.str() + ", but the Module runs on the CPU");
  if (dev.index != ctx.device.index) {
    fail(ErrorCode::kInvalidArgument, ctx, role, index,
         "is on " + dev.str() + ", but the Module runs on " + ctx.device.str() + ": move it there first (e.g. x.to('" +
             ctx.device.str() + "'))");
  }
}

// from_dlpack, its refusal (e.g. negative strides) naming the input.
Tensor import_or_fail(DLManagedTensor* managed, const CallContext& ctx, const char* role, std::size_t index) {
  try {
    return from_dlpack(managed);
  } catch (const Error& e) {
    fail(e.code(), ctx, role, index, std::string("cannot be read: ") + e.what());
  }
}

// A versioned managed tensor taken over by the SDK (through a legacy adapter).
// On failure nothing is taken: `v` still belongs to the caller.
Tensor import_versioned(VersionedManaged* v, const CallContext& ctx, const char* role, std::size_t index, bool writable) {
  if (v->version.major != 1) {
    fail(ErrorCode::kUnsupported, ctx, role, index, "is a DLPack " + std::to_string(v->version.major) + ".x tensor; aoti_cuda reads DLPack 1.x and 0.x");
  }
  if (writable && (v->flags & kDlpackReadOnly) != 0) fail(ErrorCode::kInvalidArgument, ctx, role, index, "is read-only");
  const auto type = v->dl_tensor.device.device_type;
  check_device(type == kDLCUDA || type == kDLCUDAManaged ? Device::cuda(v->dl_tensor.device.device_id) : Device::cpu(), ctx,
               role, index);
  auto adapter = std::make_unique<VersionedAdapter>();
  adapter->original = v;
  adapter->legacy.dl_tensor = v->dl_tensor;
  adapter->legacy.manager_ctx = adapter.get();
  adapter->legacy.deleter = &VersionedAdapter::release;
  Tensor t = import_or_fail(&adapter->legacy, ctx, role, index);  // on failure the adapter goes, v stays the caller's
  adapter.release();
  return t;
}

Tensor read_capsule(PyObject* capsule, const CallContext& ctx, const char* role, std::size_t index, bool writable) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    Device dev = managed->dl_tensor.device.device_type == kDLCUDA || managed->dl_tensor.device.device_type == kDLCUDAManaged
                     ? Device::cuda(managed->dl_tensor.device.device_id)
                     : Device::cpu();
    check_device(dev, ctx, role, index);
    Tensor t = import_or_fail(managed, ctx, role, index);  // on failure the capsule still owns it
    PyCapsule_SetName(capsule, "used_dltensor");
    return t;
  }
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* v = static_cast<VersionedManaged*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    Tensor t = import_versioned(v, ctx, role, index, writable);  // on failure the capsule keeps the tensor
    PyCapsule_SetName(capsule, "used_dltensor_versioned");
    return t;
  }
  const char* name = PyCapsule_GetName(capsule);
  fail(ErrorCode::kInvalidArgument, ctx, role, index,
       "is a capsule named '" + std::string(name ? name : "") + "', not an unused DLPack tensor ('dltensor')");
}

// A torch.Tensor through torch's own DLPack export (one C call: cheaper than
// its Python-level __dlpack__, and than reading its attributes one by one).
Tensor read_torch(PyObject* o, CallContext& ctx, const char* role, std::size_t index, bool writable) {
  const TorchApi& api = TorchApi::get();
  Tensor t;
  VersionedManaged* v = nullptr;
  if (api.exchange() != nullptr && api.exchange()->managed_tensor_from_py_object_no_sync(o, &v) == 0 && v != nullptr &&
      v->dl_tensor.dtype.code != kDLComplex) {
    // torch's C export: no Python call, no capsule. On a refusal the same
    // tensor goes through the Python route below, which words the error.
    struct Owned {  // v until the SDK takes it over
      VersionedManaged* v;
      ~Owned() {
        if (v != nullptr && v->deleter != nullptr) v->deleter(v);
      }
    } owned{v};
    t = import_versioned(v, ctx, role, index, writable);
    owned.v = nullptr;
  } else {
    if (v != nullptr && v->deleter != nullptr) v->deleter(v);  // a complex tensor: checked for conjugation below
    PyErr_Clear();
    nb::object capsule = api.to_dlpack(o);
    if (!capsule.is_valid()) {
      nb::python_error refused;  // e.g. a tensor on the meta device
      const std::string device = nb::str(nb::object(nb::handle(o).attr("device"))).c_str();
      fail(ErrorCode::kUnsupported, ctx, role, index,
           "is on device '" + device + "', which aoti_cuda cannot read (torch: " + refused.what() + ")");
    }
    const auto* managed = static_cast<const DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (managed != nullptr && managed->dl_tensor.dtype.code == kDLComplex) {
      static PyObject* const s_is_conj = interned("is_conj");
      nb::object conj = nb::steal(PyObject_CallMethodNoArgs(o, s_is_conj));
      if (conj.ptr() == Py_True) fail(ErrorCode::kInvalidArgument, ctx, role, index, "is a conjugate view: pass x.resolve_conj()");
    }
    t = read_capsule(capsule.ptr(), ctx, role, index, writable);
  }
  if (t.device().is_cuda() && ctx.stream_from == CallContext::StreamFrom::kNone) {
    ctx.stream_from = CallContext::StreamFrom::kTorch;
    ctx.stream = api.current_stream(t.device().index);
  }
  return t;
}

// obj.__dlpack__(...), falling back to a versioned capsule for producers that
// need one (e.g. a read-only NumPy array).
nb::object call_dlpack(nb::handle obj, std::optional<std::uintptr_t> stream) {
  nb::object method = obj.attr("__dlpack__");
  nb::dict kw;
  if (stream) kw["stream"] = *stream;
  try {
    return method(**kw);
  } catch (const nb::python_error& e) {
    if (!e.matches(PyExc_BufferError) && !e.matches(PyExc_TypeError)) throw;
  }
  kw["max_version"] = nb::make_tuple(1, 0);
  return method(**kw);
}

Tensor read_dlpack_object(nb::handle obj, CallContext& ctx, const char* role, std::size_t index, bool writable) {
  std::optional<std::uintptr_t> stream;
  if (nb::hasattr(obj, "__dlpack_device__")) {
    nb::tuple dev = nb::tuple(obj.attr("__dlpack_device__")());
    const int type = nb::cast<int>(dev[0]);
    if (type == kDLCUDA || type == kDLCUDAManaged) {
      check_device(Device::cuda(nb::cast<int>(dev[1])), ctx, role, index);
      if (ctx.stream_from == CallContext::StreamFrom::kNone) {
        ctx.stream_from = CallContext::StreamFrom::kDlpack;
        ctx.stream = 0;
      }
      // DLPack names the legacy default stream 1 (0 is not allowed for CUDA).
      stream = ctx.stream == 0 ? std::uintptr_t{1} : ctx.stream;
    }
  }
  nb::object capsule = call_dlpack(obj, stream);
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    fail(ErrorCode::kInvalidArgument, ctx, role, index, "(" + py_type_name(obj) + ") returned no capsule from __dlpack__()");
  }
  return read_capsule(capsule.ptr(), ctx, role, index, writable);
}

struct DlpackType {
  uint8_t code, bits;
};
std::optional<DlpackType> dlpack_type(DType d) {
  switch (d) {
    case DType::kFloat16: return DlpackType{kDLFloat, 16};
    case DType::kFloat32: return DlpackType{kDLFloat, 32};
    case DType::kFloat64: return DlpackType{kDLFloat, 64};
    case DType::kBFloat16: return DlpackType{kDLBfloat, 16};
    case DType::kComplex64: return DlpackType{kDLComplex, 64};
    case DType::kComplex128: return DlpackType{kDLComplex, 128};
    case DType::kInt8: return DlpackType{kDLInt, 8};
    case DType::kInt16: return DlpackType{kDLInt, 16};
    case DType::kInt32: return DlpackType{kDLInt, 32};
    case DType::kInt64: return DlpackType{kDLInt, 64};
    case DType::kUInt8: return DlpackType{kDLUInt, 8};
    case DType::kUInt16: return DlpackType{kDLUInt, 16};
    case DType::kUInt32: return DlpackType{kDLUInt, 32};
    case DType::kUInt64: return DlpackType{kDLUInt, 64};
    case DType::kBool: return DlpackType{6, 8};  // kDLBool
    default: return std::nullopt;
  }
}

bool numpy_importable() {
  static int state = -1;  // -1 unknown, 0 no, 1 yes
  if (state < 0) {
    try {
      nb::module_::import_("numpy");
      state = 1;
    } catch (const nb::python_error&) {
      state = 0;
    }
  }
  return state == 1;
}

void release_capsule(PyObject* capsule) noexcept {
  // Consumers rename what they take over; only an unused capsule still owns its tensor.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
}

}  // namespace

void* sdk_stream(std::uintptr_t value) {
  return reinterpret_cast<void*>(value == 0 ? std::uintptr_t{1} : value);  // 1: cudaStreamLegacy
}

void set_caller_stream(nb::handle stream, CallContext& ctx) {
  if (stream.is_none()) return;
  nb::handle value = nb::hasattr(stream, "cuda_stream") ? nb::handle(stream.attr("cuda_stream")) : stream;
  std::uintptr_t s = 0;
  if (!nb::try_cast(value, s)) {
    throw Error(ErrorCode::kInvalidArgument, "stream must be None, an int (a cudaStream_t) or an object with "
                                             "'cuda_stream' (torch.cuda.Stream), got " + py_type_name(stream));
  }
  ctx.stream_from = CallContext::StreamFrom::kCaller;
  ctx.stream = s;
}

Tensor read_tensor(nb::handle obj, CallContext& ctx, const char* role, std::size_t index, bool writable) {
  TorchApi& api = TorchApi::get();
  if (api.available() && api.is_tensor(obj.ptr())) return read_torch(obj.ptr(), ctx, role, index, writable);
  if (PyCapsule_CheckExact(obj.ptr())) return read_capsule(obj.ptr(), ctx, role, index, writable);
  if (nb::hasattr(obj, "__dlpack__")) return read_dlpack_object(obj, ctx, role, index, writable);
  fail(ErrorCode::kInvalidArgument, ctx, role, index,
       "is a " + py_type_name(obj) + "; expected a torch.Tensor, a NumPy array or another object with __dlpack__");
}

OutputType parse_output_type(std::string_view name) {
  if (name == "auto") return OutputType::kAuto;
  if (name == "torch") return OutputType::kTorch;
  if (name == "numpy") return OutputType::kNumpy;
  if (name == "dlpack") return OutputType::kDlpack;
  throw Error(ErrorCode::kInvalidArgument,
              "output_type must be 'auto', 'torch', 'numpy' or 'dlpack', got '" + std::string(name) + "'");
}

const char* output_type_name(OutputType type) {
  switch (type) {
    case OutputType::kAuto: return "auto";
    case OutputType::kTorch: return "torch";
    case OutputType::kNumpy: return "numpy";
    case OutputType::kDlpack: return "dlpack";
  }
  return "auto";
}

namespace {

// A torch tensor over an SDK output through torch's C exchange table: a
// versioned managed tensor wrapping the SDK's legacy one.
struct VersionedOutput {
  VersionedManaged versioned{};
  DLManagedTensor* legacy = nullptr;
  static void release(VersionedManaged* self) {
    auto* o = static_cast<VersionedOutput*>(self->manager_ctx);
    if (o->legacy->deleter != nullptr) o->legacy->deleter(o->legacy);
    delete o;
  }
};

nb::object torch_from_exchange(const DlpackExchangeApi& api, const Tensor& t) {
  auto out = std::make_unique<VersionedOutput>();
  out->legacy = to_dlpack(t);
  out->versioned.version = {1, 0};
  out->versioned.manager_ctx = out.get();
  out->versioned.deleter = &VersionedOutput::release;
  out->versioned.dl_tensor = out->legacy->dl_tensor;
  VersionedManaged* v = &out.release()->versioned;
  void* obj = nullptr;
  // The producer takes the tensor over whatever the outcome (DLPack: "the
  // ownership of the tensor is stolen"), so a failure leaves nothing to free.
  if (api.managed_tensor_to_py_object_no_sync(v, &obj) != 0 || obj == nullptr) throw nb::python_error();
  return nb::steal(static_cast<PyObject*>(obj));
}

}  // namespace

nb::object wrap_tensor(const Tensor& t, OutputType type) {
  if (type == OutputType::kTorch) {
    if (const DlpackExchangeApi* api = TorchApi::get().exchange()) return torch_from_exchange(*api, t);
    DLManagedTensor* managed = to_dlpack(t);
    PyObject* capsule = PyCapsule_New(managed, "dltensor", release_capsule);
    if (capsule == nullptr) {
      managed->deleter(managed);
      throw nb::python_error();
    }
    return TorchApi::get().from_dlpack(nb::steal(capsule));
  }
  const std::optional<DlpackType> dt = dlpack_type(t.dtype());
  if (!dt) throw Error(ErrorCode::kUnsupported, std::string("an output of dtype ") + dtype_name(t.dtype()) + " has no DLPack type");
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  const nb::dlpack::dtype dtype{dt->code, dt->bits, 1};
  const bool host = t.device().is_cpu();
  const int device_type = host ? nb::device::cpu::value : nb::device::cuda::value;
  const int device_id = host ? 0 : t.device().index;
  const bool numpy_has_it = dt->code != kDLBfloat;
  if (host && type != OutputType::kDlpack && numpy_has_it && numpy_importable()) {
    return nb::cast(nb::ndarray<nb::numpy>(t.data(), shape.size(), shape.data(), owner, t.strides().data(), dtype,
                                           device_type, device_id));
  }
  return nb::cast(nb::ndarray<nb::array_api>(t.data(), shape.size(), shape.data(), owner, t.strides().data(), dtype,
                                             device_type, device_id));
}

}  // namespace aoti_cuda::python
