// The Python Module and Session (py_module.hpp).
#include "py_module.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <utility>

#include "aoti_cuda/error.hpp"
#include "torch_api.hpp"

namespace aoti_cuda::python {
namespace {

// Raised through the SDK's loader when on_progress raised: the Python
// exception itself is kept aside and re-raised once the load has unwound.
struct ProgressAborted : std::exception {
  const char* what() const noexcept override { return "the load was aborted by on_progress"; }
};

OutputLocation output_location(nb::handle h, OutputType type) {
  if (h.is_none()) return type == OutputType::kNumpy ? OutputLocation::kHost : OutputLocation::kSameAsInputs;
  std::string s;
  if (nb::try_cast(h, s)) {
    if (s == "same") return OutputLocation::kSameAsInputs;
    if (s == "host") return OutputLocation::kHost;
    if (s == "device") return OutputLocation::kDevice;
  }
  throw Error(ErrorCode::kInvalidArgument, "outputs must be None, 'same', 'host' or 'device', got " +
                                               std::string(nb::repr(h).c_str()));
}

GraphUse graph_use(nb::handle h) {
  if (h.is_none()) return GraphUse::kAsLoaded;
  if (h.ptr() == Py_True) return GraphUse::kOn;
  if (h.ptr() == Py_False) return GraphUse::kOff;
  throw Error(ErrorCode::kInvalidArgument, "use_graph must be None, True or False, got " + std::string(nb::repr(h).c_str()));
}

void wait_legacy_stream() {
  const cudaError_t err = cudaStreamSynchronize(cudaStreamLegacy);
  if (err != cudaSuccess) {
    throw Error(ErrorCode::kCuda, std::string("cudaStreamSynchronize (legacy default stream) failed: ") + cudaGetErrorName(err) +
                                      " (" + cudaGetErrorString(err) + ")");
  }
}

}  // namespace

struct PyModule::Prepared {
  CallContext ctx;
  std::vector<Tensor> inputs;
  std::vector<Tensor> bound;
  bool has_out = false;
  RunOptions ro;
};

PyModule::PyModule(const std::string& path, LoadOptions options, nb::object on_progress, OutputType output_type)
    : device_(options.device), output_type_(output_type) {
  TorchApi& torch = TorchApi::get();
  if (output_type_ == OutputType::kAuto && torch.import_torch()) output_type_ = OutputType::kTorch;
  if (output_type_ == OutputType::kTorch && !torch.import_torch()) {
    throw Error(ErrorCode::kInvalidArgument, "output_type='torch', but torch cannot be imported");
  }
  struct Relay {
    nb::object callback;
    std::optional<nb::python_error> error;
  } relay{std::move(on_progress), std::nullopt};
  if (!relay.callback.is_none()) {
    options.on_progress = [&relay](const LoadProgress& p) {
      nb::gil_scoped_acquire gil;
      try {
        relay.callback(p);
      } catch (nb::python_error& e) {
        relay.error.emplace(std::move(e));
        throw ProgressAborted();
      }
    };
  }
  try {
    nb::gil_scoped_release release;
    module_ = std::make_unique<Module>(path, options);
  } catch (...) {
    if (relay.error) throw nb::python_error(std::move(*relay.error));
    throw;
  }
}

PyModule::~PyModule() { close(); }

void PyModule::close() {
  std::unique_ptr<Module> doomed;
  {
    nb::gil_scoped_release release;
    std::unique_lock lock(mu_);
    for (PySession* s : sessions_) s->close_locked();  // sessions go before their Module
    sessions_.clear();
    doomed = std::move(module_);
    doomed.reset();  // waits for in-flight GPU work, unloads the libraries: without the GIL
  }
}

bool PyModule::closed() {
  std::shared_lock lock(mu_);
  return module_ == nullptr;
}

Module& PyModule::open_module() {
  if (!module_) throw Error(ErrorCode::kInvalidArgument, "the Module is closed");
  return *module_;
}

Session* PyModule::session_of(const CallArgs& args) {
  PySession* s = args.session;
  if (s == nullptr) return nullptr;
  if (s->module_ != this) throw Error(ErrorCode::kInvalidArgument, "the Session belongs to another Module");
  if (!s->session_) throw Error(ErrorCode::kInvalidArgument, "the Session is closed");
  return s->session_.get();
}

std::vector<std::string> PyModule::method_names() {
  std::shared_lock lock(mu_);
  return open_module().method_names();
}

std::string PyModule::default_method() {
  std::shared_lock lock(mu_);
  return open_module().default_method();
}

MethodMeta PyModule::method_meta(std::string_view method) {
  std::shared_lock lock(mu_);
  return open_module().method_meta(method);
}

GraphStatus PyModule::graph_status(std::string_view method) {
  std::shared_lock lock(mu_);
  return open_module().graph_status(method);
}

LoadStats PyModule::load_stats() {
  std::shared_lock lock(mu_);
  return open_module().load_stats();
}

LoadTimings PyModule::load_timings() {
  std::shared_lock lock(mu_);
  return open_module().load_timings();
}

TuningOptions PyModule::tuning() {
  std::shared_lock lock(mu_);
  return open_module().tuning();
}

std::size_t PyModule::state_bytes() {
  std::shared_lock lock(mu_);
  return open_module().state_bytes();
}

void PyModule::reset_state() {
  nb::gil_scoped_release release;
  std::shared_lock lock(mu_);
  open_module().reset_state();
}

PyModule::Prepared PyModule::prepare(std::string_view method, PyObject* const* inputs, std::size_t n,
                                     const CallArgs& args, nb::handle out) {
  Prepared p;
  p.ctx.device = device_;
  p.ctx.method = method;
  set_caller_stream(args.stream, p.ctx);
  p.inputs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) p.inputs.push_back(read_tensor(nb::handle(inputs[i]), p.ctx, "input", i, false));
  if (!out.is_none()) {
    p.has_out = true;
    if (PyList_Check(out.ptr()) || PyTuple_Check(out.ptr())) {
      std::size_t i = 0;
      for (nb::handle o : out) p.bound.push_back(read_tensor(o, p.ctx, "output", i++, true));
    } else {
      p.bound.push_back(read_tensor(out, p.ctx, "output", 0, true));  // one tensor for a one-output method
    }
  }
  p.ro.outputs = output_location(args.outputs, output_type_);
  p.ro.use_graph = graph_use(args.use_graph);
  if (device_.is_cuda() && p.ctx.stream_from != CallContext::StreamFrom::kNone) p.ro.stream = sdk_stream(p.ctx.stream);
  return p;
}

nb::object PyModule::execute(std::string_view method, PyObject* const* inputs, std::size_t n, const CallArgs& args,
                             nb::handle out) {
  Prepared p = prepare(method, inputs, n, args, out);
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release release;
    std::shared_lock lock(mu_);
    Module& m = open_module();
    p.ro.session = session_of(args);
    if (p.has_out) {
      m.execute_into(method, p.inputs, p.bound, p.ro);
    } else {
      outputs = m.execute(method, p.inputs, p.ro);
    }
    if (p.ctx.stream_from == CallContext::StreamFrom::kDlpack) wait_legacy_stream();
  }
  if (p.has_out) return nb::borrow(out);
  nb::list result;
  for (const Tensor& t : outputs) result.append(wrap_tensor(t, output_type_));
  return std::move(result);
}

std::vector<double> PyModule::bench(std::string_view method, nb::handle inputs, const CallArgs& args, nb::handle out,
                                    std::size_t runs, std::size_t warmup) {
  nb::tuple items = nb::tuple(inputs);
  const std::size_t n = items.size();
  Prepared p = prepare(method, n ? &PyTuple_GET_ITEM(items.ptr(), 0) : nullptr, n, args, out);
  std::vector<double> ns;
  ns.reserve(runs);
  nb::gil_scoped_release release;
  std::shared_lock lock(mu_);
  Module& m = open_module();
  p.ro.session = session_of(args);
  const bool cuda = device_.is_cuda() && p.ro.stream != nullptr;
  std::vector<Tensor> outputs;
  for (std::size_t i = 0; i < warmup + runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (p.has_out) {
      m.execute_into(method, p.inputs, p.bound, p.ro);
    } else {
      outputs = m.execute(method, p.inputs, p.ro);  // the previous outputs are released here, as in Python
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (cuda) {
      const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(p.ro.stream));
      if (err != cudaSuccess) throw Error(ErrorCode::kCuda, std::string("cudaStreamSynchronize failed: ") + cudaGetErrorName(err));
    }
    if (i >= warmup) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return ns;
}

PySession* PyModule::create_session(nb::handle self) {
  nb::object owner = nb::borrow(self);
  PySession* created = nullptr;
  {
    nb::gil_scoped_release release;
    std::unique_lock lock(mu_);
    Session s = open_module().create_session();
    created = new PySession(std::move(owner), *this, std::move(s));
    sessions_.push_back(created);
  }
  return created;
}

PySession::PySession(nb::object&& module_object, PyModule& module, Session session)
    : module_object_(std::move(module_object)), module_(&module), session_(std::make_unique<Session>(std::move(session))) {}

PySession::~PySession() { close(); }

void PySession::close() {
  nb::gil_scoped_release release;
  std::unique_lock lock(module_->mu_);
  session_.reset();
  auto& list = module_->sessions_;
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (*it == this) {
      list.erase(it);
      break;
    }
  }
}

bool PySession::closed() {
  std::shared_lock lock(module_->mu_);
  return session_ == nullptr;
}

Session& PySession::open_session() {
  if (!session_) throw Error(ErrorCode::kInvalidArgument, "the Session is closed");
  return *session_;
}

void PySession::reset() {
  nb::gil_scoped_release release;
  std::shared_lock lock(module_->mu_);
  open_session().reset(nullptr);
}

std::size_t PySession::state_bytes() {
  std::shared_lock lock(module_->mu_);
  return open_session().state_bytes();
}

}  // namespace aoti_cuda::python
