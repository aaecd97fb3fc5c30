// The Python Module and Session: aoti_cuda::Module / Session behind a lock,
// so that close() and garbage collection can never pull them away from a
// call running on another thread with the GIL released.
//
// Locking: one std::shared_mutex per Module covers it and its Sessions. Calls
// hold it shared with the GIL released (and drop it before taking the GIL
// back); close() of the Module or of a Session takes it exclusively, also
// with the GIL released. So no thread ever waits for the lock while holding
// the GIL against a thread that needs the GIL to finish.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "convert.hpp"

namespace aoti_cuda::python {

namespace nb = nanobind;

class PySession;

/// Keyword arguments of one call.
struct CallArgs {
  PySession* session = nullptr;
  nb::handle stream;     ///< None, int or object with cuda_stream
  nb::handle outputs;    ///< None, "same", "host" or "device"
  nb::handle use_graph;  ///< None, True or False
};

class PyModule {
 public:
  /// Loads `path` with the GIL released; `on_progress` (None or a callable
  /// taking a LoadProgress) is called with the GIL held. An exception it
  /// raises aborts the load and is re-raised as it is.
  PyModule(const std::string& path, LoadOptions options, nb::object on_progress, OutputType output_type);
  ~PyModule();
  PyModule(const PyModule&) = delete;
  PyModule& operator=(const PyModule&) = delete;

  /// Closes every Session of this Module, then the Module (idempotent).
  void close();
  bool closed();
  std::string device() const { return device_.str(); }
  OutputType output_type() const { return output_type_; }

  std::vector<std::string> method_names();
  std::string default_method();
  MethodMeta method_meta(std::string_view method);
  GraphStatus graph_status(std::string_view method);
  LoadStats load_stats();
  LoadTimings load_timings();
  TuningOptions tuning();
  std::size_t state_bytes();
  void reset_state();

  /// Runs `method` on `n` inputs; returns a list of outputs, or, with `out`
  /// (a sequence of one writable tensor per output), writes them there and
  /// returns `out`.
  nb::object execute(std::string_view method, PyObject* const* inputs, std::size_t n, const CallArgs& args,
                     nb::handle out);

  /// A new Session; `self` is this Module's Python object (the Session keeps it alive).
  PySession* create_session(nb::handle self);

  /// Times `runs` calls of execute (or execute_into with `out`) in C++, after
  /// `warmup` untimed ones, with the inputs and options execute() would use;
  /// waits for the stream after each call, outside the timed part. Nanoseconds per call.
  std::vector<double> bench(std::string_view method, nb::handle inputs, const CallArgs& args, nb::handle out,
                            std::size_t runs, std::size_t warmup);

 private:
  friend class PySession;
  struct Prepared;
  Prepared prepare(std::string_view method, PyObject* const* inputs, std::size_t n, const CallArgs& args,
                   nb::handle out);
  Module& open_module();  // with mu_ held; throws when closed
  Session* session_of(const CallArgs& args);  // with mu_ held

  std::shared_mutex mu_;
  std::unique_ptr<Module> module_;
  std::vector<PySession*> sessions_;  // alive, not closed (under mu_)
  Device device_;
  OutputType output_type_;
};

class PySession {
 public:
  /// `module_object` is moved in (no reference count change: callable without the GIL).
  PySession(nb::object&& module_object, PyModule& module, Session session);
  ~PySession();
  PySession(const PySession&) = delete;
  PySession& operator=(const PySession&) = delete;

  void close();
  bool closed();
  void reset();
  std::size_t state_bytes();

 private:
  friend class PyModule;
  void close_locked() { session_.reset(); }  // with the Module's mu_ held exclusively
  Session& open_session();                   // with mu_ held; throws when closed

  nb::object module_object_;  // keeps the Module alive while the Session is
  PyModule* module_;
  std::unique_ptr<Session> session_;
};

}  // namespace aoti_cuda::python
