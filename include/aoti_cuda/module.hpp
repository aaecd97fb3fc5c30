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
// Thread-safety: execute()/forward(), create_session() and the const
// accessors may be called concurrently from several threads. Calls of methods
// without mutable state run concurrently, up to LoadOptions::num_models per
// method (further calls wait). Calls of methods WITH mutable state (buffers,
// e.g. a KV cache; whichever session they use) are serialized per Module: one
// is queued at a time, and its GPU work is ordered after the previous
// stateful call's, even on another stream. Moving, assigning and destroying a
// Module must not overlap any other use of it, and its Sessions must be
// destroyed first.
//
// Loading from memory: each embedded .so is written to an anonymous memfd (or,
// where memfd/procfs is unavailable, to a temporary file in $TMPDIR or /tmp
// that is deleted right after dlopen) and dlopen'ed from there; no file name is
// derived from the program. The copy runs on a short-lived helper thread of
// the constructor while the bytes are checked (the constructor joins it
// before it returns or throws); dlopen waits for both. The checks: a 64-bit shared
// object for this machine's architecture, the optional SHA-256 pin, and every
// aoti_torch_* / aoti_cuda_* / cuda* import resolvable (all missing names are
// listed). Diagnostic environment switches change some of this (the
// temporary-file path instead of memfd, the bytes loaded unmodified, lazy
// binding, kernel modules left to the driver, the exception-handling pool
// kept): docs/configuration.md lists them with every other variable.
//
// CUDA graphs (LoadOptions::cuda_graphs / cuda_graph_methods, RunOptions::use_graph):
// the first call of a method with a given set of input shapes runs normally
// (the model loads its kernels then; that cannot be captured). The next call
// with those shapes captures the method's whole plan on the call slot's
// stream into a CUDA graph and replays it; later calls with those shapes are
// one graph launch that also copies the inputs (host or device) into the
// graph's fixed input buffers and the results out of its fixed output
// buffers (into new tensors, or the caller's with execute_into); host data
// passes through pinned buffers the graph owns. State the model keeps in its constants (e.g. a
// KV cache written in place) stays at fixed addresses, so graphs remain
// correct across calls. Memory the model allocates during capture belongs to
// the graph until it is destroyed (LRU beyond max_graphs_per_method, or with
// the Module). When a method cannot be captured (CPU module, a host copy or
// synchronization inside the model, a capture error), graphs are switched off
// for it, calls take the plain path and graph_status() says why; a warning
// also goes to the SDK's log (log.hpp).
//
// Errors: every failure throws aoti_cuda::Error; the code of each case is
// listed at the function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/error.hpp"
#include "aoti_cuda/export.h"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda {

class Session;
namespace runtime {
class StateManager;
}

/// Progress of a load, reported to LoadOptions::on_progress.
struct LoadProgress {
  std::string phase;   ///< "parse", "library", "container", "weights"
  std::string method;  ///< method being loaded ("" for parse)
  std::size_t done = 0;   ///< delegates through this phase so far, this one included (1 for parse)
  std::size_t total = 0;  ///< delegates to load in all selected methods (1 for parse)
};

/// Which mutable state (module buffers) several methods share; see
/// LoadOptions::share_state. A buffer is named by its original FQN (e.g.
/// "layers.0.attn.k_cache"); the first loaded method holding it provides the
/// initial bytes, the others bind to that copy. Each shared buffer must have
/// the same dtype, byte size and layout in every method holding it.
struct StateSharing {
  /// Share every buffer that two or more methods hold under the same FQN
  /// (with equal dtype and size; buffers that differ are left private).
  bool all_buffers = false;
  /// Share these constants (any type, usually buffers) by FQN. Load fails
  /// with kNotFound naming an FQN no loaded method holds, and with
  /// kInvalidArgument naming one whose dtype, size or layout differ.
  std::vector<std::string> fqns;

  bool empty() const noexcept { return !all_buffers && fqns.empty(); }
  static StateSharing all() {
    StateSharing s;
    s.all_buffers = true;
    return s;
  }
};

/// What the pinned host memory that stages the weights upload is made of
/// (TuningOptions::staging). Page-locking is what a large upload waits for,
/// so the default is the cheapest kind that works.
enum class StagingMemory {
  kHugePages,      ///< anonymous memory on transparent huge pages, page-locked with cudaHostRegister
                   ///< (one pin per 2 MiB page); kWriteCombined where the registration is refused
  kWriteCombined,  ///< cudaHostAlloc(cudaHostAllocWriteCombined): the host only writes it, the GPU only reads it
  kHostAlloc,      ///< cudaHostAlloc with default flags
};

/// "huge", "wc", "hostalloc": the names AOTI_CUDA_STAGING and the CLI's --staging take.
AOTI_CUDA_API const char* to_string(StagingMemory memory) noexcept;

/// Performance settings of a Module (LoadOptions::tuning). None of them
/// changes results, only speed and memory use. Every field is optional: a
/// field left unset takes its environment variable when that is set (a
/// diagnostic override, named at each field; docs/configuration.md), else
/// the default named at the field. A field that is set wins over the
/// variable (a variable that is shadowed so is reported at kInfo in the log).
///
/// A load checks every field and every variable it reads: a field out of
/// range fails with Error(kInvalidArgument) naming the field and its value,
/// a malformed or out-of-range variable (e.g. AOTI_CUDA_UPLOAD_THREADS=12x)
/// with kInvalidArgument naming the variable and its value.
/// Module::tuning() says what a load used; resolve_tuning() says it without
/// loading.
struct TuningOptions {
  /// Threads that copy the weights to the device through pinned staging at
  /// load, 1..256. Default: one per core, at most 8. AOTI_CUDA_UPLOAD_THREADS.
  std::optional<int> upload_threads;
  /// What the pinned staging of the weights upload is made of. Default
  /// kHugePages. AOTI_CUDA_STAGING=huge|wc|hostalloc.
  std::optional<StagingMemory> staging;
  /// Page-lock the weights blob's file mapping in place (cudaHostRegister)
  /// and copy from it, instead of staging through pinned slots. Default
  /// false: registering a large file mapping can stall the driver for a long
  /// time. AOTI_CUDA_PAGE_LOCK_WEIGHTS=1|0 (also true/false, on/off, yes/no).
  std::optional<bool> page_lock_weights;
  /// MiB of device memory each call slot keeps between calls, for the blocks
  /// its model freed (the next call takes them back instead of allocating),
  /// 0..1048576; 0 turns the cache off. Default 1024. AOTI_CUDA_BLOCK_CACHE_MIB.
  std::optional<std::size_t> block_cache_mib;
  /// CUDA graph replays (LoadOptions::cuda_graphs): the input and output
  /// copies of at most 64 KiB are copy kernels (true) or memcpy nodes
  /// (false). Default true (faster on the H200). AOTI_CUDA_SMALL_COPY=kernel|dma.
  std::optional<bool> small_copy_kernels;
  /// Programs exported with cuBLAS GEMMs: a multiply with at most this many
  /// rows of activations runs on the SDK's few-row kernels instead of
  /// cuBLAS, 0..8; 0: never. Default 1 (an LLM's decode step; with more rows
  /// cuBLAS measured faster). AOTI_CUDA_GEMV_MAX_ROWS.
  std::optional<int> gemv_max_rows;
  /// int4 weight-only matmuls: from this many rows of activations (M) on,
  /// the weights are dequantized and multiplied by cuBLAS (when it can be
  /// opened) instead of the int4 kernels, 0..2147483647; 0: never. Default 65
  /// (a prompt's prefill). AOTI_CUDA_INT4_DEQUANT_M.
  std::optional<int64_t> int4_dequant_min_m;
  /// MiB of cuBLAS workspace per stream, 0..4096 (0: cuBLAS picks algorithms
  /// that need none). Default 32. AOTI_CUDA_CUBLAS_WORKSPACE_MIB.
  std::optional<std::size_t> cublas_workspace_mib;
  /// On sm_90 and newer, the SDK's decode kernels (few-row GEMV, int4
  /// weight streaming, fused linear, decode attention) launch with
  /// programmatic dependent launch: each one's launch and start overlap the
  /// end of the kernel before it, and the fused linear operator's first
  /// weight loads too when its weights are read-only constants
  /// (LoadStats::read_only_constants). Same results either way. Default
  /// true: with the weight loads overlapped, a whole LLM decode step ran
  /// about 10 % faster (docs/configuration.md has the figures, and the
  /// programs for which off may still be faster). Below sm_90 it does nothing.
  /// AOTI_CUDA_DEPENDENT_LAUNCH=1|0 (also true/false, on/off, yes/no).
  std::optional<bool> dependent_launch;
  /// The SDK's decode attention (a program exported with aoti_cuda's decode
  /// attention operator): 0 runs it as two kernels, the chunks' attention
  /// then their merge; 8 or 16 as one kernel, each query head's chunks split
  /// over a thread-block cluster of that many blocks and merged inside it.
  /// sm_90 and newer; 8 where a 16-block cluster does not fit, two kernels
  /// where neither does. Same results up to float32 rounding.
  /// kAttentionClusterAuto (-1, the default) picks per call from the cache
  /// length, which a CUDA graph fixes: clusters of 8 when the KV cache holds
  /// at most 512 positions (each block then reads at most one chunk of 64)
  /// and the clusters' blocks fit about 4 a multiprocessor, else two
  /// kernels. In a 1.1 B model with a 512-position cache, auto decoded 1-2 %
  /// faster than two kernels; with clusters forced, a 4,096-position cache
  /// was 4-16 % slower from position 1,024 on, where each block reads several
  /// chunks (docs/configuration.md).
  /// AOTI_CUDA_ATTENTION_CLUSTER=auto|0|8|16.
  std::optional<int> attention_cluster;
};

/// TuningOptions::attention_cluster: choose the decode attention's form
/// from each call's cache length (the default).
inline constexpr int kAttentionClusterAuto = -1;

/// `tuning` with every unset field filled as a load would fill it (the
/// environment variable, else the default), after the checks a load makes.
/// Throws Error(kInvalidArgument) naming an invalid field or variable.
AOTI_CUDA_API TuningOptions resolve_tuning(const TuningOptions& tuning);

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
  /// Merge read-only constants (parameters, tensor constants) of different
  /// methods whose bytes are identical: the later method uses the earlier
  /// copy, and a method whose every constant is such a duplicate never
  /// uploads its weights (LoadStats::deduplicated_bytes). Same results as
  /// false, less memory. A candidate must have the same original name (FQN),
  /// dtype and byte size, and its bytes in the weights blobs must compare
  /// equal; mutable buffers and constants of unknown type are never merged.
  bool deduplicate_constants = true;
  /// Mutable state (module buffers such as a KV cache) several methods
  /// should read and write as ONE copy, as in the eager PyTorch module (see
  /// StateSharing). Default: none; every method keeps its own state, as
  /// ExecuTorch does.
  StateSharing share_state;
  /// CUDA graphs for every loaded method (see "CUDA graphs" below). Off by default.
  bool cuda_graphs = false;
  /// CUDA graphs for these methods only (when cuda_graphs is false); a name
  /// that is not loaded fails the load with kInvalidArgument.
  std::vector<std::string> cuda_graph_methods;
  /// Graphs kept per method and concurrent call slot (one per set of input
  /// shapes; the least recently used one is destroyed beyond this). >= 1.
  std::size_t max_graphs_per_method = 4;
  /// Performance settings (upload threads, staging memory, caches, kernel
  /// dispatch thresholds); see TuningOptions. Unset: environment, else defaults.
  TuningOptions tuning;
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

/// Per-call override of LoadOptions::cuda_graphs.
enum class GraphUse {
  kAsLoaded,  ///< graphs when the method was loaded with them
  kOff,       ///< this call runs the plain path (graphs already captured stay)
  kOn,        ///< this call uses graphs even if the load did not ask for them
};

/// Time of one part of an execute() call (RunOptions::profile).
struct StepProfile {
  /// "stage inputs: delegate 0", "run: delegate 0", "outputs of delegate 0",
  /// "h2d copy", "d2h copy", "move", "collect outputs".
  std::string what;
  double host_ms = 0;  ///< wall time the calling thread spent in it
  /// Time between CUDA events recorded on the run stream before and after it
  /// (what the GPU spent on work queued there, including waits); -1 on a CPU
  /// Module.
  double gpu_ms = -1;
};

/// GPU time of one kernel in a call (RunOptions::profile_kernels), summed
/// over its launches.
struct KernelProfile {
  /// The kernel's name as the driver reports it (e.g. a Triton kernel
  /// "triton_tem_fused_mm_0"), or "aoti_cuda <op>" for the SDK's own kernels.
  std::string name;
  int launches = 0;
  double gpu_ms = 0;  ///< sum over the launches of the time between CUDA events around each
};

/// Per-call profile: the steps in execution order.
struct RunProfile {
  std::vector<StepProfile> steps;
  double host_ms = 0;  ///< the whole call, wall time
  double gpu_ms = -1;  ///< from the first step's start event to the last step's end event (-1 on CPU)
  /// With RunOptions::profile_kernels: every kernel the call launched, by
  /// name, largest gpu_ms first. Empty otherwise.
  std::vector<KernelProfile> kernels;
};

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
  /// CUDA graphs for this call (see "CUDA graphs" at Module).
  GraphUse use_graph = GraphUse::kAsLoaded;
  /// Whose mutable state the call reads and writes: a Session of this Module,
  /// or nullptr for the Module's own (default) state. Ignored by methods
  /// without state. A Session of another Module is kInvalidArgument.
  Session* session = nullptr;
  /// When set, the call fills it with the time of each step (CUDA events on
  /// the run stream plus host wall time). Profiling makes the call wait for
  /// the GPU before it returns, even on a caller stream. Leave null for runs
  /// you measure from outside: the events cost a few microseconds per step.
  RunProfile* profile = nullptr;
  /// With `profile`: also time every kernel the model libraries (and the
  /// SDK's own ops) launch, into RunProfile::kernels: where a method's GPU
  /// time goes. Each launch gets two CUDA events, and the call takes the
  /// plain path (a graph replay has no per-kernel times), so its step times
  /// are not those of an unprofiled call.
  bool profile_kernels = false;
};

/// How CUDA graphs fare for one method (Module::graph_status).
struct GraphStatus {
  bool requested = false;    ///< the method was loaded with graphs (LoadOptions)
  bool available = true;     ///< false once graphs were found unusable: calls take the plain path
  std::string reason;        ///< why not available ("" when available)
  std::size_t graphs = 0;    ///< captured graphs alive (all call slots)
  std::size_t captures = 0;  ///< graphs captured so far
  std::size_t replays = 0;   ///< calls answered by a graph replay
  std::size_t evictions = 0; ///< graphs destroyed to respect LoadOptions::max_graphs_per_method
};

/// A dimension of an input that may vary at run time, up to `max`.
struct DynamicDim {
  std::size_t dim = 0;  ///< index into the input's sizes
  int64_t max = 0;      ///< upper bound (TensorSpec::sizes[dim])
};

/// Public description of a loaded method's signature.
struct MethodMeta {
  std::string name;
  std::vector<TensorSpec> inputs;   ///< in call order; `dynamic` marks tensors whose sizes are upper bounds
  std::vector<TensorSpec> outputs;  ///< in return order
  std::size_t num_delegates = 0;    ///< CudaBackend delegates (model libraries) the method runs
  /// Names the model library gives the inputs / outputs (the exported
  /// program's argument names, from AOTInductorModelContainerGetInputName /
  /// GetOutputName), parallel to inputs / outputs; "" where unavailable (a
  /// value that reaches no delegate directly, or a library without names).
  std::vector<std::string> input_names, output_names;
  /// Parallel to inputs: the dimensions that may vary, with their bounds.
  /// Empty for a static input. For a dynamic input the model library's own
  /// input check says which dimensions vary; when it says nothing, every
  /// dimension of the dynamic input is listed (the program itself only marks
  /// the whole tensor as bounded).
  std::vector<std::vector<DynamicDim>> dynamic_dims;
};

/// Wall-clock time spent in each phase of the load, in milliseconds, summed
/// over all delegates of all loaded methods.
struct LoadTimings {
  double parse_ms = 0;        ///< Program::open (0 for Module(Program, ...))
  double device_init_ms = 0;  ///< making the device's CUDA context current (costly only at the first load in a process)
  double library_ms = 0;      ///< ELF checks, optional SHA-256 pin, kernel scan, memfd + dlopen + dlsym
  double container_ms = 0;    ///< AOTInductorModelContainerCreateWithDevice
  double weights_ms = 0;      ///< installing weights: comparing blobs, uploads (see LoadStats), binding shared constants
  double total_ms = 0;        ///< the whole constructor, parse included
};

/// How one model library's CUDA imports were bound (docs/cuda-hooks.md). The
/// SDK binds a few CUDA functions of each library to its own hooks, in the
/// library's own import slots, so that graph capture, pinned weight uploads,
/// kernel unloading, kernel profiles and model error messages work whatever
/// order the process loaded CUDA and aoti_cuda in.
struct LibraryHooks {
  std::string library;                ///< the delegate it belongs to, as messages name it
  std::vector<std::string> hooked;    ///< its imports now bound to the SDK's hooks, e.g. "cudaEventRecord"
  std::vector<std::string> warnings;  ///< imports that bypass the hooks, each with its consequence (also logged)
};

/// What loading installed, and what it avoided (Module::load_stats()).
struct LoadStats {
  std::size_t weight_bytes = 0;              ///< weights blob bytes uploaded to the device
  std::size_t deduplicated_bytes = 0;        ///< weights blob bytes NOT uploaded: all their constants were another method's
  std::size_t deduplicated_constants = 0;    ///< read-only constants bound to another method's identical copy
  std::size_t shared_state_constants = 0;    ///< buffers bound to another method's copy (LoadOptions::share_state)
  /// Constant tensors the runtime marked as memory no kernel writes (weights: parameters, tensor constants,
  /// those the library reports as Unknown; a tensor one method adopted from another counts once). With
  /// TuningOptions::dependent_launch the fused linear operator reads these while the previous kernel
  /// finishes. Buffers are never marked.
  std::size_t read_only_constants = 0;
  double upload_ms = 0;                      ///< time of the uploads (page locking and unlocking included)
  double upload_gb_per_s = 0;                ///< weight_bytes / upload_ms (decimal GB)
  std::size_t page_locked_bytes = 0;         ///< of weight_bytes, uploaded from the blob page-locked in place (opt-in)
  std::size_t staged_bytes = 0;              ///< of weight_bytes, uploaded through the SDK's pinned staging pipeline
  std::string upload_note;                   ///< why some bytes took neither pinned path ("" when all did or were small)
  double compare_ms = 0;                     ///< comparing weights blob ranges for deduplication
  std::vector<LibraryHooks> libraries;       ///< per loaded model library: its CUDA hook binding
};

/// An independent copy of a Module's mutable state (its buffers, e.g. one KV
/// cache per conversation); the weights are the Module's. Made by
/// Module::create_session(), selected per call with RunOptions::session.
/// Movable, not copyable. A Session must not outlive its Module (destroy it
/// first; moving the Module is fine). A default-constructed or moved-from
/// Session throws Error(kInvalidArgument) from every member function.
///
/// How it works: the model libraries read and write their state at fixed
/// device addresses (so CUDA graphs stay valid). A call with a session whose
/// state is not the one in place first queues device copies, on the call's
/// stream, that save the state in place to its owner and bring the session's
/// in. Switching sessions therefore costs two device copies of
/// Module::state_bytes(); consecutive calls of one session cost nothing.
///
/// Thread-safety: the member functions may be called from any thread, but not
/// concurrently on one Session object.
class AOTI_CUDA_API Session {
 public:
  Session() noexcept;
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  /// Waits for work that uses its state; never throws.
  ~Session();

  /// Puts the state back to its initial bytes (those of the weights blob).
  /// `stream` (a cudaStream_t) orders the reset; nullptr: done on return.
  void reset(void* stream = nullptr);
  /// Device bytes this session owns (one copy of Module::state_bytes()).
  std::size_t state_bytes() const;

 private:
  friend class Module;
  friend class runtime::StateManager;
  struct Impl;
  std::unique_ptr<Impl> impl_;
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
  /// The method to run when none is named: "forward" when loaded, else the
  /// first of method_names(). What `aoti_cuda run` and forward()-less callers use.
  std::string default_method() const;
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
  /// Runs `method` and writes its outputs into `outputs` (I/O binding): one
  /// defined, contiguous tensor per method output, of the output's dtype and
  /// rank, on the host (pinned memory copies fastest) or on the Module's
  /// device; after the run each must have exactly the shape the call produced
  /// (for static outputs this is checked before running). Nothing is
  /// allocated for outputs, so a steady-state call allocates no device
  /// memory. With a caller stream, device outputs are written in that
  /// stream's order; host outputs are complete on return. The Tensor objects
  /// are not modified (only the memory they reference), and they must not
  /// overlap the inputs. Errors: as execute(), plus kInvalidArgument naming
  /// the output for a mismatching or unusable output tensor.
  void execute_into(std::string_view method, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                    const RunOptions& options = {});
  /// execute("forward", inputs, options).
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs, const RunOptions& options = {}) {
    return execute("forward", inputs, options);
  }

  /// CUDA graph state of a loaded method (kNotFound as method_meta()).
  GraphStatus graph_status(std::string_view method) const;

  /// The program the Module was loaded from (valid as long as the Module).
  const Program& program() const;
  /// How long loading took, by phase.
  LoadTimings load_timings() const;
  /// Bytes installed, deduplicated and shared at load, and the upload rate.
  LoadStats load_stats() const;
  /// The tuning the Module was loaded with: LoadOptions::tuning with every
  /// field set (resolve_tuning() of it, as read at load).
  TuningOptions tuning() const;

  /// A new, independent copy of the mutable state, starting from its initial
  /// bytes (see Session). Costs state_bytes() of device memory; the first
  /// session also allocates one more copy to hold the Module's own state while
  /// a session's is in place, plus a copy of the non-zero initial bytes.
  /// Throws kUnsupported when a model library's constant table cannot be read
  /// (its state is unknown), kOutOfMemory / kCuda.
  Session create_session();
  /// Puts the Module's own state (the one calls without RunOptions::session
  /// use, e.g. a KV cache between two conversations) back to its initial
  /// bytes, as Session::reset() does for a session. `stream` (a cudaStream_t)
  /// orders the reset after earlier stateful calls; nullptr: done on return.
  /// Stateless programs: nothing to do. Throws kUnsupported when a model
  /// library's constant table cannot be read (its state is unknown).
  void reset_state(void* stream = nullptr);
  /// Device bytes of one copy of the mutable state (every buffer of every
  /// loaded method, a buffer shared across methods counted once).
  std::size_t state_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoti_cuda
