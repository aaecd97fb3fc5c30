// aoti_cuda — Program: a validated, read-only view of an ExecuTorch program.
//
// Program opens a .pte and its .ptd data file(s) (memory-mapped read-only, or
// borrowed from caller memory), verifies both FlatBuffers, runs the semantic
// checks of an untrusted-input reader (bounds, overflow, indices, enum ranges,
// union types, ranks, sizes) and describes every method: its inputs and
// outputs, its instruction plan, and the CUDA delegate blobs (.so and weights)
// it needs, for every exporter generation. Nothing is executed: Program is
// safe to use on any file, on machines without a GPU.
//
// All ByteView results point into the mapped files and stay valid as long as
// the Program (or a Module created from it) lives.
//
// Errors: open()/from_memory() throw aoti_cuda::Error — kInvalidProgram for a
// failed format or consistency check (naming the file, offset/field and the
// check), kNotFound for a missing file or (with require_data) a missing blob,
// kIo when a file cannot be read or mapped, kInvalidArgument for null byte
// ranges. method() throws kNotFound. Nothing else throws.
//
// Thread-safety: a Program is immutable after construction; all const member
// functions may be called concurrently. It is move-only; a moved-from Program
// may only be assigned to or destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/export.h"

namespace aoti_cuda {

/// A read-only byte range; does not own the bytes.
struct ByteView {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  bool empty() const noexcept { return size == 0; }
};

/// How the exporter laid out the CUDA delegate's blobs.
enum class ExporterGeneration {
  kSeed,        ///< pre-1.1 main: "so_blob" in the .ptd, weights embedded in the .so
  kMethodKeys,  ///< ExecuTorch 1.1-1.3: "<method>_so_blob" (.pte) + "<method>_weights_blob" (.ptd)
  kHashKeys,    ///< ExecuTorch 1.4: "<so_key>\n<weights_key>" in the delegate payload (sha256 keys)
  kFqnWeights,  ///< ExecuTorch 1.5: ETCUDAFQN3 metadata in the payload, one stored tensor per constant (FQN)
};
/// Human-readable description, e.g. "executorch-1.4+ (sha256 keys in the delegate payload)".
AOTI_CUDA_API const char* to_string(ExporterGeneration g) noexcept;

/// Type of an entry of a method's value table (ExecuTorch EValue kinds;
/// kList covers every list type).
enum class ValueKind { kNone, kTensor, kInt, kDouble, kBool, kString, kList };

/// Shape and type of a tensor value as stored in the program.
struct TensorSpec {
  DType dtype = DType::kFloat32;
  /// Static shape; for dynamic tensors the per-dimension upper bound.
  std::vector<int64_t> sizes;
  /// Memory order, outermost first ({0,1,..} = contiguous).
  std::vector<std::uint8_t> dim_order;
  /// True when the program marks the tensor DYNAMIC_BOUND: any dimension may
  /// be smaller than `sizes` at run time (the file does not say which).
  bool dynamic = false;
};

/// One entry of a method's value table.
struct ValueSpec {
  ValueKind kind = ValueKind::kNone;
  int32_t value_index = -1;  ///< index in the method's value table
  TensorSpec tensor;         ///< meaningful when kind == kTensor
};

/// One constant of a delegate whose weights are stored per tensor (ExecuTorch
/// 1.5, ExporterGeneration::kFqnWeights): an entry of the delegate's
/// ETCUDAFQN3 metadata with the bytes it names. Each named storage holds the
/// whole storage of the constant (AOTInductor's `Weights` entry); the model
/// library views it with `sizes`, `strides` and `storage_offset` (elements).
/// One store serves every method of the file: delegates of several methods
/// that name the same `storage_key` see the same bytes.
struct FqnWeightSpec {
  std::string fqn;             ///< the constant's original name (FQN), as the model library reports it
  std::string storage_key;     ///< named-data key: "cuda_fqn_weight:<cpu|cuda>:<fqn>" (tensor constants: "...:<so_key>:<fqn>")
  std::uint64_t storage_nbytes = 0;  ///< bytes of the storage (== storage.size once found)
  DType dtype = DType::kFloat32;
  int32_t device_type = 1;           ///< where the library expects it: 0 CPU, 1 CUDA (c10::DeviceType)
  int64_t storage_offset = 0;        ///< elements from the start of the storage
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;      ///< in elements; same rank as sizes
  ByteView storage;                  ///< the storage bytes (zero-copy); empty when not found (see DelegateSpec)
  std::string storage_file;          ///< file holding them ("" when not found)
};

/// A CudaBackend partition of a method and the blobs it needs.
struct DelegateSpec {
  int32_t delegate_index = -1;        ///< index in the method's delegate table
  std::string backend_id;             ///< always "CudaBackend" for runnable methods
  std::string method_name_spec;       ///< the "method_name" compile spec (may differ from the method)
  ExporterGeneration generation = ExporterGeneration::kMethodKeys;
  std::string so_key;                 ///< named-data key of the .so
  std::string weights_key;            ///< named-data key of the weights blob ("" for kSeed and kFqnWeights)
  ByteView so;                        ///< the .so bytes (zero-copy)
  ByteView weights;                   ///< the weights blob; empty when absent/embedded in the .so, or kFqnWeights
  std::string so_file;                ///< file holding the .so (pte or ptd path)
  std::string weights_file;           ///< file holding the weights ("" when absent)
  /// kFqnWeights: every constant of the partition, in metadata order (empty otherwise).
  std::vector<FqnWeightSpec> fqn_weights;
  /// kFqnWeights: the payload's metadata version, e.g. "ETCUDAFQN3" (a newer
  /// one is reported, and the method is then not runnable).
  std::string fqn_format;
  std::vector<int32_t> args;          ///< DelegateCall value indices: delegate inputs, then outputs
};

/// One step of a method's instruction chain, as this SDK executes it.
struct PlanStep {
  enum class Kind {
    kDelegate,      ///< run delegates[delegate] with args
    kMove,          ///< values[args[1]] = values[args[0]]
    kHostToDevice,  ///< et_copy::_h2d_copy.out: args = {src, out}
    kDeviceToHost,  ///< et_copy::_d2h_copy.out: args = {src, out}
  };
  Kind kind = Kind::kDelegate;
  int32_t delegate = -1;  ///< index into MethodSpec::delegates for kDelegate
  std::vector<int32_t> args;
};

/// Everything the SDK knows about a method before loading it.
struct MethodSpec {
  std::string name;
  std::vector<ValueSpec> inputs;   ///< in call order
  std::vector<ValueSpec> outputs;  ///< in return order
  std::vector<ValueSpec> values;   ///< the whole value table (index = value_index)
  std::vector<PlanStep> plan;
  std::vector<DelegateSpec> delegates;  ///< CudaBackend delegates referenced by the plan
  /// True when the plan holds only CudaBackend delegate calls, moves and
  /// et_copy host/device copies, and every blob it needs was found.
  bool runnable = false;
  /// Why not runnable (other backend ids, kernel operator names, missing blobs...).
  std::string not_runnable_reason;
};

/// One named-data entry (.pte or .ptd).
struct NamedDataInfo {
  std::string key;
  std::size_t size = 0;  ///< bytes
  std::string file;      ///< file (or from_memory label) that holds it
};

/// Facts read from an ELF shared object without loading it.
struct ElfInfo {
  int elf_class = 0;               ///< 32 or 64
  std::uint16_t machine = 0;       ///< e_machine (62 = x86-64, 183 = AArch64)
  std::string machine_name;        ///< "x86-64", "aarch64", ...
  std::uint16_t type = 0;          ///< e_type (3 = ET_DYN)
  bool is_shared_object = false;
  std::string soname;
  std::vector<std::string> needed;              ///< DT_NEEDED entries
  std::vector<std::string> undefined_symbols;   ///< undefined dynamic symbols (sorted, unique)
  std::vector<std::string> defined_symbols;     ///< exported AOTInductor* entry points (sorted)
};

/// GPU code embedded in a model library (AOTInductor embeds each Triton
/// kernel as a CUDA fat binary holding SASS for one or more architectures and
/// optionally PTX).
struct AOTI_CUDA_API CudaKernelInfo {
  std::size_t fatbins = 0;        ///< fat binaries found
  std::vector<int> sass_archs;    ///< SM versions with machine code, e.g. {90} for sm_90 (sorted, unique)
  std::vector<int> ptx_archs;     ///< SM versions with PTX (JIT-compilable for newer GPUs unless arch-specific)
  /// True when `sm` (e.g. 90 for compute capability 9.0) can run every kernel
  /// found: SASS for exactly that SM, or PTX for an SM not above it.
  bool runs_on(int sm) const noexcept;
  /// "sm_90 (SASS), compute_90 (PTX)"; "none found" when empty.
  std::string describe() const;
};

/// Scans a model library's bytes for embedded CUDA fat binaries. Never throws
/// on malformed content: damaged fat binaries are skipped.
AOTI_CUDA_API CudaKernelInfo inspect_cuda_kernels(ByteView so_bytes);

/// Lowercase hex SHA-256 of `bytes`: the digest LoadOptions::allowed_so_sha256
/// pins (e.g. of DelegateSpec::so). Costs about 4 ms per MB.
AOTI_CUDA_API std::string sha256_hex(ByteView bytes);

/// Reads ELF facts from bytes. Throws Error(kInvalidProgram) naming the
/// failed check when the bytes are not a well-formed ELF file.
AOTI_CUDA_API ElfInfo inspect_elf(ByteView bytes);

/// How Program::open finds and checks data files.
struct ProgramOptions {
  /// Explicit .ptd files. Empty: use "aoti_cuda_blob.ptd" beside the .pte when it exists.
  std::vector<std::string> data_files;
  /// When false, missing blobs do not throw at open(); the methods that need
  /// them are reported not runnable instead (used by `aoti_cuda inspect`).
  bool require_data = true;
};

class AOTI_CUDA_API Program {
 public:
  /// Maps and validates `pte_path` and its data files (read-only mappings,
  /// kept until the Program is destroyed). Throws Error on any failed check
  /// (kInvalidProgram / kNotFound / kIo) with file, offset and field.
  static Program open(const std::string& pte_path, const ProgramOptions& options = {});

  /// Validates caller-owned bytes (borrowed: they must stay alive and
  /// unchanged as long as the Program and every Module created from it).
  /// `label` stands for the file name in messages and pte_path(); data files
  /// are named "<label>.ptd[i]". `require_data` as in ProgramOptions.
  static Program from_memory(ByteView pte, const std::vector<ByteView>& data_files,
                             const std::string& label = "<memory>", bool require_data = true);

  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  /// Every method of the program, runnable or not, in program order.
  const std::vector<MethodSpec>& methods() const noexcept;
  std::vector<std::string> method_names() const;
  /// The method called `name`. Throws Error(kNotFound) listing the valid names.
  const MethodSpec& method(std::string_view name) const;

  /// Named-data lookup across the .pte and the .ptd file(s) (opening fails
  /// with kInvalidProgram when a key appears twice). nullopt when absent.
  std::optional<ByteView> named_data(std::string_view key) const;
  /// Every named-data entry: the .pte's first, then each data file's.
  std::vector<NamedDataInfo> named_data_entries() const;

  /// The path given to open() (or the from_memory label).
  const std::string& pte_path() const noexcept;
  /// The data files in use: the given ones, or the default .ptd when it
  /// exists (from_memory: their labels).
  const std::vector<std::string>& data_paths() const noexcept;

 private:
  Program();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoti_cuda
