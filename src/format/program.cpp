// Program: opens, verifies and describes ExecuTorch .pte/.ptd files.
//
// Order of work (docs/pte-format.md §8.5): container header checks (P1-P7,
// D1-D2) in overflow-checked u64 arithmetic, an aligned view of the
// flatbuffer bytes, the FlatBuffers Verifier (P8, D3), root checks (P9, D4),
// then semantic checks (S1-S9, D5, M1) on every field this reader touches, and
// finally the method descriptions and CUDA delegate blob resolution
// (docs/executorch-cuda-delegate.md §1-§4.2).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda_schema/flat_tensor_generated.h"
#include "aoti_cuda_schema/program_generated.h"
#include "format/checked.hpp"
#include "format/mapped_file.hpp"

namespace aoti_cuda {

namespace et = executorch_flatbuffer;
namespace ft = flat_tensor_flatbuffer;

const char* to_string(ExporterGeneration g) noexcept {
  switch (g) {
    case ExporterGeneration::kSeed: return "seed (so_blob in .ptd, weights inside the .so)";
    case ExporterGeneration::kMethodKeys: return "executorch-1.1..1.3 (<method>_so_blob / <method>_weights_blob)";
    case ExporterGeneration::kHashKeys: return "executorch-1.4+ (sha256 keys in the delegate payload)";
  }
  return "unknown";
}

namespace {

constexpr std::uint64_t kHeadBytes = 64;
constexpr std::uint64_t kFlatbufferMaxSize = 0x7fffffffULL;  // FlatBuffers 32-bit limit (2^31-1)
constexpr std::size_t kMaxRank = 16;
constexpr const char* kCudaBackend = "CudaBackend";
constexpr const char* kDefaultPtdName = "aoti_cuda_blob.ptd";

[[noreturn]] void invalid(const std::string& file, const std::string& check, const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, file + ": " + check + " failed: " + detail);
}

std::string printable(const std::uint8_t* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string quoted(std::string_view s) {
  return "\"" + printable(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()) + "\"";
}

std::string u64s(std::uint64_t v) { return std::to_string(v); }

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
void ensure_aligned(FileData& fd, std::uint64_t size) {
  const auto addr = reinterpret_cast<std::uintptr_t>(fd.bytes.data);
  fd.fb_size = static_cast<std::size_t>(size);
  if (addr % 16 == 0) {
    fd.fb = fd.bytes.data;
    return;
  }
  constexpr std::size_t kAlign = 64;
  fd.aligned_storage.reset(new std::uint8_t[fd.fb_size + kAlign]);
  std::uint8_t* raw = fd.aligned_storage.get();
  std::uint8_t* aligned =
      raw + ((kAlign - reinterpret_cast<std::uintptr_t>(raw) % kAlign) % kAlign);
  std::memcpy(aligned, fd.bytes.data, fd.fb_size);
  fd.fb = aligned;
}

// Element i of a vector of 8-byte scalars. The FlatBuffers verifier checks a
// vector's length prefix for 4-byte alignment only, so in a hostile file such
// a vector's elements can sit at 4 mod 8: read them without assuming more
// (found by tests/fuzz, reproducer in tests/fuzz/regressions).
template <typename T>
T scalar_at(const flatbuffers::Vector<T>* v, flatbuffers::uoffset_t i) {
  static_assert(sizeof(T) == 8, "only 8-byte elements can be misaligned after verification");
  T out;
  std::memcpy(&out, v->Data() + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
  return out;
}

flatbuffers::Verifier::Options verifier_options() {
  flatbuffers::Verifier::Options o;
  o.max_depth = 64;
  o.max_tables = 1000000;
  o.check_alignment = true;
  o.check_nested_flatbuffers = true;
  return o;
}

/// Bytes of a segment: [base + offset, + size), checked against the segment
/// area (S7 / D5). `what` names the referring field for the message.
ByteView segment_bytes(const FileData& fd, std::uint64_t offset, std::uint64_t size, const std::string& what) {
  if (size == 0) return ByteView{fd.bytes.data, 0};
  if (!fd.has_segment_area) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " refers to " + u64s(size) + " bytes of segment data but the file has no segment area "
                   "(no extended header / segment_base_offset 0)");
  }
  std::uint64_t rel_end = 0;
  if (!format::add_u64(offset, size, &rel_end)) {
    invalid(fd.label, "S7 (segment bounds)", what + " offset " + u64s(offset) + " + size " + u64s(size) + " overflows");
  }
  if (fd.segment_size_known && rel_end > fd.segment_data_size) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " ends at relative offset " + u64s(rel_end) + " past segment_data_size " +
                u64s(fd.segment_data_size));
  }
  std::uint64_t abs_start = 0, abs_end = 0;
  if (!format::add_u64(fd.segment_base, offset, &abs_start) || !format::add_u64(abs_start, size, &abs_end) ||
      abs_end > fd.bytes.size) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " [base " + u64s(fd.segment_base) + " + offset " + u64s(offset) + ", size " + u64s(size) +
                "] lies past the end of the " + u64s(fd.bytes.size) + "-byte file");
  }
  return ByteView{fd.bytes.data + abs_start, static_cast<std::size_t>(size)};
}

// ---------------------------------------------------------------------------
// Container headers

/// P1-P7 (+ the size limit of P8) for a .pte; leaves fd.fb set up.
void parse_pte_header(FileData& fd) {
  const std::uint8_t* d = fd.bytes.data;
  const std::uint64_t F = fd.bytes.size;
  if (F < kHeadBytes) {
    invalid(fd.label, "P1 (minimum size)",
            "file is " + u64s(F) + " bytes; a .pte needs at least 64 (empty or truncated file?)");
  }
  if (std::memcmp(d + 4, "ET12", 4) != 0) {
    if (d[4] == 'E' && d[5] == 'T') {
      invalid(fd.label, "P2 (file identifier)",
              "identifier \"" + printable(d + 4, 4) + "\" at offset 4 is an incompatible program version "
              "(this reader supports \"ET12\")");
    }
    invalid(fd.label, "P2 (file identifier)",
            "bytes 4..7 are \"" + printable(d + 4, 4) + "\", not \"ET12\": not an ExecuTorch program");
  }
  std::uint64_t program_size = F;
  const bool has_header = std::memcmp(d + 8, "eh00", 4) == 0;
  if (!has_header && d[8] == 'e' && d[9] == 'h') {
    invalid(fd.label, "P3 (extended header version)",
            "extended header magic \"" + printable(d + 8, 4) + "\" at offset 8 is not the supported \"eh00\"");
  }
  if (has_header) {
    const std::uint64_t hlen = format::read_u32(d + 12);
    program_size = format::read_u64(d + 16);
    const std::uint64_t base = format::read_u64(d + 24);
    const std::uint64_t data_size = hlen >= 32 ? format::read_u64(d + 32) : 0;
    if (hlen < 24) invalid(fd.label, "P4 (extended header)", "header_length " + u64s(hlen) + " at offset 12 is < 24");
    if (hlen < 32) {
      invalid(fd.label, "P4 (extended header)",
              "header_length " + u64s(hlen) + " at offset 12 is between 24 and 32 (malformed)");
    }
    if (8 + hlen > program_size) {
      invalid(fd.label, "P4 (extended header)",
              "program_size " + u64s(program_size) + " at offset 16 is smaller than the header (8 + " + u64s(hlen) + ")");
    }
    if (program_size > F) {
      invalid(fd.label, "P4 (extended header)",
              "program_size " + u64s(program_size) + " at offset 16 is past the end of the " + u64s(F) +
                  "-byte file (truncated file?)");
    }
    if (program_size >= kFlatbufferMaxSize) {
      invalid(fd.label, "P4 (extended header)", "program_size " + u64s(program_size) + " exceeds the 2^31-1 flatbuffer limit");
    }
    if (base != 0) {
      if (base < program_size) {
        invalid(fd.label, "P5 (segment base)",
                "segment_base_offset " + u64s(base) + " at offset 24 overlaps the flatbuffer (program_size " +
                    u64s(program_size) + ")");
      }
      if (base > F) {
        invalid(fd.label, "P5 (segment base)",
                "segment_base_offset " + u64s(base) + " at offset 24 is past the end of the " + u64s(F) + "-byte file");
      }
      std::uint64_t end = 0;
      if (!format::add_u64(base, data_size, &end)) {
        invalid(fd.label, "P5 (segment base)",
                "segment_base_offset " + u64s(base) + " + segment_data_size " + u64s(data_size) + " overflows");
      }
      if (end > F) {
        invalid(fd.label, "P5 (segment base)",
                "segment data [" + u64s(base) + ", " + u64s(end) + ") (segment_data_size at offset 32) is past the end of the " +
                    u64s(F) + "-byte file (truncated file?)");
      }
      fd.has_segment_area = true;
      fd.segment_base = base;
      fd.segment_size_known = true;
      fd.segment_data_size = data_size;
    } else if (data_size != 0) {
      invalid(fd.label, "P5 (segment base)",
              "segment_data_size " + u64s(data_size) + " at offset 32 is non-zero but segment_base_offset is 0");
    }
    fd.header_end = 8 + hlen;
  } else if (F >= kFlatbufferMaxSize) {
    invalid(fd.label, "P6 (size)", "file of " + u64s(F) + " bytes exceeds the 2^31-1 flatbuffer limit");
  }
  ensure_aligned(fd, program_size);
  const std::uint64_t root = format::read_u32(d);
  if (root < fd.header_end || root + 4 > program_size) {
    invalid(fd.label, "P9 (root offset)",
            "root table offset " + u64s(root) + " at offset 0 points " +
                (root < fd.header_end ? "into the file header" : "past the flatbuffer") + " (valid: " +
                u64s(fd.header_end) + ".." + u64s(program_size - 4) + ")");
  }
}

/// D1-D2 for a .ptd; leaves fd.fb set up.
void parse_ptd_header(FileData& fd) {
  const std::uint8_t* d = fd.bytes.data;
  const std::uint64_t F = fd.bytes.size;
  if (F < kHeadBytes) {
    invalid(fd.label, "D1 (minimum size)", "file is " + u64s(F) + " bytes; a .ptd needs at least 64 (empty or truncated file?)");
  }
  if (std::memcmp(d + 4, "FT01", 4) != 0) {
    invalid(fd.label, "D1 (file identifier)",
            "bytes 4..7 are \"" + printable(d + 4, 4) + "\", not \"FT01\": not an ExecuTorch data (.ptd) file");
  }
  if (std::memcmp(d + 8, "FH01", 4) != 0) {
    invalid(fd.label, "D1 (header magic)", "magic \"" + printable(d + 8, 4) + "\" at offset 8 is not \"FH01\"");
  }
  const std::uint64_t hlen = format::read_u32(d + 12);
  const std::uint64_t fb_off = format::read_u64(d + 16);
  const std::uint64_t fb_size = format::read_u64(d + 24);
  const std::uint64_t base = format::read_u64(d + 32);
  const std::uint64_t data_size = format::read_u64(d + 40);
  if (hlen < 40) invalid(fd.label, "D1 (header length)", "header_length " + u64s(hlen) + " at offset 12 is < 40");
  if (fb_off < hlen) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer_offset " + u64s(fb_off) + " at offset 16 is smaller than header_length " + u64s(hlen));
  }
  std::uint64_t fb_end = 0;
  if (!format::add_u64(fb_off, fb_size, &fb_end)) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer_offset " + u64s(fb_off) + " + flatbuffer_size " + u64s(fb_size) + " (offset 24) overflows");
  }
  if (fb_end > F) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer end " + u64s(fb_end) + " (flatbuffer_size at offset 24) is past the end of the " + u64s(F) +
                "-byte file (truncated file?)");
  }
  if (fb_end >= kFlatbufferMaxSize) {
    invalid(fd.label, "D2 (header extents)", "flatbuffer of " + u64s(fb_end) + " bytes exceeds the 2^31-1 limit");
  }
  if (base != 0 || data_size != 0) {
    if (base < fb_end) {
      invalid(fd.label, "D2 (header extents)",
              "segment_base_offset " + u64s(base) + " at offset 32 overlaps the flatbuffer (ends at " + u64s(fb_end) + ")");
    }
    std::uint64_t end = 0;
    if (!format::add_u64(base, data_size, &end)) {
      invalid(fd.label, "D2 (header extents)",
              "segment_base_offset " + u64s(base) + " + segment_data_size " + u64s(data_size) + " (offset 40) overflows");
    }
    if (end > F) {
      invalid(fd.label, "D2 (header extents)",
              "segment data [" + u64s(base) + ", " + u64s(end) + ") (segment_data_size at offset 40) is past the end of the " +
                  u64s(F) + "-byte file (truncated file?)");
    }
  }
  fd.has_segment_area = true;
  fd.segment_base = base;
  fd.segment_size_known = true;
  fd.segment_data_size = data_size;
  fd.header_end = 8 + fb_off;
  ensure_aligned(fd, fb_end);
  const std::uint64_t root = format::read_u32(d);
  if (root < fd.header_end || root + 4 > fb_end) {
    invalid(fd.label, "D4 (root offset)",
            "root table offset " + u64s(root) + " at offset 0 points " +
                (root < fd.header_end ? "into the file header" : "past the flatbuffer") + " (valid: " +
                u64s(fd.header_end) + ".." + u64s(fb_end - 4) + ")");
  }
}

// ---------------------------------------------------------------------------
// Tensors

/// S4 checks (also D5 layouts) on sizes/dim_order; returns nbytes.
std::uint64_t check_shape(const std::string& file, const std::string& where, int scalar_type,
                          const flatbuffers::Vector<int32_t>* sizes, const flatbuffers::Vector<uint8_t>* dim_order,
                          const char* check) {
  if (!is_valid_dtype(scalar_type)) {
    invalid(file, check, where + ": scalar_type " + std::to_string(scalar_type) + " is not a known dtype (0..29)");
  }
  if (sizes == nullptr) invalid(file, check, where + ": sizes is missing");
  if (dim_order == nullptr) invalid(file, check, where + ": dim_order is missing");
  const std::size_t rank = sizes->size();
  if (rank > kMaxRank) invalid(file, check, where + ": rank " + std::to_string(rank) + " exceeds the limit of 16");
  if (dim_order->size() != rank) {
    invalid(file, check,
            where + ": dim_order has " + std::to_string(dim_order->size()) + " entries but rank is " + std::to_string(rank));
  }
  bool seen[kMaxRank] = {};
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned dim = dim_order->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (dim >= rank || seen[dim]) {
      invalid(file, check, where + ": dim_order is not a permutation of 0.." + std::to_string(rank - 1) +
                               " (entry " + std::to_string(i) + " = " + std::to_string(dim) + ")");
    }
    seen[dim] = true;
  }
  std::uint64_t n = element_size(scalar_type);
  for (std::size_t i = 0; i < rank; ++i) {
    const int32_t s = sizes->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (s < 0) invalid(file, check, where + ": size[" + std::to_string(i) + "] = " + std::to_string(s) + " is negative");
    if (!format::mul_u64(n, static_cast<std::uint64_t>(s), &n)) {
      invalid(file, check, where + ": nbytes overflows (sizes product * element size)");
    }
  }
  return n;
}

/// S5/S6: a tensor with data_buffer_idx > 0 has initial data in the .pte:
/// constants in the constant segment (or the deprecated constant_buffer),
/// memory-planned tensors in mutable_data_segments[0]. Both must be in bounds.
void check_tensor_data(const et::Program* prog, const std::string& F, const std::string& vw, const et::Tensor* t,
                       std::uint64_t nbytes) {
  const std::uint32_t idx = t->data_buffer_idx();
  const auto* segs = prog->segments();
  auto in_segment = [&](const char* check, std::uint32_t seg_index, std::uint64_t off, const std::string& what) {
    if (segs == nullptr || seg_index >= segs->size()) {
      invalid(F, check, vw + ": " + what + " segment_index " + std::to_string(seg_index) + " is out of range");
    }
    std::uint64_t end = 0;
    const std::uint64_t seg_size = segs->Get(seg_index)->size();
    if (!format::add_u64(off, nbytes, &end) || end > seg_size) {
      invalid(F, check, vw + ": data_buffer_idx " + std::to_string(idx) + " data [" + u64s(off) + ", +" + u64s(nbytes) +
                            ") exceeds its " + what + " segment of " + u64s(seg_size) + " bytes");
    }
  };
  if (t->allocation_info() == nullptr) {
    const et::SubsegmentOffsets* cs = prog->constant_segment();
    const auto* offs = cs ? cs->offsets() : nullptr;
    if (offs != nullptr && offs->size() > 1) {
      if (idx >= offs->size()) {
        invalid(F, "S5 (constants)", vw + ": data_buffer_idx " + std::to_string(idx) + " is out of range (" +
                                         std::to_string(offs->size()) + " constant offsets)");
      }
      in_segment("S5 (constants)", cs->segment_index(), scalar_at(offs, idx), "constant");
      return;
    }
    const auto* cb = prog->constant_buffer();
    if (cb != nullptr && idx < cb->size()) {
      const auto* storage = cb->Get(idx)->storage();
      if (storage == nullptr || storage->size() < nbytes) {
        invalid(F, "S5 (constants)", vw + ": constant_buffer[" + std::to_string(idx) + "] holds fewer than " + u64s(nbytes) + " bytes");
      }
      return;
    }
    invalid(F, "S5 (constants)", vw + ": data_buffer_idx " + std::to_string(idx) + " refers to constant data the program does not have");
  }
  const auto* mds = prog->mutable_data_segments();
  if (mds == nullptr || mds->size() == 0 || mds->Get(0)->offsets() == nullptr) {
    invalid(F, "S6 (mutable data)", vw + ": data_buffer_idx " + std::to_string(idx) + " needs mutable_data_segments[0], which is missing");
  }
  const et::SubsegmentOffsets* md = mds->Get(0);
  if (idx >= md->offsets()->size()) {
    invalid(F, "S6 (mutable data)", vw + ": data_buffer_idx " + std::to_string(idx) + " is out of range (" +
                                        std::to_string(md->offsets()->size()) + " mutable offsets)");
  }
  in_segment("S6 (mutable data)", md->segment_index(), scalar_at(md->offsets(), idx), "mutable data");
}

ValueKind kind_of(et::KernelTypes t) {
  switch (t) {
    case et::KernelTypes::Null: return ValueKind::kNone;
    case et::KernelTypes::Int: return ValueKind::kInt;
    case et::KernelTypes::Double: return ValueKind::kDouble;
    case et::KernelTypes::Bool: return ValueKind::kBool;
    case et::KernelTypes::String: return ValueKind::kString;
    case et::KernelTypes::Tensor: return ValueKind::kTensor;
    default: return ValueKind::kList;
  }
}

struct NamedEntry {
  ByteView bytes;
  std::string file;
  bool in_ptd = false;
  bool has_layout = false;  // .ptd entries only: a TensorLayout is present
  int layout_dtype = 0;
  std::vector<int64_t> layout_sizes;
  std::vector<std::uint8_t> layout_dim_order;
};

}  // namespace

// ---------------------------------------------------------------------------

struct Program::Impl {
  std::string pte_path;
  std::vector<std::string> data_paths;
  FileData pte;
  std::vector<std::unique_ptr<FileData>> ptds;  // stable addresses
  std::vector<MethodSpec> methods;
  std::map<std::string, NamedEntry, std::less<>> named;  // M1: unique across files
  std::vector<NamedDataInfo> named_order;
  bool require_data = true;

  void load();
  void load_ptd(FileData& fd);
  void add_named(const std::string& key, ByteView bytes, const std::string& file, const std::string& check,
                 NamedEntry* ptd_entry = nullptr);
  void check_external(const std::string& vw, const et::Tensor* t, std::vector<std::string>& reasons);
  void build_methods(const et::Program* prog);
  void resolve_delegate(MethodSpec& m, DelegateSpec& ds, const et::Program* prog, const et::BackendDelegate* d);
  std::optional<NamedEntry> lookup(std::string_view key) const {
    auto it = named.find(key);
    if (it == named.end()) return std::nullopt;
    return it->second;
  }
};

void Program::Impl::add_named(const std::string& key, ByteView bytes, const std::string& file,
                              const std::string& check, NamedEntry* ptd_entry) {
  if (key.empty()) invalid(file, check, "named data key is empty");
  if (key.find('\0') != std::string::npos) invalid(file, check, "named data key " + quoted(key) + " contains a NUL byte");
  auto it = named.find(key);
  if (it != named.end()) {
    const std::string where = it->second.file == file ? "twice in this file" : "also in " + it->second.file;
    throw Error(ErrorCode::kInvalidProgram,
                file + ": M1 (unique named data keys) failed: key " + quoted(key) + " is defined " + where +
                    "; keys must be unique across the .pte and all .ptd files (a duplicate would make it "
                    "ambiguous which blob the delegate loads)");
  }
  NamedEntry entry = ptd_entry ? std::move(*ptd_entry) : NamedEntry{};
  entry.bytes = bytes;
  entry.file = file;
  named.emplace(key, std::move(entry));
  named_order.push_back(NamedDataInfo{key, bytes.size, file});
}

void Program::Impl::load_ptd(FileData& fd) {
  parse_ptd_header(fd);
  flatbuffers::Verifier v(fd.fb, fd.fb_size, verifier_options());
  if (!ft::VerifyFlatTensorBuffer(v)) {
    invalid(fd.label, "D3 (flatbuffer verification)",
            "the FlatTensor flatbuffer [0, " + u64s(fd.fb_size) + ") is malformed (an offset, length or table is out of bounds)");
  }
  const ft::FlatTensor* root = ft::GetFlatTensor(fd.fb);
  if (root->version() != 0) {
    invalid(fd.label, "D4 (version)", "FlatTensor.version is " + std::to_string(root->version()) + ", expected 0");
  }
  const auto* segs = root->segments();
  const auto* nd = root->named_data();
  if (segs == nullptr) invalid(fd.label, "D4 (required fields)", "FlatTensor.segments is missing");
  if (nd == nullptr) invalid(fd.label, "D4 (required fields)", "FlatTensor.named_data is missing");
  for (flatbuffers::uoffset_t i = 0; i < nd->size(); ++i) {
    const ft::NamedData* e = nd->Get(i);
    const std::string where = "named_data[" + std::to_string(i) + "]";
    if (e == nullptr) invalid(fd.label, "D5 (named data)", where + " is null");
    if (e->key() == nullptr) invalid(fd.label, "D5 (named data)", where + ".key is missing at offset " + u64s(fd.fb_offset_of(e)));
    const std::string key = e->key()->str();
    if (e->segment_index() >= segs->size()) {
      invalid(fd.label, "D5 (named data)",
              where + " (" + quoted(key) + ") segment_index " + std::to_string(e->segment_index()) + " is out of range (" +
                  std::to_string(segs->size()) + " segments) at offset " + u64s(fd.fb_offset_of(e)));
    }
    const ft::DataSegment* seg = segs->Get(e->segment_index());
    if (seg == nullptr) invalid(fd.label, "D5 (named data)", "segments[" + std::to_string(e->segment_index()) + "] is null");
    ByteView bytes = segment_bytes(fd, seg->offset(), seg->size(), where + " (" + quoted(key) + ")");
    NamedEntry entry;
    entry.in_ptd = true;
    if (const ft::TensorLayout* layout = e->tensor_layout()) {
      const std::uint64_t nbytes = check_shape(fd.label, where + ".tensor_layout", static_cast<int>(layout->scalar_type()),
                                               layout->sizes(), layout->dim_order(), "D5 (tensor layout)");
      if (nbytes > seg->size()) {
        invalid(fd.label, "D5 (tensor layout)",
                where + ": layout needs " + u64s(nbytes) + " bytes but the segment holds " + u64s(seg->size()));
      }
      entry.has_layout = true;
      entry.layout_dtype = static_cast<int>(layout->scalar_type());
      for (auto v : *layout->sizes()) entry.layout_sizes.push_back(v);
      for (auto v : *layout->dim_order()) entry.layout_dim_order.push_back(v);
    }
    add_named(key, bytes, fd.label, "D5 (named data)", &entry);
  }
}

void Program::Impl::load() {
  parse_pte_header(pte);
  {
    flatbuffers::Verifier v(pte.fb, pte.fb_size, verifier_options());
    if (!et::VerifyProgramBuffer(v)) {
      invalid(pte.label, "P8 (flatbuffer verification)",
              "the Program flatbuffer [0, " + u64s(pte.fb_size) +
                  ") is malformed (an offset, length, alignment or table is out of bounds)");
    }
  }
  const et::Program* prog = et::GetProgram(pte.fb);
  const std::string& F = pte.label;

  // S7: segments.
  const auto* segs = prog->segments();
  if (segs != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < segs->size(); ++i) {
      const et::DataSegment* s = segs->Get(i);
      segment_bytes(pte, s->offset(), s->size(), "segments[" + std::to_string(i) + "]");
    }
  }
  // S9: PTE named data.
  if (const auto* nd = prog->named_data()) {
    if (segs == nullptr) invalid(F, "S9 (named data)", "Program.named_data is present but Program.segments is missing");
    for (flatbuffers::uoffset_t i = 0; i < nd->size(); ++i) {
      const et::NamedData* e = nd->Get(i);
      const std::string where = "named_data[" + std::to_string(i) + "]";
      if (e->key() == nullptr) invalid(F, "S9 (named data)", where + ".key is missing at offset " + u64s(pte.fb_offset_of(e)));
      const std::string key = e->key()->str();
      if (e->segment_index() >= segs->size()) {
        invalid(F, "S9 (named data)",
                where + " (" + quoted(key) + ") segment_index " + std::to_string(e->segment_index()) + " is out of range (" +
                    std::to_string(segs->size()) + " segments) at offset " + u64s(pte.fb_offset_of(e)));
      }
      const et::DataSegment* s = segs->Get(e->segment_index());
      add_named(key, segment_bytes(pte, s->offset(), s->size(), where), F, "S9 (named data)");
    }
  }
  // S5 (the parts that do not depend on tensors).
  if (const auto* cs = prog->constant_segment()) {
    const auto* offs = cs->offsets();
    if (offs != nullptr && offs->size() > 1) {
      if (segs == nullptr || cs->segment_index() >= segs->size()) {
        invalid(F, "S5 (constant segment)",
                "constant_segment.segment_index " + std::to_string(cs->segment_index()) + " is out of range");
      }
      if (prog->constant_buffer() != nullptr && prog->constant_buffer()->size() > 0) {
        invalid(F, "S5 (constant segment)", "both constant_buffer and constant_segment.offsets are non-empty");
      }
    }
  }
  for (auto& p : ptds) load_ptd(*p);
  build_methods(prog);
}

void Program::Impl::build_methods(const et::Program* prog) {
  const std::string& F = pte.label;
  const auto* plans = prog->execution_plan();
  if (plans == nullptr) invalid(F, "S1 (execution plan)", "Program.execution_plan is missing");
  std::set<std::string> names;
  for (flatbuffers::uoffset_t pi = 0; pi < plans->size(); ++pi) {
    const et::ExecutionPlan* plan = plans->Get(pi);
    std::string where = "execution_plan[" + std::to_string(pi) + "]";
    if (plan->name() == nullptr || plan->name()->size() == 0) {
      invalid(F, "S1 (method names)", where + ".name is missing or empty at offset " + u64s(pte.fb_offset_of(plan)));
    }
    MethodSpec m;
    m.name = plan->name()->str();
    if (!names.insert(m.name).second) {
      invalid(F, "S1 (method names)", "method name " + quoted(m.name) + " appears more than once");
    }
    where = "method " + quoted(m.name);
    const auto* values = plan->values();
    const auto* inputs = plan->inputs();
    const auto* outputs = plan->outputs();
    const auto* chains = plan->chains();
    const auto* delegates = plan->delegates();
    const auto* nbs = plan->non_const_buffer_sizes();
    const auto* ops = plan->operators();
    auto require = [&](const void* p, const char* field) {
      if (p == nullptr) invalid(F, "S2 (plan fields)", where + ": " + field + " is missing at offset " + u64s(pte.fb_offset_of(plan)));
    };
    require(values, "values");
    require(inputs, "inputs");
    require(outputs, "outputs");
    require(chains, "chains");
    require(delegates, "delegates");
    require(nbs, "non_const_buffer_sizes");
    if (chains->size() == 0) invalid(F, "S2 (plan fields)", where + ": chains is empty");
    for (flatbuffers::uoffset_t i = 0; i < nbs->size(); ++i) {
      if (scalar_at(nbs, i) < 0) {
        invalid(F, "S2 (plan fields)", where + ": non_const_buffer_sizes[" + std::to_string(i) + "] = " +
                                           std::to_string(scalar_at(nbs, i)) + " is negative");
      }
    }
    const std::int64_t nvalues = values->size();
    auto check_index = [&](std::int64_t idx, const std::string& field, bool allow_minus_one = false) {
      if (allow_minus_one && idx == -1) return;
      if (idx < 0 || idx >= nvalues) {
        invalid(F, "S2 (value index)", where + ": " + field + " = " + std::to_string(idx) + " is out of range (" +
                                           std::to_string(nvalues) + " values)");
      }
    };
    std::vector<std::string> reasons;  // why the method cannot run (filled below)
    // S3/S4: values.
    for (flatbuffers::uoffset_t vi = 0; vi < values->size(); ++vi) {
      const et::EValue* ev = values->Get(vi);
      const std::string vw = where + " values[" + std::to_string(vi) + "]";
      const auto tag = static_cast<int>(ev->val_type());
      if (tag < 1 || tag > 11) {
        invalid(F, "S3 (value type)", vw + ": union tag " + std::to_string(tag) +
                                          (tag == 0 ? " (NONE)" : " (unknown)") + " at offset " + u64s(pte.fb_offset_of(ev)));
      }
      // A Null value needs no payload table (the runtime accepts it without one).
      if (ev->val() == nullptr && ev->val_type() != et::KernelTypes::Null) {
        invalid(F, "S3 (value type)", vw + ": union tag " + std::to_string(tag) + " has no value at offset " + u64s(pte.fb_offset_of(ev)));
      }
      ValueSpec vs;
      vs.kind = kind_of(ev->val_type());
      vs.value_index = static_cast<int32_t>(vi);
      if (const et::Tensor* t = ev->val_as_Tensor()) {
        const std::uint64_t nbytes = check_shape(F, vw + " (tensor at offset " + u64s(pte.fb_offset_of(t)) + ")",
                                                 static_cast<int>(t->scalar_type()), t->sizes(), t->dim_order(), "S4 (tensor)");
        if (t->storage_offset() != 0) invalid(F, "S4 (tensor)", vw + ": storage_offset " + std::to_string(t->storage_offset()) + " is not 0");
        const int dyn = static_cast<int>(t->shape_dynamism());
        if (dyn != 0 && dyn != 1) {
          invalid(F, "S4 (tensor)", vw + ": shape_dynamism " + std::to_string(dyn) +
                                        (dyn == 2 ? " (DYNAMIC_UNBOUND) is not supported" : " is not a known value"));
        }
        if (const et::ExtraTensorInfo* x = t->extra_tensor_info()) {
          const int loc = static_cast<int>(x->location());
          if (loc != 0 && loc != 1) invalid(F, "S4 (tensor)", vw + ": extra_tensor_info.location " + std::to_string(loc) + " is not a known value");
          if (loc == 1 && (x->fully_qualified_name() == nullptr || x->fully_qualified_name()->size() == 0)) {
            invalid(F, "S4 (tensor)", vw + ": EXTERNAL tensor without a fully_qualified_name");
          }
          const int dev = static_cast<int>(x->device_type());
          if (dev != 0 && dev != 1) invalid(F, "S4 (tensor)", vw + ": extra_tensor_info.device_type " + std::to_string(dev) + " is not a known value");
        }
        if (const et::AllocationDetails* a = t->allocation_info()) {
          const std::uint64_t mid = a->memory_id();
          if (mid < 1 || mid >= nbs->size()) {
            invalid(F, "S4 (tensor)", vw + ": allocation_info.memory_id " + u64s(mid) + " is out of range (1.." +
                                          std::to_string(static_cast<int64_t>(nbs->size()) - 1) + ")");
          }
          const std::uint64_t off = static_cast<std::uint64_t>(a->memory_offset_low()) |
                                    (static_cast<std::uint64_t>(a->memory_offset_high()) << 32);
          std::uint64_t end = 0;
          if (!format::add_u64(off, nbytes, &end) || end > static_cast<std::uint64_t>(scalar_at(nbs, static_cast<flatbuffers::uoffset_t>(mid)))) {
            invalid(F, "S4 (tensor)", vw + ": planned memory [" + u64s(off) + ", +" + u64s(nbytes) + ") exceeds buffer " +
                                          u64s(mid) + " of " + std::to_string(scalar_at(nbs, static_cast<flatbuffers::uoffset_t>(mid))) + " bytes");
          }
        }
        if (t->data_buffer_idx() > 0) check_tensor_data(prog, F, vw, t, nbytes);
        check_external(vw, t, reasons);
        vs.tensor.dtype = static_cast<DType>(t->scalar_type());
        for (auto s : *t->sizes()) vs.tensor.sizes.push_back(s);
        for (auto d : *t->dim_order()) vs.tensor.dim_order.push_back(d);
        vs.tensor.dynamic = dyn == 1;
      } else if (const et::TensorList* tl = ev->val_as_TensorList()) {
        if (tl->items() != nullptr) {
          for (auto idx : *tl->items()) check_index(idx, "TensorList item in values[" + std::to_string(vi) + "]");
        }
      } else if (const et::OptionalTensorList* ol = ev->val_as_OptionalTensorList()) {
        if (ol->items() != nullptr) {
          for (auto idx : *ol->items()) check_index(idx, "OptionalTensorList item in values[" + std::to_string(vi) + "]", true);
        }
      }
      m.values.push_back(std::move(vs));
    }
    for (flatbuffers::uoffset_t i = 0; i < inputs->size(); ++i) {
      check_index(inputs->Get(i), "inputs[" + std::to_string(i) + "]");
      m.inputs.push_back(m.values[static_cast<std::size_t>(inputs->Get(i))]);
    }
    for (flatbuffers::uoffset_t i = 0; i < outputs->size(); ++i) {
      check_index(outputs->Get(i), "outputs[" + std::to_string(i) + "]");
      m.outputs.push_back(m.values[static_cast<std::size_t>(outputs->Get(i))]);
    }
    // S8: delegates (structure; blob resolution below for CudaBackend).
    for (flatbuffers::uoffset_t di = 0; di < delegates->size(); ++di) {
      const et::BackendDelegate* d = delegates->Get(di);
      const std::string dw = where + " delegates[" + std::to_string(di) + "]";
      if (d->id() == nullptr || d->id()->size() == 0) invalid(F, "S8 (delegate)", dw + ": id is missing or empty at offset " + u64s(pte.fb_offset_of(d)));
      const et::BackendDelegateDataReference* ref = d->processed();
      if (ref == nullptr) invalid(F, "S8 (delegate)", dw + ": processed is missing at offset " + u64s(pte.fb_offset_of(d)));
      const int loc = static_cast<int>(ref->location());
      if (loc == 0) {
        const auto* inl = prog->backend_delegate_data();
        if (inl == nullptr || ref->index() >= inl->size()) {
          invalid(F, "S8 (delegate)", dw + ": INLINE processed index " + std::to_string(ref->index()) + " is out of range (" +
                                          std::to_string(inl ? inl->size() : 0) + " backend_delegate_data entries)");
        }
        if (inl->Get(ref->index())->data() == nullptr) {
          invalid(F, "S8 (delegate)", dw + ": backend_delegate_data[" + std::to_string(ref->index()) + "].data is missing");
        }
      } else if (loc == 1) {
        const auto* s = prog->segments();
        if (s == nullptr || ref->index() >= s->size()) {
          invalid(F, "S8 (delegate)", dw + ": SEGMENT processed index " + std::to_string(ref->index()) + " is out of range (" +
                                          std::to_string(s ? s->size() : 0) + " segments)");
        }
      } else {
        invalid(F, "S8 (delegate)", dw + ": processed.location " + std::to_string(loc) + " is not INLINE(0) or SEGMENT(1)");
      }
      if (const auto* specs = d->compile_specs()) {
        for (flatbuffers::uoffset_t k = 0; k < specs->size(); ++k) {
          if (specs->Get(k)->key() == nullptr || specs->Get(k)->value() == nullptr) {
            invalid(F, "S8 (delegate)", dw + ": compile_specs[" + std::to_string(k) + "] key or value is missing");
          }
        }
      }
    }
    // Instructions (S2 indices) and the plan.
    std::map<int32_t, int> delegate_slot;  // plan delegate index -> MethodSpec::delegates index
    std::set<std::string> other_backends, other_ops;
    for (flatbuffers::uoffset_t ci = 0; ci < chains->size(); ++ci) {
      const et::Chain* chain = chains->Get(ci);
      const std::string cw = "chains[" + std::to_string(ci) + "]";
      if (chain->inputs()) for (auto idx : *chain->inputs()) check_index(idx, cw + ".inputs");
      if (chain->outputs()) for (auto idx : *chain->outputs()) check_index(idx, cw + ".outputs");
      const auto* instrs = chain->instructions();
      if (instrs == nullptr) invalid(F, "S2 (plan fields)", where + ": " + cw + ".instructions is missing");
      for (flatbuffers::uoffset_t ii = 0; ii < instrs->size(); ++ii) {
        const et::Instruction* ins = instrs->Get(ii);
        const std::string iw = cw + ".instructions[" + std::to_string(ii) + "]";
        const int tag = static_cast<int>(ins->instr_args_type());
        if (tag < 1 || tag > 5 || ins->instr_args() == nullptr) {
          invalid(F, "S2 (instruction)", where + ": " + iw + " has union tag " + std::to_string(tag) +
                                             (tag == 0 ? " (NONE)" : tag > 5 ? " (unknown)" : " with no value") +
                                             " at offset " + u64s(pte.fb_offset_of(ins)));
        }
        if (const et::DelegateCall* dc = ins->instr_args_as_DelegateCall()) {
          if (dc->args() == nullptr) invalid(F, "S2 (instruction)", where + ": " + iw + " DelegateCall.args is missing");
          for (auto a : *dc->args()) check_index(a, iw + " DelegateCall.args");
          const int32_t di = dc->delegate_index();
          if (di < 0 || static_cast<std::uint32_t>(di) >= delegates->size()) {
            invalid(F, "S2 (instruction)", where + ": " + iw + " delegate_index " + std::to_string(di) + " is out of range (" +
                                               std::to_string(delegates->size()) + " delegates)");
          }
          const et::BackendDelegate* d = delegates->Get(static_cast<flatbuffers::uoffset_t>(di));
          const std::string id = d->id()->str();
          if (id != kCudaBackend) {
            other_backends.insert(id);
            continue;
          }
          PlanStep step;
          step.kind = PlanStep::Kind::kDelegate;
          for (auto a : *dc->args()) step.args.push_back(a);
          auto it = delegate_slot.find(di);
          if (it == delegate_slot.end()) {
            DelegateSpec ds;
            ds.delegate_index = di;
            ds.backend_id = id;
            ds.args = step.args;
            resolve_delegate(m, ds, prog, d);
            it = delegate_slot.emplace(di, static_cast<int>(m.delegates.size())).first;
            m.delegates.push_back(std::move(ds));
          }
          step.delegate = it->second;
          m.plan.push_back(std::move(step));
        } else if (const et::KernelCall* kc = ins->instr_args_as_KernelCall()) {
          if (kc->args() == nullptr) invalid(F, "S2 (instruction)", where + ": " + iw + " KernelCall.args is missing");
          for (auto a : *kc->args()) check_index(a, iw + " KernelCall.args");
          const int32_t oi = kc->op_index();
          if (ops == nullptr || oi < 0 || static_cast<std::uint32_t>(oi) >= ops->size()) {
            invalid(F, "S2 (instruction)", where + ": " + iw + " op_index " + std::to_string(oi) + " is out of range (" +
                                               std::to_string(ops ? ops->size() : 0) + " operators)");
          }
          const et::Operator* op = ops->Get(static_cast<flatbuffers::uoffset_t>(oi));
          if (op->name() == nullptr) invalid(F, "S2 (instruction)", where + ": operators[" + std::to_string(oi) + "].name is missing");
          std::string full = op->name()->str();
          if (op->overload() != nullptr && op->overload()->size() > 0) full += "." + op->overload()->str();
          PlanStep step;
          if (full == "et_copy::_h2d_copy.out") {
            step.kind = PlanStep::Kind::kHostToDevice;
          } else if (full == "et_copy::_d2h_copy.out") {
            step.kind = PlanStep::Kind::kDeviceToHost;
          } else {
            other_ops.insert(full);
            continue;
          }
          // Out-variant kernel args are {self, out} and the emitter may append the
          // returned value (== out) once more.
          const auto* args = kc->args();
          if (args->size() < 2 || args->size() > 3 || (args->size() == 3 && args->Get(2) != args->Get(1))) {
            reasons.push_back(full + " at " + iw + " has " + std::to_string(args->size()) + " args (expected {src, out})");
            continue;
          }
          step.args = {args->Get(0), args->Get(1)};
          m.plan.push_back(std::move(step));
        } else if (const et::MoveCall* mc = ins->instr_args_as_MoveCall()) {
          check_index(mc->move_from(), iw + " MoveCall.move_from");
          check_index(mc->move_to(), iw + " MoveCall.move_to");
          PlanStep step;
          step.kind = PlanStep::Kind::kMove;
          step.args = {mc->move_from(), mc->move_to()};
          m.plan.push_back(std::move(step));
        } else if (const et::JumpFalseCall* jf = ins->instr_args_as_JumpFalseCall()) {
          check_index(jf->cond_value_index(), iw + " JumpFalseCall.cond_value_index");
          if (jf->destination_instruction() < 0 || static_cast<std::uint32_t>(jf->destination_instruction()) >= instrs->size()) {
            invalid(F, "S2 (instruction)", where + ": " + iw + " destination_instruction " +
                                               std::to_string(jf->destination_instruction()) + " is out of range");
          }
          reasons.push_back("control flow (JumpFalseCall at " + iw + ") is not supported; only straight-line plans run");
        } else if (const et::FreeCall* fc = ins->instr_args_as_FreeCall()) {
          check_index(fc->value_index(), iw + " FreeCall.value_index");
          reasons.push_back("FreeCall at " + iw + " (dynamic memory release) is not supported");
        }
      }
    }
    if (chains->size() > 1) reasons.push_back("the plan has " + std::to_string(chains->size()) + " chains; only 1 is supported");
    std::size_t n_instr = 0;
    for (flatbuffers::uoffset_t ci = 0; ci < chains->size(); ++ci) n_instr += chains->Get(ci)->instructions()->size();
    if (n_instr == 0) reasons.push_back("constant method: it has no instructions (its outputs are constants stored in the program)");
    if (!other_backends.empty()) {
      std::string s = "delegates to backends other than CudaBackend:";
      for (const auto& b : other_backends) s += " " + b;
      reasons.push_back(s);
    }
    if (!other_ops.empty()) {
      std::string s = "non-delegated kernel operators (only et_copy::_h2d_copy.out / _d2h_copy.out run here):";
      for (const auto& o : other_ops) s += " " + o;
      reasons.push_back(s);
    }
    if (!m.not_runnable_reason.empty()) reasons.insert(reasons.begin(), m.not_runnable_reason);
    std::string joined;
    for (const auto& r : reasons) joined += (joined.empty() ? "" : "; ") + r;
    m.not_runnable_reason = joined;
    m.runnable = joined.empty();
    methods.push_back(std::move(m));
  }
}

/// M2: a constant stored outside the program (ExtraTensorInfo.location ==
/// EXTERNAL, not memory-planned) must come from a .ptd entry whose
/// TensorLayout equals the tensor's dtype, sizes and dim_order. This SDK does
/// not feed such constants to delegates, so the method is not runnable.
void Program::Impl::check_external(const std::string& vw, const et::Tensor* t, std::vector<std::string>& reasons) {
  const et::ExtraTensorInfo* x = t->extra_tensor_info();
  if (x == nullptr || x->location() != et::TensorDataLocation::EXTERNAL || t->allocation_info() != nullptr) return;
  const std::string fqn = x->fully_qualified_name()->str();  // non-empty: checked in S4
  const std::string& F = pte.label;
  auto it = named.find(fqn);
  if (it == named.end() || !it->second.in_ptd) {
    const std::string msg = vw + " is an external constant " + quoted(fqn) + " that no .ptd data file provides";
    if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + msg);
    reasons.push_back(msg);
    return;
  }
  const NamedEntry& e = it->second;
  if (!e.has_layout) {
    invalid(e.file, "M2 (external constant)", "entry " + quoted(fqn) + " used by " + F + " " + vw + " has no tensor_layout");
  }
  std::vector<int64_t> sizes(t->sizes()->begin(), t->sizes()->end());
  std::vector<std::uint8_t> order(t->dim_order()->begin(), t->dim_order()->end());
  if (e.layout_dtype != static_cast<int>(t->scalar_type()) || e.layout_sizes != sizes || e.layout_dim_order != order) {
    invalid(e.file, "M2 (external constant)",
            "layout of " + quoted(fqn) + " differs from " + F + " " + vw + " (dtype, sizes or dim_order)");
  }
  reasons.push_back(vw + " is an external constant (" + quoted(fqn) + "); constants outside the CUDA delegate are not supported");
}

void Program::Impl::resolve_delegate(MethodSpec& m, DelegateSpec& ds, const et::Program* prog,
                                     const et::BackendDelegate* d) {
  const std::string& F = pte.label;
  const std::string dw = "method " + quoted(m.name) + " delegates[" + std::to_string(ds.delegate_index) + "]";
  // method_name compile spec: raw bytes, first match (as ExecuTorch 1.1-1.2).
  if (const auto* specs = d->compile_specs()) {
    for (const et::CompileSpec* cs : *specs) {
      if (cs->key()->str() == "method_name") {
        ds.method_name_spec.assign(reinterpret_cast<const char*>(cs->value()->data()), cs->value()->size());
        break;
      }
    }
  }
  ByteView processed;
  const et::BackendDelegateDataReference* ref = d->processed();
  if (ref->location() == et::DataLocation::INLINE) {
    const auto* data = prog->backend_delegate_data()->Get(ref->index())->data();
    processed = ByteView{data->data(), data->size()};
  } else {
    const et::DataSegment* s = prog->segments()->Get(ref->index());
    processed = segment_bytes(pte, s->offset(), s->size(), dw + " processed segment " + std::to_string(ref->index()));
  }
  if (!processed.empty()) {
    ds.generation = ExporterGeneration::kHashKeys;
    const auto* begin = reinterpret_cast<const char*>(processed.data);
    const std::string_view payload(begin, processed.size);
    const std::size_t nl = payload.find('\n');
    if (nl == std::string_view::npos) {
      invalid(F, "CUDA delegate payload",
              dw + ": processed bytes (" + std::to_string(processed.size) +
                  ") are not \"<so_key>\\n<weights_key>\" (no newline): malformed named-data key payload");
    }
    ds.so_key = std::string(payload.substr(0, nl));
    ds.weights_key = std::string(payload.substr(nl + 1));
    if (ds.so_key.empty()) invalid(F, "CUDA delegate payload", dw + ": the .so key before the newline is empty");
  } else if (!ds.method_name_spec.empty() && lookup(ds.method_name_spec + "_so_blob")) {
    ds.generation = ExporterGeneration::kMethodKeys;
    ds.so_key = ds.method_name_spec + "_so_blob";
    ds.weights_key = ds.method_name_spec + "_weights_blob";
  } else if (lookup("so_blob")) {
    ds.generation = ExporterGeneration::kSeed;
    ds.so_key = "so_blob";
  } else if (!ds.method_name_spec.empty()) {
    ds.generation = ExporterGeneration::kMethodKeys;
    ds.so_key = ds.method_name_spec + "_so_blob";
    ds.weights_key = ds.method_name_spec + "_weights_blob";
  } else {
    ds.generation = ExporterGeneration::kSeed;
    ds.so_key = "so_blob";
  }
  std::string missing;
  if (auto so = lookup(ds.so_key)) {
    ds.so = so->bytes;
    ds.so_file = so->file;
  } else {
    missing = "the .so blob " + quoted(ds.so_key) + " of " + dw + " is not in " + F +
              (ptds.empty() ? std::string(" (and no .ptd data file was found)") : " or its .ptd file(s)");
    if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + missing);
  }
  if (!ds.weights_key.empty()) {
    if (auto w = lookup(ds.weights_key)) {
      ds.weights = w->bytes;
      ds.weights_file = w->file;
    } else if (ptds.empty()) {
      const std::string msg = dw + " needs its weights blob " + quoted(ds.weights_key) +
                              " from a data file, but no .ptd was given and \"" + kDefaultPtdName +
                              "\" does not exist beside " + F + " (it should hold the key" +
                              (ds.so.data == nullptr ? "s " + quoted(ds.so_key) + ", " : std::string(" ")) +
                              quoted(ds.weights_key) + ")";
      if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + msg);
      missing += (missing.empty() ? "" : "; ") + msg;
    }
    // else: a .ptd exists but lacks the key: the .so may embed its weights
    // (ExecuTorch skips the blob silently too); weights stay empty.
  }
  if (!missing.empty()) m.not_runnable_reason += (m.not_runnable_reason.empty() ? "" : "; ") + missing;
}

// ---------------------------------------------------------------------------

Program::Program() : impl_(new Impl) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Program Program::open(const std::string& pte_path, const ProgramOptions& options) {
  Program p;
  Impl& im = *p.impl_;
  im.require_data = options.require_data;
  im.pte_path = pte_path;
  im.pte.label = pte_path;
  im.pte.mapping = std::make_unique<format::MappedFile>(pte_path);
  im.pte.bytes = ByteView{im.pte.mapping->data(), im.pte.mapping->size()};
  std::vector<std::string> data = options.data_files;
  if (data.empty()) {
    const std::size_t slash = pte_path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? std::string() : pte_path.substr(0, slash + 1);
    const std::string candidate = dir + kDefaultPtdName;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0) data.push_back(candidate);
  }
  for (const auto& path : data) {
    auto fd = std::make_unique<FileData>();
    fd->label = path;
    try {
      fd->mapping = std::make_unique<format::MappedFile>(path);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotFound) {
        throw Error(ErrorCode::kNotFound, path + ": data file not found (given as a .ptd for " + pte_path + ")");
      }
      throw;
    }
    fd->bytes = ByteView{fd->mapping->data(), fd->mapping->size()};
    im.ptds.push_back(std::move(fd));
    im.data_paths.push_back(path);
  }
  im.load();
  return p;
}

Program Program::from_memory(ByteView pte, const std::vector<ByteView>& data_files, const std::string& label,
                             bool require_data) {
  Program p;
  Impl& im = *p.impl_;
  im.require_data = require_data;
  im.pte_path = label;
  im.pte.label = label;
  if (pte.data == nullptr && pte.size != 0) throw Error(ErrorCode::kInvalidArgument, label + ": null .pte pointer");
  static const std::uint8_t kEmpty[1] = {0};
  im.pte.bytes = pte.data ? pte : ByteView{kEmpty, 0};
  for (std::size_t i = 0; i < data_files.size(); ++i) {
    if (data_files[i].data == nullptr && data_files[i].size != 0) {
      throw Error(ErrorCode::kInvalidArgument, label + ": null pointer for data file " + std::to_string(i));
    }
    auto fd = std::make_unique<FileData>();
    fd->label = label + ".ptd[" + std::to_string(i) + "]";
    fd->bytes = data_files[i].data ? data_files[i] : ByteView{kEmpty, 0};
    im.data_paths.push_back(fd->label);
    im.ptds.push_back(std::move(fd));
  }
  im.load();
  return p;
}

const std::vector<MethodSpec>& Program::methods() const noexcept { return impl_->methods; }

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> out;
  for (const auto& m : impl_->methods) out.push_back(m.name);
  return out;
}

const MethodSpec& Program::method(std::string_view name) const {
  for (const auto& m : impl_->methods) {
    if (m.name == name) return m;
  }
  std::string valid;
  for (const auto& m : impl_->methods) valid += (valid.empty() ? "" : ", ") + quoted(m.name);
  throw Error(ErrorCode::kNotFound, impl_->pte_path + ": no method " + quoted(name) + " (methods: " +
                                        (valid.empty() ? std::string("none") : valid) + ")");
}

std::optional<ByteView> Program::named_data(std::string_view key) const {
  auto e = impl_->lookup(key);
  if (!e) return std::nullopt;
  return e->bytes;
}

std::vector<NamedDataInfo> Program::named_data_entries() const { return impl_->named_order; }

const std::string& Program::pte_path() const noexcept { return impl_->pte_path; }
const std::vector<std::string>& Program::data_paths() const noexcept { return impl_->data_paths; }

}  // namespace aoti_cuda
