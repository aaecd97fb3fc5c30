// aoti_cuda — Module: load an ExecuTorch CUDA program and run its methods.
//
//   aoti_cuda::Module m("model.pte");          // finds aoti_cuda_blob.ptd beside it
//   std::vector<aoti_cuda::Tensor> out = m.forward({x});
//
// Loading parses and validates the program (see program.hpp), loads each
// method's AOTInductor library from memory, creates its container on the
// chosen device and installs the weights. A Module owns all of that and
// releases it on destruction (containers deleted, libraries unloaded).
//
// Thread-safety: execute()/forward() may be called concurrently from several
// threads; up to LoadOptions::num_models calls of one method run at the same
// time, further calls wait. State kept inside a delegate (e.g. a KV cache) is
// shared by all calls of that method. Loading and destruction are not
// concurrent with anything else on the same Module.
//
// Loading from memory: each embedded .so is written to an anonymous memfd (an
// unlinked temporary file in $TMPDIR or /tmp where memfd is unavailable) and
// dlopen'ed from there; no file name is derived from the program. Before that
// the bytes are checked (x86-64/aarch64 shared object, every aoti_torch_* /
// cuda* import resolvable — all missing names are listed — and the optional
// SHA-256 pin). Diagnostic switches (environment): AOTI_CUDA_DISABLE_MEMFD=1
// forces the temporary-file path; AOTI_CUDA_KEEP_UNIQUE_SYMBOLS=1 loads the
// bytes unmodified (by default STB_GNU_UNIQUE bindings are made global so that
// glibc can unload the library again); AOTI_CUDA_NO_MODULE_TRACKING=1 leaves
// the CUDA modules a model loads to the driver (by default they are unloaded
// with the Module).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/error.hpp"
#include "aoti_cuda/export.h"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda {

/// Progress of a load, reported to LoadOptions::on_progress.
struct LoadProgress {
  std::string phase;   ///< "parse", "library", "container", "weights"
  std::string method;  ///< method being loaded ("" for parse)
  std::size_t done = 0;
  std::size_t total = 0;
};

struct LoadOptions {
  /// Explicit .ptd files; empty = "aoti_cuda_blob.ptd" beside the .pte.
  std::vector<std::string> data_files;
  /// Device the containers run on. Device::cpu() is for CPU-only model
  /// libraries (used by tests); CudaBackend programs need a CUDA device.
  Device device = Device::cuda(0);
  /// Model instances per container: how many calls of one method may run concurrently.
  std::size_t num_models = 1;
  /// Only load these methods (empty = all runnable methods).
  std::vector<std::string> methods;
  /// Optional trust pin: when non-empty, every embedded .so must have one of
  /// these SHA-256 digests (lowercase hex) or loading fails before dlopen.
  std::vector<std::string> allowed_so_sha256;
  /// Bind constants that several methods' libraries hold under the same
  /// original name (parameters, and buffers such as a KV cache) to a single
  /// copy, with equal dtype, shape and strides required. State one method
  /// writes is then what the others read, as in the eager PyTorch module
  /// (ExecuTorch gives each method a private copy). Each library still keeps
  /// the memory of its own unused copy. False: every method keeps its own.
  bool share_constants_across_methods = true;
  /// Called after each load phase (may be empty).
  std::function<void(const LoadProgress&)> on_progress;
};

/// Where outputs are returned.
enum class OutputLocation {
  kSameAsInputs,  ///< device outputs if the first tensor input is on the device, else host
  kHost,          ///< host memory (copied after the run; the call waits for it)
  kDevice,        ///< device memory (zero-copy; ready in the order of RunOptions::stream)
};

struct RunOptions {
  /// cudaStream_t to run on. nullptr: the Module's own stream, and the call
  /// waits for completion before returning. With a caller stream, device
  /// outputs are ready in that stream's order and the call does not wait.
  void* stream = nullptr;
  OutputLocation outputs = OutputLocation::kSameAsInputs;
};

/// Public description of a method's signature.
struct MethodMeta {
  std::string name;
  std::vector<TensorSpec> inputs;   ///< `dynamic` marks tensors whose sizes are upper bounds
  std::vector<TensorSpec> outputs;
  std::size_t num_delegates = 0;
};

/// Wall-clock time spent in each phase of the load, in milliseconds.
struct LoadTimings {
  double parse_ms = 0;
  double device_init_ms = 0;  ///< creating the device's CUDA context (first load in a process only)
  double library_ms = 0;    ///< ELF checks + memfd + dlopen + dlsym, all methods
  double container_ms = 0;  ///< AOTInductorModelContainerCreateWithDevice
  double weights_ms = 0;    ///< AOTInductorModelUpdateConstantsFromBlob
  double total_ms = 0;
};

class AOTI_CUDA_API Module {
 public:
  explicit Module(const std::string& pte_path, const LoadOptions& options = {});
  /// Loads an already-opened Program (e.g. Program::from_memory). The Module
  /// keeps the Program alive.
  explicit Module(Program program, const LoadOptions& options = {});

  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  ~Module();

  std::vector<std::string> method_names() const;
  /// Throws Error(kNotFound) listing the valid names.
  MethodMeta method_meta(std::string_view method) const;

  /// Runs `method`. Inputs may be host or device tensors (in any mix); they
  /// are checked against the method's dtypes, ranks and static sizes (a
  /// dynamic dimension may be anything up to its bound). Host inputs are
  /// copied to the device; device inputs on the Module's device are passed
  /// in place (borrowed: keep them alive and unmodified until the outputs
  /// are ready), so an output the model returns unchanged may share memory
  /// with such an input. Errors: kNotFound (unknown method, listing the
  /// loaded ones), kInvalidArgument (naming the input, expected vs got),
  /// kModel (the model's Run failed, with the shim's last message).
  std::vector<Tensor> execute(std::string_view method, const std::vector<Tensor>& inputs,
                              const RunOptions& options = {});
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs, const RunOptions& options = {}) {
    return execute("forward", inputs, options);
  }

  const Program& program() const;
  LoadTimings load_timings() const;
  /// Constants bound to another method's copy at load
  /// (LoadOptions::share_constants_across_methods).
  std::size_t shared_constants() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoti_cuda
