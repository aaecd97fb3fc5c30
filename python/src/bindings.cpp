// aoti_cuda._ext: the nanobind module behind the `aoti_cuda` package.
// python/aoti_cuda/_ext.pyi documents every name defined here.
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <type_traits>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/log.hpp"
#include "aoti_cuda/memory.hpp"
#include "aoti_cuda/version.hpp"
#include "convert.hpp"
#include "py_module.hpp"
#include "torch_api.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace aoti_cuda::python {
namespace {

nb::object& error_class() {
  static nb::object* cls = new nb::object();  // leaked: must outlive nothing but the interpreter
  return *cls;
}

void raise_error(const Error& e) {
  nb::object& cls = error_class();
  if (!cls.is_valid()) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return;
  }
  PyObject* inst = PyObject_CallFunction(cls.ptr(), "is", static_cast<int>(e.code()), e.what());
  if (inst == nullptr) return;  // the constructor's own error stands
  PyErr_SetObject(cls.ptr(), inst);
  Py_DECREF(inst);
}

std::vector<std::string> str_list(nb::handle h, const char* what) {
  std::vector<std::string> out;
  if (h.is_none()) return out;
  std::string one;
  if (nb::try_cast(h, one)) return {one};  // a single name
  if (!nb::hasattr(h, "__iter__")) throw Error(ErrorCode::kInvalidArgument, std::string(what) + " must be a str or a sequence of str");
  for (nb::handle item : h) {
    std::string s;
    if (!nb::try_cast(item, s)) throw Error(ErrorCode::kInvalidArgument, std::string(what) + " must hold only str");
    out.push_back(std::move(s));
  }
  return out;
}

Device parse_device(nb::handle h) {
  if (h.is_none()) return Device::cuda(0);
  int index = 0;
  if (!PyBool_Check(h.ptr()) && nb::try_cast(h, index)) {
    if (index < 0) throw Error(ErrorCode::kInvalidArgument, "device index must be >= 0, got " + std::to_string(index));
    return Device::cuda(index);
  }
  const std::string s = nb::str(h).c_str();  // "cpu", "cuda", "cuda:1"; torch.device prints the same way
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos && s.size() < 12) {
    return Device::cuda(std::stoi(s.substr(5)));
  }
  throw Error(ErrorCode::kInvalidArgument, "device must be 'cpu', 'cuda', 'cuda:N', an int or a torch.device, got '" + s + "'");
}

template <typename T>
T tuning_value(nb::handle v, const std::string& key, const char* kind) {
  T out{};
  if (PyBool_Check(v.ptr()) != std::is_same_v<T, bool> || !nb::try_cast(v, out)) {
    throw Error(ErrorCode::kInvalidArgument, "tuning['" + key + "'] must be " + kind + ", got " +
                                                 std::string(nb::repr(v).c_str()));
  }
  return out;
}

// The LoadOptions::tuning fields by name (module.hpp, TuningOptions); a value
// out of range is reported by the load itself, naming the field.
TuningOptions parse_tuning(nb::handle h) {
  TuningOptions t;
  if (h.is_none()) return t;
  if (!PyDict_Check(h.ptr())) throw Error(ErrorCode::kInvalidArgument, "tuning must be a dict or None");
  for (auto [k, v] : nb::borrow<nb::dict>(h)) {
    std::string key;
    if (!nb::try_cast(k, key)) throw Error(ErrorCode::kInvalidArgument, "tuning keys must be str");
    if (v.is_none()) continue;  // unset: the environment, else the default
    if (key == "upload_threads") t.upload_threads = tuning_value<int>(v, key, "an int");
    else if (key == "page_lock_weights") t.page_lock_weights = tuning_value<bool>(v, key, "a bool");
    else if (key == "block_cache_mib") t.block_cache_mib = tuning_value<std::size_t>(v, key, "an int >= 0");
    else if (key == "small_copy_kernels") t.small_copy_kernels = tuning_value<bool>(v, key, "a bool");
    else if (key == "gemv_max_rows") t.gemv_max_rows = tuning_value<int>(v, key, "an int");
    else if (key == "int4_dequant_min_m") t.int4_dequant_min_m = tuning_value<int64_t>(v, key, "an int");
    else if (key == "cublas_workspace_mib") t.cublas_workspace_mib = tuning_value<std::size_t>(v, key, "an int >= 0");
    else if (key == "dependent_launch") t.dependent_launch = tuning_value<bool>(v, key, "a bool");
    else if (key == "attention_cluster") t.attention_cluster = tuning_value<int>(v, key, "-1 (auto), 0, 8 or 16");
    else if (key == "staging") {
      const std::string name = tuning_value<std::string>(v, key, "'huge', 'wc' or 'hostalloc'");
      for (StagingMemory m : {StagingMemory::kHugePages, StagingMemory::kWriteCombined, StagingMemory::kHostAlloc}) {
        if (name == to_string(m)) t.staging = m;
      }
      if (!t.staging) throw Error(ErrorCode::kInvalidArgument, "tuning['staging'] must be 'huge', 'wc' or 'hostalloc', got '" + name + "'");
    } else {
      throw Error(ErrorCode::kInvalidArgument, "unknown tuning key '" + key + "' (known: upload_threads, staging, "
                  "page_lock_weights, block_cache_mib, small_copy_kernels, gemv_max_rows, int4_dequant_min_m, cublas_workspace_mib, dependent_launch, attention_cluster)");
    }
  }
  return t;
}

nb::dict tuning_dict(const TuningOptions& t) {
  nb::dict d;
  if (t.upload_threads) d["upload_threads"] = *t.upload_threads;
  if (t.staging) d["staging"] = to_string(*t.staging);
  if (t.page_lock_weights) d["page_lock_weights"] = *t.page_lock_weights;
  if (t.block_cache_mib) d["block_cache_mib"] = *t.block_cache_mib;
  if (t.small_copy_kernels) d["small_copy_kernels"] = *t.small_copy_kernels;
  if (t.gemv_max_rows) d["gemv_max_rows"] = *t.gemv_max_rows;
  if (t.int4_dequant_min_m) d["int4_dequant_min_m"] = *t.int4_dequant_min_m;
  if (t.cublas_workspace_mib) d["cublas_workspace_mib"] = *t.cublas_workspace_mib;
  if (t.dependent_launch) d["dependent_launch"] = *t.dependent_launch;
  if (t.attention_cluster) d["attention_cluster"] = *t.attention_cluster;
  return d;
}

LoadOptions load_options(nb::handle data_files, nb::handle device, std::size_t num_models, nb::handle methods,
                         nb::handle cuda_graphs, std::size_t max_graphs, nb::handle share_state, bool dedup,
                         nb::handle sha256, nb::handle tuning) {
  LoadOptions o;
  o.tuning = parse_tuning(tuning);
  o.data_files = str_list(data_files, "data_files");
  o.device = parse_device(device);
  o.num_models = num_models;
  o.methods = str_list(methods, "methods");
  if (PyBool_Check(cuda_graphs.ptr())) o.cuda_graphs = cuda_graphs.ptr() == Py_True;
  else o.cuda_graph_methods = str_list(cuda_graphs, "cuda_graphs");
  o.max_graphs_per_method = max_graphs;
  std::string share;
  if (share_state.ptr() == Py_True || (nb::try_cast(share_state, share) && share == "all")) {
    o.share_state = StateSharing::all();
  } else if (!share_state.is_none() && share_state.ptr() != Py_False) {
    o.share_state.fqns = str_list(share_state, "share_state");
  }
  o.deduplicate_constants = dedup;
  o.allowed_so_sha256 = str_list(sha256, "allowed_so_sha256");
  return o;
}

PySession* session_arg(nb::handle h) {
  if (h.is_none()) return nullptr;
  PySession* s = nullptr;
  if (!nb::try_cast(h, s) || s == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "session must be an aoti_cuda.Session or None, got " +
                                                 std::string(nb::type_name(h.type()).c_str()));
  }
  return s;
}

CallArgs call_args(nb::handle session, nb::handle stream, nb::handle outputs, nb::handle use_graph) {
  CallArgs a;
  a.session = session_arg(session);
  a.stream = stream;
  a.outputs = outputs;
  a.use_graph = use_graph;
  return a;
}

nb::object run(PyModule& m, std::string_view method, const nb::args& inputs, nb::handle session, nb::handle stream,
               nb::handle outputs, nb::handle use_graph, nb::handle out) {
  const std::size_t n = inputs.size();
  PyObject* const* items = n ? &PyTuple_GET_ITEM(inputs.ptr(), 0) : nullptr;
  return m.execute(method, items, n, call_args(session, stream, outputs, use_graph), out);
}

template <typename T>
std::string field(const char* name, const T& v) {
  return std::string(name) + "=" + nb::repr(nb::cast(v)).c_str();
}

void bind_structs(nb::module_& m) {
  nb::class_<LoadProgress>(m, "LoadProgress")
      .def_ro("phase", &LoadProgress::phase)
      .def_ro("method", &LoadProgress::method)
      .def_ro("done", &LoadProgress::done)
      .def_ro("total", &LoadProgress::total)
      .def("__repr__", [](const LoadProgress& p) {
        return "LoadProgress(" + field("phase", p.phase) + ", " + field("method", p.method) + ", " + field("done", p.done) +
               ", " + field("total", p.total) + ")";
      });
  nb::class_<TensorSpec>(m, "TensorSpec")
      .def_prop_ro("dtype", [](const TensorSpec& t) { return std::string(dtype_name(t.dtype)); })
      .def_prop_ro("shape", [](const TensorSpec& t) { return nb::tuple(nb::cast(t.sizes)); })
      .def_ro("dynamic", &TensorSpec::dynamic)
      .def_ro("dim_order", &TensorSpec::dim_order)
      .def("__repr__", [](const TensorSpec& t) {
        return "TensorSpec(dtype='" + std::string(dtype_name(t.dtype)) + "', " +
               field("shape", nb::tuple(nb::cast(t.sizes))) + ", " + field("dynamic", t.dynamic) + ")";
      });
  nb::class_<DynamicDim>(m, "DynamicDim")
      .def_ro("dim", &DynamicDim::dim)
      .def_ro("max", &DynamicDim::max)
      .def("__repr__", [](const DynamicDim& d) { return "DynamicDim(" + field("dim", d.dim) + ", " + field("max", d.max) + ")"; });
  nb::class_<MethodMeta>(m, "MethodMeta")
      .def_ro("name", &MethodMeta::name)
      .def_ro("inputs", &MethodMeta::inputs)
      .def_ro("outputs", &MethodMeta::outputs)
      .def_ro("num_delegates", &MethodMeta::num_delegates)
      .def_ro("input_names", &MethodMeta::input_names)
      .def_ro("output_names", &MethodMeta::output_names)
      .def_ro("dynamic_dims", &MethodMeta::dynamic_dims)
      .def("__repr__", [](const MethodMeta& mm) {
        return "MethodMeta(" + field("name", mm.name) + ", " + field("inputs", mm.inputs) + ", " +
               field("outputs", mm.outputs) + ")";
      });
  nb::class_<GraphStatus>(m, "GraphStatus")
      .def_ro("requested", &GraphStatus::requested)
      .def_ro("available", &GraphStatus::available)
      .def_ro("reason", &GraphStatus::reason)
      .def_ro("graphs", &GraphStatus::graphs)
      .def_ro("captures", &GraphStatus::captures)
      .def_ro("replays", &GraphStatus::replays)
      .def_ro("evictions", &GraphStatus::evictions)
      .def("__repr__", [](const GraphStatus& g) {
        return "GraphStatus(" + field("requested", g.requested) + ", " + field("available", g.available) + ", " +
               field("reason", g.reason) + ", " + field("graphs", g.graphs) + ", " + field("captures", g.captures) +
               ", " + field("replays", g.replays) + ", " + field("evictions", g.evictions) + ")";
      });
}

void bind_stats(nb::module_& m) {
  nb::class_<LibraryHooks>(m, "LibraryHooks")
      .def_ro("library", &LibraryHooks::library)
      .def_ro("hooked", &LibraryHooks::hooked)
      .def_ro("warnings", &LibraryHooks::warnings);
  nb::class_<LoadStats>(m, "LoadStats")
      .def_ro("weight_bytes", &LoadStats::weight_bytes)
      .def_ro("deduplicated_bytes", &LoadStats::deduplicated_bytes)
      .def_ro("deduplicated_constants", &LoadStats::deduplicated_constants)
      .def_ro("shared_state_constants", &LoadStats::shared_state_constants)
      .def_ro("read_only_constants", &LoadStats::read_only_constants)
      .def_ro("upload_ms", &LoadStats::upload_ms)
      .def_ro("upload_gb_per_s", &LoadStats::upload_gb_per_s)
      .def_ro("page_locked_bytes", &LoadStats::page_locked_bytes)
      .def_ro("staged_bytes", &LoadStats::staged_bytes)
      .def_ro("upload_note", &LoadStats::upload_note)
      .def_ro("compare_ms", &LoadStats::compare_ms)
      .def_ro("libraries", &LoadStats::libraries);
  nb::class_<LoadTimings>(m, "LoadTimings")
      .def_ro("parse_ms", &LoadTimings::parse_ms)
      .def_ro("device_init_ms", &LoadTimings::device_init_ms)
      .def_ro("library_ms", &LoadTimings::library_ms)
      .def_ro("container_ms", &LoadTimings::container_ms)
      .def_ro("weights_ms", &LoadTimings::weights_ms)
      .def_ro("total_ms", &LoadTimings::total_ms);
  nb::class_<MemoryStats>(m, "MemoryStats")
      .def_ro("bytes_in_use", &MemoryStats::bytes_in_use)
      .def_ro("peak_bytes_in_use", &MemoryStats::peak_bytes_in_use)
      .def_ro("live_allocations", &MemoryStats::live_allocations)
      .def_ro("total_allocations", &MemoryStats::total_allocations)
      .def_ro("pool_reserved_bytes", &MemoryStats::pool_reserved_bytes)
      .def_ro("cached_bytes", &MemoryStats::cached_bytes)
      .def_ro("cache_hits", &MemoryStats::cache_hits);
}

void bind_module(nb::module_& m) {
  nb::class_<PyModule>(m, "Module")
      .def(
          "__init__",
          [](PyModule* self, nb::handle path, nb::handle data_files, nb::handle device, std::size_t num_models,
             nb::handle methods, nb::handle cuda_graphs, std::size_t max_graphs, nb::handle share_state, bool dedup,
             nb::handle sha256, nb::handle tuning, nb::object on_progress, std::string_view output_type) {
            std::string p;
            if (!nb::try_cast(nb::module_::import_("os").attr("fspath")(path), p)) {
              throw Error(ErrorCode::kInvalidArgument, "path must be a str or an os.PathLike of str");
            }
            LoadOptions o = load_options(data_files, device, num_models, methods, cuda_graphs, max_graphs, share_state, dedup,
                                         sha256, tuning);
            new (self) PyModule(p, std::move(o), std::move(on_progress), parse_output_type(output_type));
          },
          "path"_a, nb::kw_only(), "data_files"_a = nb::none(), "device"_a = nb::none(), "num_models"_a = 1,
          "methods"_a = nb::none(), "cuda_graphs"_a = false, "max_graphs_per_method"_a = 4, "share_state"_a = nb::none(),
          "deduplicate_constants"_a = true, "allowed_so_sha256"_a = nb::none(), "tuning"_a = nb::none(), "on_progress"_a = nb::none(),
          "output_type"_a = "auto")
      .def(
          "forward",
          [](PyModule& self, const nb::args& inputs, nb::handle session, nb::handle stream, nb::handle outputs,
             nb::handle use_graph, nb::handle out) {
            return run(self, "forward", inputs, session, stream, outputs, use_graph, out);
          },
          "inputs"_a, "session"_a = nb::none(), "stream"_a = nb::none(), "outputs"_a = nb::none(),
          "use_graph"_a = nb::none(), "out"_a = nb::none())
      .def("execute", &run, "method"_a, "inputs"_a, "session"_a = nb::none(), "stream"_a = nb::none(),
           "outputs"_a = nb::none(), "use_graph"_a = nb::none(), "out"_a = nb::none())
      .def(
          "execute_into",
          [](PyModule& self, std::string_view method, nb::sequence inputs, nb::handle outputs, nb::handle session,
             nb::handle stream, nb::handle use_graph) {
            nb::tuple items = nb::tuple(inputs);
            const std::size_t n = items.size();
            (void)self.execute(method, n ? &PyTuple_GET_ITEM(items.ptr(), 0) : nullptr, n,
                               call_args(session, stream, nb::none(), use_graph), outputs);
          },
          "method"_a, "inputs"_a, "outputs"_a, nb::kw_only(), "session"_a = nb::none(), "stream"_a = nb::none(),
          "use_graph"_a = nb::none())
      .def("method_names", &PyModule::method_names)
      .def_prop_ro("default_method", &PyModule::default_method)
      .def("method_meta", &PyModule::method_meta, "method"_a)
      .def("graph_status", &PyModule::graph_status, "method"_a)
      .def("load_stats", &PyModule::load_stats)
      .def("load_timings", &PyModule::load_timings)
      .def("tuning", [](PyModule& self) { return tuning_dict(self.tuning()); })
      .def_prop_ro("state_bytes", &PyModule::state_bytes)
      .def("reset_state", &PyModule::reset_state)
      .def("create_session", [](nb::handle self) { return nb::cast<PyModule&>(self).create_session(self); },
           nb::rv_policy::take_ownership)
      .def_prop_ro("device", &PyModule::device)
      .def_prop_ro("output_type", [](PyModule& self) { return std::string(output_type_name(self.output_type())); })
      .def_prop_ro("closed", &PyModule::closed)
      .def("close", &PyModule::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyModule& self, nb::args) { self.close(); })
      .def(
          "_bench",
          [](PyModule& self, std::string_view method, nb::sequence inputs, std::size_t runs, std::size_t warmup,
             nb::handle out, nb::handle session, nb::handle stream, nb::handle use_graph) {
            return self.bench(method, inputs, call_args(session, stream, nb::none(), use_graph), out, runs, warmup);
          },
          "method"_a, "inputs"_a, "runs"_a, "warmup"_a = 10, "out"_a = nb::none(), "session"_a = nb::none(),
          "stream"_a = nb::none(), "use_graph"_a = nb::none());

  nb::class_<PySession>(m, "Session")
      .def("reset", &PySession::reset)
      .def_prop_ro("state_bytes", &PySession::state_bytes)
      .def_prop_ro("closed", &PySession::closed)
      .def("close", &PySession::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PySession& self, nb::args) { self.close(); });
}

void bind_functions(nb::module_& m) {
  m.def("_set_error_class", [](nb::object cls) { error_class() = std::move(cls); });
  // How torch tensors cross: "exchange" (DLPack's C exchange table), "python"
  // (torch's Python DLPack entry points) or "" (torch not imported yet).
  m.def("_torch_route", []() -> std::string {
    TorchApi& api = TorchApi::get();
    if (!api.available()) return "";
    return api.exchange() != nullptr ? "exchange" : "python";
  });
  m.def("version", [] { return std::string(aoti_cuda::version()); });
  m.def("device_count", [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return count;
  });
  m.def("gpu_unavailable_reason", []() -> std::string {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    }
    return count == 0 ? "no CUDA device" : "";
  });
  m.def("device_memory_stats", &device_memory_stats, "device"_a = 0);
  m.def("trim_device_memory", [](int device, std::size_t keep) {
    nb::gil_scoped_release release;
    trim_device_memory(device, keep);
  }, "device"_a = 0, "keep_bytes"_a = 0);
  m.def("set_log_level", [](std::string_view level) {
    if (level == "debug") set_log_level(LogLevel::kDebug);
    else if (level == "info") set_log_level(LogLevel::kInfo);
    else if (level == "warning") set_log_level(LogLevel::kWarning);
    else if (level == "error") set_log_level(LogLevel::kError);
    else throw Error(ErrorCode::kInvalidArgument, "log level must be 'debug', 'info', 'warning' or 'error', got '" + std::string(level) + "'");
  }, "level"_a);
}

}  // namespace
}  // namespace aoti_cuda::python

NB_MODULE(_ext, m) {
  using namespace aoti_cuda::python;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const aoti_cuda::Error& e) {
      raise_error(e);
    }
  });
  bind_structs(m);
  bind_stats(m);
  bind_module(m);
  bind_functions(m);
}
