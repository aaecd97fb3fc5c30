// Named data: segments (S7) and named data of the .pte (S9, S5), the .ptd
// files (D3-D5) and key uniqueness across files (M1). See reader.hpp.
#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::quoted;
using format::u64s;
using format::FileData;
using format::NamedEntry;

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
                    "ambiguous which blob the delegate loads) (see docs/format-checks.md)");
  }
  NamedEntry entry = ptd_entry ? std::move(*ptd_entry) : NamedEntry{};
  entry.bytes = bytes;
  entry.file = file;
  named.emplace(key, std::move(entry));
  named_order.push_back(NamedDataInfo{key, bytes.size, file});
}

void Program::Impl::load_ptd(FileData& fd) {
  format::parse_ptd_header(fd);
  flatbuffers::Verifier v(fd.fb, fd.fb_size, format::verifier_options());
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
    ByteView bytes = format::segment_bytes(fd, seg->offset(), seg->size(), where + " (" + quoted(key) + ")");
    NamedEntry entry;
    entry.in_ptd = true;
    if (const ft::TensorLayout* layout = e->tensor_layout()) {
      const std::uint64_t nbytes = format::check_shape(fd.label, where + ".tensor_layout", static_cast<int>(layout->scalar_type()),
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

void Program::Impl::load_pte_data(const et::Program* prog) {
  const std::string& F = pte.label;
  // S7: segments.
  const auto* segs = prog->segments();
  if (segs != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < segs->size(); ++i) {
      const et::DataSegment* s = segs->Get(i);
      format::segment_bytes(pte, s->offset(), s->size(), "segments[" + std::to_string(i) + "]");
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
      add_named(key, format::segment_bytes(pte, s->offset(), s->size(), where), F, "S9 (named data)");
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
}

}  // namespace aoti_cuda
