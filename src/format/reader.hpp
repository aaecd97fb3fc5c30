// Private format layer: what the files of the .pte/.ptd reader share.
//
// The reader (Program::open / from_memory) works in this order:
//   file_headers.cpp      container headers P1-P7 / D1-D2 in overflow-checked u64
//                         arithmetic, an aligned view of the flatbuffer bytes;
//   program.cpp           FlatBuffers verification (P8, D3), root checks (P9, D4),
//                         Impl::load and the public Program API;
//   named_data.cpp        segments (S7), named data of the .pte (S9) and the
//                         .ptd files (D4, D5), unique keys (M1);
//   method_validation.cpp per method: plan fields and value indices (S1, S2),
//                         values and tensors (S3-S6), external constants (M2),
//                         delegates (S8);
//   plan_builder.cpp      the instruction walk: PlanSteps and not-runnable reasons;
//   blob_keys.cpp         which named-data keys hold a CUDA delegate's .so and
//                         weights, per exporter generation;
//   fqn_weights.cpp       ExecuTorch 1.5's per-FQN weights: the ETCUDAFQN3
//                         metadata in the delegate payload (W1-W5), the
//                         storages it names and the store they form (W6, W7).
// Every check ID cited in an error message is described in docs/format-checks.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda_schema/flat_tensor_generated.h"
#include "aoti_cuda_schema/program_generated.h"
#include "format/checked.hpp"
#include "format/mapped_file.hpp"

namespace aoti_cuda {

namespace et = executorch_flatbuffer;
namespace ft = flat_tensor_flatbuffer;

namespace format {

constexpr std::uint64_t kHeadBytes = 64;
constexpr std::uint64_t kFlatbufferMaxSize = 0x7fffffffULL;  // FlatBuffers 32-bit limit (2^31-1)
constexpr std::size_t kMaxRank = 16;
constexpr const char* kCudaBackend = "CudaBackend";
constexpr const char* kDefaultPtdName = "aoti_cuda_blob.ptd";

/// Throws kInvalidProgram: "<file>: <check> failed: <detail> (see docs/format-checks.md)".
[[noreturn]] void invalid(const std::string& file, const std::string& check, const std::string& detail);
/// Bytes as text, non-printable ones as \xNN.
std::string printable(const std::uint8_t* p, std::size_t n);
/// printable(s) in double quotes.
std::string quoted(std::string_view s);
inline std::string u64s(std::uint64_t v) { return std::to_string(v); }

/// One input file: its bytes, the (aligned) flatbuffer region and the segment area.
struct FileData {
  std::string label;
  std::unique_ptr<format::MappedFile> mapping;  // set when opened by path
  ByteView bytes;                               // the whole file
  std::unique_ptr<std::uint8_t[]> aligned_storage;  // copy of the flatbuffer region when misaligned
  const std::uint8_t* fb = nullptr;              // flatbuffer bytes, 16-aligned
  std::size_t fb_size = 0;
  bool has_segment_area = false;
  std::uint64_t segment_base = 0;
  bool segment_size_known = false;
  std::uint64_t segment_data_size = 0;
  std::uint64_t header_end = 8;  // first byte after the spliced header (root must not point below)

  std::uint64_t fb_offset_of(const void* p) const {
    return static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(p) - fb);
  }
};

/// Makes fd.fb point at a 16-byte aligned copy of [0, size) when needed (P7 / D3).
void ensure_aligned(FileData& fd, std::uint64_t size);
/// FlatBuffers Verifier limits used for both file kinds (P8 / D3).
flatbuffers::Verifier::Options verifier_options();

/// Element i of a vector of 8-byte scalars. The FlatBuffers verifier checks a
/// vector's length prefix for 4-byte alignment only, so in a hostile file such
/// a vector's elements can sit at 4 mod 8: read them without assuming more
/// (found by tests/fuzz; reproducer in tests/fuzz/regressions).
template <typename T>
T scalar_at(const flatbuffers::Vector<T>* v, flatbuffers::uoffset_t i) {
  static_assert(sizeof(T) == 8, "only 8-byte elements can be misaligned after verification");
  T out;
  std::memcpy(&out, v->Data() + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
  return out;
}
/// Bytes of a segment: [base + offset, + size), checked against the segment
/// area (S7 / D5). `what` names the referring field for the message.
ByteView segment_bytes(const FileData& fd, std::uint64_t offset, std::uint64_t size, const std::string& what);
/// P1-P7 (+ the size limit of P8) for a .pte; leaves fd.fb set up.
void parse_pte_header(FileData& fd);
/// D1-D2 for a .ptd; leaves fd.fb set up.
void parse_ptd_header(FileData& fd);

/// S4 checks (also D5 layouts) on sizes/dim_order; returns nbytes.
std::uint64_t check_shape(const std::string& file, const std::string& where, int scalar_type,
                          const flatbuffers::Vector<int32_t>* sizes, const flatbuffers::Vector<uint8_t>* dim_order,
                          const char* check);

/// True when a delegate payload is per-FQN weight metadata of any version
/// ("ETCUDAFQN" + version); is_supported_fqn_metadata: version 3, which
/// parse_fqn_metadata reads. fqn_metadata_magic: its first 10 bytes, printable.
bool is_fqn_metadata(ByteView payload);
bool is_supported_fqn_metadata(ByteView payload);
std::string fqn_metadata_magic(ByteView payload);
/// W1-W5: the entries of ETCUDAFQN3 metadata (storages not looked up yet) and
/// the .so key in *so_key. Throws kInvalidProgram naming the check, the field
/// and its byte offset; `where` names the delegate.
std::vector<FqnWeightSpec> parse_fqn_metadata(const std::string& file, const std::string& where, ByteView payload,
                                              std::string* so_key);

struct NamedEntry {
  ByteView bytes;
  std::string file;
  bool in_ptd = false;
  bool has_layout = false;  // .ptd entries only: a TensorLayout is present
  int layout_dtype = 0;
  std::vector<int64_t> layout_sizes;
  std::vector<std::uint8_t> layout_dim_order;
};

/// One method while build_methods describes it.
struct MethodBuild {
  const et::Program* prog = nullptr;
  const et::ExecutionPlan* plan = nullptr;
  const FileData* pte = nullptr;
  std::string where;                          ///< "method \"name\"", for messages
  MethodSpec m;
  std::vector<std::string> reasons;           ///< why the method cannot run
  std::map<int32_t, int> delegate_slot;       ///< plan delegate index -> MethodSpec::delegates index
  std::set<std::string> other_backends, other_ops;

  /// S2: a value index must be inside the value table (-1 allowed where optional).
  void check_index(std::int64_t idx, const std::string& field, bool allow_minus_one = false) const;
};

}  // namespace format

struct Program::Impl {
  std::string pte_path;
  std::vector<std::string> data_paths;
  format::FileData pte;
  std::vector<std::unique_ptr<format::FileData>> ptds;  // stable addresses
  std::vector<MethodSpec> methods;
  std::map<std::string, format::NamedEntry, std::less<>> named;  // M1: unique across files
  std::vector<NamedDataInfo> named_order;
  bool require_data = true;

  void load();
  void load_ptd(format::FileData& fd);
  void add_named(const std::string& key, ByteView bytes, const std::string& file, const std::string& check,
                 format::NamedEntry* ptd_entry = nullptr);
  void load_pte_data(const et::Program* prog);
  void check_external(const std::string& vw, const et::Tensor* t, std::vector<std::string>& reasons);
  void build_methods(const et::Program* prog);
  // build_methods, one method at a time (method_validation.cpp, plan_builder.cpp):
  MethodSpec build_method(const et::Program* prog, flatbuffers::uoffset_t index, std::set<std::string>& names);
  void read_values(format::MethodBuild& b);
  void read_tensor_value(format::MethodBuild& b, const std::string& vw, const et::Tensor* t, ValueSpec& vs);
  void read_io(format::MethodBuild& b);
  void check_delegates(format::MethodBuild& b);
  void build_plan(format::MethodBuild& b);
  void plan_delegate_call(format::MethodBuild& b, const std::string& iw, const et::DelegateCall* dc);
  void plan_kernel_call(format::MethodBuild& b, const std::string& iw, const et::KernelCall* kc);
  void finish_method(format::MethodBuild& b);
  void resolve_delegate(MethodSpec& m, DelegateSpec& ds, const et::Program* prog, const et::BackendDelegate* d);
  /// The delegate's generation and blob keys, from its payload (`processed`) and the named data;
  /// false when the payload is weight metadata of a version this build does not read (the method
  /// is then marked not runnable). `dw` names the delegate in messages.
  bool choose_blob_keys(MethodSpec& m, DelegateSpec& ds, ByteView processed, const std::string& dw);
  /// Finds the .so and weights blobs of the chosen keys: a missing one throws kNotFound with
  /// require_data, else is added to `missing`.
  void find_blobs(DelegateSpec& ds, const std::string& dw, std::string& missing);
  /// kFqnWeights delegates: each entry's storage (W6 sizes); a missing one throws
  /// kNotFound with require_data, else is added to `missing` (fqn_weights.cpp).
  void find_fqn_storages(DelegateSpec& ds, const std::string& dw, std::string& missing);
  /// W6 (overlapping storages) and W7 once every method is built (fqn_weights.cpp).
  void check_fqn_store();
  std::optional<format::NamedEntry> lookup(std::string_view key) const {
    auto it = named.find(key);
    if (it == named.end()) return std::nullopt;
    return it->second;
  }
};


}  // namespace aoti_cuda
