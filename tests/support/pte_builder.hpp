// Test-support program builder: synthesizes ExecuTorch .pte/.ptd files (any
// exporter generation of the CUDA delegate, other backends, kernel ops, and
// deliberately broken variants) laid out the way ExecuTorch's serializers
// write them: the eh00 / FH01 header spliced in at byte 8, segments after the
// flatbuffer at 128-byte alignment (docs/pte-format.md §2, §4).
//
// Typical use (a fake model .so packed as a 1.2-style program):
//
//   aoti_cuda_test::PteBuilder b;
//   auto blobs = b.add_cuda_blobs(aoti_cuda::ExporterGeneration::kMethodKeys, "forward", so_bytes, weights);
//   b.add_method(aoti_cuda_test::cuda_method("forward", {f32({2, 3})}, {f32({2, 3})}, blobs));
//   aoti_cuda_test::BuiltProgram p = b.build();
//   p.write("/tmp/dir", "model");   // model.pte + aoti_cuda_blob.ptd
//
// Nothing here validates its input: out-of-range indices, bad enum values,
// missing tables... are written as given so tests can build hostile files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda_test {

using Bytes = std::vector<std::uint8_t>;
Bytes to_bytes(const std::string& s);

/// A Tensor value. dtype is the raw ScalarType code (6 = float32).
struct TensorDesc {
  int dtype = 6;
  std::vector<std::int32_t> sizes;
  /// Empty: contiguous 0..rank-1 (unless omit_dim_order).
  std::vector<std::uint8_t> dim_order;
  int shape_dynamism = 0;  ///< 0 STATIC, 1 DYNAMIC_BOUND, 2 DYNAMIC_UNBOUND (raw)
  std::int32_t storage_offset = 0;
  bool omit_sizes = false;
  bool omit_dim_order = false;
  /// Memory plan: {memory_id, offset}; absent = not planned.
  std::optional<std::pair<std::uint32_t, std::uint64_t>> allocation;
  /// > 0: initial data in the .pte (constant segment, or mutable data when planned).
  std::uint32_t data_buffer_idx = 0;
  /// Non-empty: ExtraTensorInfo{location EXTERNAL, fully_qualified_name} (data in a .ptd).
  std::string external_fqn;
};
TensorDesc f32(std::vector<std::int32_t> sizes);
TensorDesc i64(std::vector<std::int32_t> sizes);
TensorDesc bf16(std::vector<std::int32_t> sizes);

/// One EValue of a method's value table.
struct ValueDesc {
  enum class Kind { kTensor, kNull, kInt, kDouble, kBool, kString, kIntList, kTensorList, kOptionalTensorList };
  Kind kind = Kind::kTensor;
  TensorDesc tensor;
  std::int64_t int_value = 0;
  std::vector<std::int32_t> items;  ///< list items (indices for tensor lists)
  /// Non-negative: write this raw union tag instead of the one `kind` implies.
  int raw_tag = -1;
  bool omit_payload = false;  ///< tag set, value offset absent
  static ValueDesc of(TensorDesc t) { ValueDesc v; v.tensor = std::move(t); return v; }
  static ValueDesc integer(std::int64_t i) { ValueDesc v; v.kind = Kind::kInt; v.int_value = i; return v; }
};

/// One instruction of the (single) chain.
struct InstrDesc {
  enum class Kind { kDelegate, kKernel, kMove, kJumpFalse, kFree };
  Kind kind = Kind::kDelegate;
  std::int32_t index = 0;          ///< delegate_index / op_index / move_from / cond / value_index
  std::int32_t second = 0;         ///< move_to / destination_instruction
  std::vector<std::int32_t> args;  ///< DelegateCall / KernelCall args
  int raw_tag = -1;                ///< non-negative: override the union tag
  bool omit_args = false;
};

/// A BackendDelegate.
struct DelegateDesc {
  std::string id = "CudaBackend";
  Bytes processed;                   ///< payload bytes
  bool processed_in_segment = false; ///< SEGMENT (true) or INLINE (false)
  int raw_location = -1;             ///< non-negative: override DataLocation
  std::optional<std::uint32_t> raw_index;  ///< override the inline/segment index
  std::vector<std::pair<std::string, Bytes>> compile_specs;
  bool omit_processed = false;
};

struct MethodDesc {
  std::string name = "forward";
  std::vector<ValueDesc> values;
  std::vector<std::int32_t> inputs, outputs;
  std::vector<InstrDesc> instructions;
  std::vector<DelegateDesc> delegates;
  std::vector<std::pair<std::string, std::string>> operators;  ///< {name, overload}
  std::vector<std::int64_t> non_const_buffer_sizes{0};
  // Hostile-file switches: leave the field out of the flatbuffer.
  bool omit_name = false, omit_values = false, omit_inputs = false, omit_outputs = false, omit_chains = false,
       omit_delegates = false, omit_non_const_buffer_sizes = false, omit_instructions = false;
  bool empty_chains = false;  ///< chains = [] instead of one chain
};

/// Keys and payload of one CUDA delegate's blobs (see PteBuilder::add_cuda_blobs).
struct CudaBlobs {
  aoti_cuda::ExporterGeneration generation = aoti_cuda::ExporterGeneration::kMethodKeys;
  std::string method_name;  ///< value of the "method_name" compile spec ("" = none)
  std::string so_key, weights_key;
  Bytes processed;          ///< delegate payload ("" before 1.4)
  bool processed_in_segment = false;
};

/// One constant of an ExecuTorch 1.5 delegate (per-FQN weights; see
/// PteBuilder::add_fqn_weights). Every field is written as given.
struct FqnWeightDesc {
  std::string fqn;
  Bytes storage;                 ///< the whole storage (stored under storage_key in the .ptd)
  int dtype = 6;                 ///< raw ScalarType code
  std::int32_t device_type = 1;  ///< 0 CPU, 1 CUDA
  std::int64_t storage_offset = 0;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;            ///< empty: contiguous
  std::string storage_key;                      ///< empty: "cuda_fqn_weight:<cpu|cuda>:<fqn>"
  std::optional<std::uint64_t> storage_nbytes;  ///< written in the metadata; default storage.size()

  /// The key ExecuTorch 1.5's collector derives (storage_key when set).
  std::string key() const;
  /// The strides written (contiguous ones when `strides` is empty).
  std::vector<std::int64_t> written_strides() const;
};

/// ETCUDAFQN3 metadata bytes as ExecuTorch 1.5's CUDA weight collector
/// encodes them (`magic` replaces "ETCUDAFQN3" for version tests).
Bytes encode_fqn_metadata(const std::string& so_key, const std::vector<FqnWeightDesc>& entries,
                          const std::string& magic = "ETCUDAFQN3");

/// A method whose plan is one CudaBackend DelegateCall over all of its values:
/// values = inputs then outputs, args = [inputs..., outputs...].
MethodDesc cuda_method(const std::string& name, const std::vector<TensorDesc>& inputs,
                       const std::vector<TensorDesc>& outputs, const CudaBlobs& blobs);
/// The method of the fake KV-cache library (tests/fake_model): inputs (x f32[1,4], pos i64[1]), output f32[4], as
/// the kv_cache fixture's; the delegate call passes (pos, x, out), the order the library takes them in.
MethodDesc fake_kv_method(const std::string& name, const CudaBlobs& blobs);
/// The CudaBackend delegate (payload + method_name compile spec) for `blobs`.
DelegateDesc cuda_delegate(const CudaBlobs& blobs);

struct BuiltProgram {
  Bytes pte;
  Bytes ptd;             ///< empty when the program has no .ptd
  bool has_ptd = false;
  /// Writes <dir>/<stem>.pte and, when has_ptd, <dir>/aoti_cuda_blob.ptd. Returns the .pte path.
  std::string write(const std::string& dir, const std::string& stem) const;
};

class PteBuilder {
 public:
  enum class Where { kPte, kPtd };

  PteBuilder& add_method(MethodDesc m);
  /// Named data blob stored in the .pte (Program.named_data) or the .ptd.
  PteBuilder& add_named_data(const std::string& key, Bytes bytes, Where where);
  /// A .ptd entry carrying a TensorLayout (an external constant's data).
  PteBuilder& add_named_tensor(const std::string& key, Bytes bytes, const TensorDesc& layout);
  /// Adds the .so/weights named data of one CUDA delegate the way `generation`'s
  /// exporter stores them and returns the keys/payload to put in the delegate:
  ///  kSeed:       "so_blob" in the .ptd, no weights (embedded in the .so), no method_name spec
  ///  kMethodKeys: "<m>_so_blob" in the .pte, "<m>_weights_blob" in the .ptd, empty INLINE payload
  ///  kHashKeys:   "<64 hex>_so_blob" (.pte) / "<64 hex>_weights_blob" (.ptd) derived from the
  ///               bytes; payload "<so_key>\n<weights_key>" in a SEGMENT (or INLINE)
  /// Empty `weights` still adds the weights entry (like an export of a weightless model).
  CudaBlobs add_cuda_blobs(aoti_cuda::ExporterGeneration generation, const std::string& method_name,
                           const Bytes& so, const Bytes& weights, bool payload_in_segment = true);
  /// ExecuTorch 1.5 (kFqnWeights): the .so in the .pte under "<64 hex>_so_blob", each
  /// entry's storage in the .ptd under its key (a key already stored, e.g. by another
  /// method's delegate, is not stored again: one store per file), and the ETCUDAFQN3
  /// metadata as the delegate payload (in a SEGMENT, like ExecuTorch's).
  CudaBlobs add_fqn_weights(const std::string& method_name, const Bytes& so, const std::vector<FqnWeightDesc>& entries,
                            bool payload_in_segment = true);
  /// Store identical .ptd buffers once, several keys naming one segment, as
  /// ExecuTorch's NamedDataStore does.
  PteBuilder& dedupe_ptd_buffers(bool on = true) { dedupe_ptd_ = on; return *this; }

  /// Write an extended header even when the .pte has no segment data.
  PteBuilder& force_extended_header(bool on = true) { force_header_ = on; return *this; }
  /// Always produce a .ptd (possibly with no entries).
  PteBuilder& force_ptd(bool on = true) { force_ptd_ = on; return *this; }
  /// Leave Program.execution_plan out (hostile files).
  PteBuilder& omit_execution_plan(bool on = true) { omit_plans_ = on; return *this; }
  /// The constant segment: `data` becomes a .pte segment and Tensor.data_buffer_idx k
  /// reads at offsets[k] (offsets[0] is the placeholder for non-constants).
  PteBuilder& set_constant_segment(Bytes data, std::vector<std::uint64_t> offsets) {
    constant_data_ = std::move(data);
    constant_offsets_ = std::move(offsets);
    return *this;
  }
  /// Extra raw segment in the .pte with no referrer (returns its index).
  std::uint32_t add_raw_pte_segment(Bytes bytes);

  BuiltProgram build() const;

 private:
  struct Named {
    std::string key;
    Bytes bytes;
    Where where;
    std::optional<TensorDesc> layout;
  };
  std::vector<MethodDesc> methods_;
  std::vector<Named> named_;
  std::vector<Bytes> raw_segments_;
  Bytes constant_data_;
  std::vector<std::uint64_t> constant_offsets_;
  bool force_header_ = false, force_ptd_ = false, omit_plans_ = false, dedupe_ptd_ = false;
};

/// The absolute file offset of the root table (u32 at 0) and of the segment
/// base recorded in a built file's header, for corruption tests.
std::uint64_t pte_segment_base(const Bytes& pte);
std::uint64_t ptd_segment_base(const Bytes& ptd);

/// Wraps a finished FlatTensor flatbuffer (identifier FT01) into a .ptd: FH01
/// header spliced at byte 8 (padded to 48), segments at 128-byte alignment in
/// the order given (their relative offsets are segment_offsets(sizes)).
Bytes pack_ptd(const std::uint8_t* flatbuffer, std::size_t size, const std::vector<Bytes>& segments);
/// Relative offsets the packers give to segments of these sizes.
std::vector<std::uint64_t> segment_offsets(const std::vector<std::size_t>& sizes);

/// Little-endian patch helpers for corruption tests.
void put_u32(Bytes& b, std::size_t off, std::uint32_t v);
void put_u64(Bytes& b, std::size_t off, std::uint64_t v);
std::uint32_t get_u32(const Bytes& b, std::size_t off);
std::uint64_t get_u64(const Bytes& b, std::size_t off);

/// Reads a whole file (throws std::runtime_error when it cannot).
Bytes read_file(const std::string& path);

/// Raw bytes of float32 values (e.g. a fake model library's weights blob).
Bytes float_bytes(const std::vector<float>& values);


}  // namespace aoti_cuda_test
