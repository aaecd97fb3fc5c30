// aoti_cuda — Module: load an ExecuTorch CUDA program and run its methods.
//
//   aoti_cuda::Module m("model.pte");          // finds aoti_cuda_blob.ptd beside it
//   std::vector<aoti_cuda::Tensor> out = m.forward({x});
//
// Loading parses and validates the program (see program.hpp), loads each
// delegate's AOTInductor library from memory, creates its container on the
// chosen device and installs the weights. A Module owns all of that and
// releases it on destruction (containers deleted, the kernel images they
// loaded unloaded, libraries dlclose'd). A constructor either returns a
// fully loaded Module or throws and leaves nothing behind.
//
// Thread-safety: execute()/forward() and the const accessors may be called
// concurrently from several threads; up to LoadOptions::num_models calls of
// one method run at the same time, further calls wait. State kept inside a
// delegate (e.g. a KV cache) is shared by all calls of that method. Moving,
// assigning and destroying a Module must not overlap any other use of it.
//
// Loading from memory: each embedded .so is written to an anonymous memfd (or,
// where memfd/procfs is unavailable, to a temporary file in $TMPDIR or /tmp
// that is deleted right after dlopen) and dlopen'ed from there; no file name is
// derived from the program. Before that the bytes are checked: a 64-bit shared
// object for this machine's architecture, the optional SHA-256 pin, and every
// aoti_torch_* / aoti_cuda_* / cuda* import resolvable (all missing names are
// listed). Diagnostic switches (environment; any value but "" or "0" turns
// them on): AOTI_CUDA_DISABLE_MEMFD forces the temporary-file path;
// AOTI_CUDA_KEEP_UNIQUE_SYMBOLS loads the bytes unmodified (by default
// STB_GNU_UNIQUE bindings are made global so that glibc can unload the
// library again); AOTI_CUDA_NO_MODULE_TRACKING leaves the CUDA modules a model
// loads to the driver (by default they are unloaded with the Module);
// AOTI_CUDA_DLOPEN_LAZY dlopens with RTLD_LAZY instead of RTLD_NOW (for
// load-time measurements); AOTI_CUDA_KEEP_EH_POOL skips freeing, at unload,
// the exception-handling emergency pool (~73 KB) that a library linking
// libstdc++ statically allocates at load (by default it is freed, so
// load/unload cycles do not grow host memory).
//
// Errors: every failure throws aoti_cuda::Error; the code of each case is
// listed at the function.
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
  std::size_t done = 0;   ///< delegates through this phase so far, this one included (1 for parse)
  std::size_t total = 0;  ///< delegates to load in all selected methods (1 for parse)
};

/// How a Module is loaded. Every field has a usable default.
struct LoadOptions {
  /// Explicit .ptd files; empty = "aoti_cuda_blob.ptd" beside the .pte when
  /// it exists. Ignored by Module(Program, ...) (the Program has its data).
  std::vector<std::string> data_files;
  /// Device the containers run on. Device::cpu() is for CPU-only model
  /// libraries (used by tests); CudaBackend programs need a CUDA device.
  Device device = Device::cuda(0);
  /// Model instances per container: how many calls of one method may run
  /// concurrently (each also gets its own stream and staging buffer). >= 1.
  std::size_t num_models = 1;
  /// Only load these methods (empty = every runnable method; the others are
  /// skipped). A listed method that is unknown (kNotFound) or not runnable
  /// (kUnsupported) fails the load.
  std::vector<std::string> methods;
  /// Optional trust pin: when non-empty, every embedded .so must have one of
  /// these SHA-256 digests (hex, compared case-insensitively; see
  /// sha256_hex()) or loading fails with kLoad before the library is dlopen'ed.
  std::vector<std::string> allowed_so_sha256;
  /// Bind constants that several methods' libraries hold under the same
  /// original name (parameters, and buffers such as a KV cache) to a single
  /// copy (equal dtype, shape and strides required; for a method whose
  /// constants are all held already, equal dtype and byte size). State one method
  /// writes is then what the others read, as in the eager PyTorch module
  /// (ExecuTorch gives each method a private copy).
  /// When every constant of a method is held by an earlier one, that method's
  /// weights are not uploaded at all (see Module::shared_weights_bytes());
  /// otherwise its library keeps the memory of its own unused copies.
  /// False: every method keeps its own.
  bool share_constants_across_methods = true;
  /// Called on the loading thread after each load phase (may be empty). An
  /// exception it throws aborts the load and propagates.
  std::function<void(const LoadProgress&)> on_progress;
};

/// Where outputs are returned.
enum class OutputLocation {
  kSameAsInputs,  ///< device outputs if the first input is a CUDA tensor, else host
  kHost,          ///< host memory (copied after the run; the call waits for it)
  kDevice,        ///< device memory (no copy when the model produced it there; ready in the order of RunOptions::stream)
};
// A Module loaded on Device::cpu() returns outputs where the model produced
// them, whatever OutputLocation says.

/// Options of one execute()/forward() call.
struct RunOptions {
  /// cudaStream_t to run on. nullptr: the Module's own stream (one per
  /// concurrent call), and the call waits for completion before returning.
  /// With a caller stream the call returns once the work is queued: device
  /// outputs are ready in that stream's order (host outputs are always
  /// complete on return). Device outputs allocated by the model are freed
  /// (cudaFreeAsync) on the stream they were made on, so keep a caller stream
  /// alive until those outputs are destroyed. Outputs of runs on the Module's
  /// own stream may outlive the Module.
  void* stream = nullptr;
  OutputLocation outputs = OutputLocation::kSameAsInputs;
};

/// Public description of a loaded method's signature.
struct MethodMeta {
  std::string name;
  std::vector<TensorSpec> inputs;   ///< in call order; `dynamic` marks tensors whose sizes are upper bounds
  std::vector<TensorSpec> outputs;  ///< in return order
  std::size_t num_delegates = 0;    ///< CudaBackend delegates (model libraries) the method runs
};

/// Wall-clock time spent in each phase of the load, in milliseconds, summed
/// over all delegates of all loaded methods.
struct LoadTimings {
  double parse_ms = 0;        ///< Program::open (0 for Module(Program, ...))
  double device_init_ms = 0;  ///< making the device's CUDA context current (costly only at the first load in a process)
  double library_ms = 0;      ///< ELF checks, optional SHA-256 pin, kernel scan, memfd + dlopen + dlsym
  double container_ms = 0;    ///< AOTInductorModelContainerCreateWithDevice
  double weights_ms = 0;      ///< AOTInductorModelUpdateConstantsFromBlob, plus binding constants shared across methods
  double total_ms = 0;        ///< the whole constructor, parse included
};

/// A loaded program, ready to run. Move-only; a moved-from Module throws
/// Error(kInvalidArgument) from every member function.
class AOTI_CUDA_API Module {
 public:
  /// Opens `pte_path` (Program::open with options.data_files) and loads it.
  /// Throws Error: everything Program::open throws (kInvalidProgram, kNotFound,
  /// kIo); kInvalidArgument for unusable options; kNotFound / kUnsupported for
  /// LoadOptions::methods (see there) or when no method can run; kNoDevice
  /// without a usable GPU (or when device.index is not on this machine);
  /// kUnsupported for a non-tensor method input or kernels this GPU cannot run;
  /// kLoad when a model library is refused or cannot be dlopen'ed;
  /// kInvalidProgram when a library disagrees with the program (argument
  /// count, weights size); kModel when a container entry point fails
  /// (kOutOfMemory when a shim allocation made it fail); kIo,
  /// kCuda, kOutOfMemory for the corresponding system failures.
  explicit Module(const std::string& pte_path, const LoadOptions& options = {});
  /// Loads an already-opened Program (e.g. Program::from_memory): the Module
  /// takes it over and keeps it (and the bytes it views) in use. Throws as
  /// above, minus the parsing errors.
  explicit Module(Program program, const LoadOptions& options = {});

  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  /// Deletes the containers and unloads the libraries. Waits for in-flight
  /// work on the Module's own streams; never throws.
  ~Module();

  /// Names of the loaded methods (program order, or the order of LoadOptions::methods).
  std::vector<std::string> method_names() const;
  /// Signature of a loaded method. Throws Error(kNotFound) listing the loaded
  /// names (and saying so when the program has the method but did not load it).
  MethodMeta method_meta(std::string_view method) const;

  /// Runs `method`. Inputs may be host or device tensors (in any mix); they
  /// are checked against the method's count, dtypes, ranks and static sizes
  /// (for a tensor marked dynamic, every dimension may be anything from 0 up
  /// to its bound). Host inputs are copied (through a pinned staging buffer)
  /// and may be reused as soon as the call returns. Device inputs on the
  /// Module's device whose strides match the layout the model was compiled
  /// for are passed in place (borrowed: keep them alive and unmodified until
  /// the outputs are ready), so an output the model returns unchanged may
  /// share memory with such an input; other device inputs are copied.
  /// Returns one owned Tensor per method output (see OutputLocation).
  /// Errors: kNotFound (unknown method, listing the loaded ones),
  /// kInvalidArgument (naming the input, expected vs got), kModel (the
  /// model's Run failed, with the shim's and the model's last message;
  /// kOutOfMemory instead when it failed because a shim allocation did),
  /// kCuda / kOutOfMemory / kNoDevice (a CUDA call failed).
  std::vector<Tensor> execute(std::string_view method, const std::vector<Tensor>& inputs,
                              const RunOptions& options = {});
  /// execute("forward", inputs, options).
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs, const RunOptions& options = {}) {
    return execute("forward", inputs, options);
  }

  /// The program the Module was loaded from (valid as long as the Module).
  const Program& program() const;
  /// How long loading took, by phase.
  LoadTimings load_timings() const;
  /// Constants bound to another method's copy at load
  /// (LoadOptions::share_constants_across_methods).
  std::size_t shared_constants() const;
  /// Bytes of weights blobs that were not uploaded to the device because every
  /// constant of their method was already held by an earlier method.
  std::size_t shared_weights_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoti_cuda
