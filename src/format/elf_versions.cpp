// Symbol versions (VERNEED / VERDEF) and the recorded weights-blob size of an
// ELF shared object, read from its bytes without loading it. Chains are walked
// with a step bound so that a cyclic vn_next/vd_next cannot loop forever.
#include <algorithm>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/library_check.hpp"
#include "format/checked.hpp"
#include "format/elf_sections.hpp"

namespace aoti_cuda {
namespace {

using format::read_u16;
using format::read_u32;
using format::read_u64;

[[noreturn]] void fail(const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, "ELF: symbol versions failed: " + detail);
}

// Walks `count` records of a version table section: each record at `pos`
// (relative to the section) has its next-offset field at `next_field`.
// `visit(record_pointer, record_offset)` reads one record.
template <typename Visit>
void walk_chain(const format::ElfSections& elf, const format::ElfSection& sec, std::uint64_t record_size,
                std::uint64_t next_field, std::uint64_t count, const char* what, Visit visit) {
  if (!sec.in_file) fail(std::string(what) + " section lies outside the file");
  std::uint64_t pos = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    if (pos > sec.size || sec.size - pos < record_size) fail(std::string(what) + " entry runs past its section");
    const std::uint8_t* rec = elf.range(sec.offset + pos, record_size);
    visit(rec, pos);
    const std::uint32_t next = read_u32(rec + next_field);
    if (next == 0) break;
    pos += next;
  }
}

}  // namespace

std::vector<VersionNeed> elf_version_needs(ByteView so) {
  const format::ElfSections elf(so);
  std::vector<VersionNeed> out;
  const format::ElfSection* sec = elf.find(format::kShtGnuVerneed);
  if (sec == nullptr) return out;
  const format::ElfSection* strtab = elf.at(sec->link);
  if (strtab == nullptr) fail("VERNEED links to a missing string table");
  walk_chain(elf, *sec, 16, 12, sec->info, "VERNEED", [&](const std::uint8_t* vn, std::uint64_t pos) {
    const std::string file = elf.string_at(*strtab, read_u32(vn + 4), "VERNEED file");
    format::ElfSection aux = *sec;  // the aux records live in the same section, after this entry
    aux.offset = sec->offset + pos;
    aux.size = sec->size - pos;
    std::uint64_t aux_pos = read_u32(vn + 8);
    if (aux_pos > aux.size) fail("VERNEED aux offset past its section");
    aux.offset += aux_pos;
    aux.size -= aux_pos;
    walk_chain(elf, aux, 16, 12, read_u16(vn + 2), "VERNEED aux", [&](const std::uint8_t* a, std::uint64_t) {
      out.push_back({file, elf.string_at(*strtab, read_u32(a + 8), "VERNEED version")});
    });
  });
  std::sort(out.begin(), out.end(), [](const VersionNeed& a, const VersionNeed& b) {
    return a.file != b.file ? a.file < b.file : a.version < b.version;
  });
  return out;
}

namespace format {

std::vector<std::string> elf_version_definitions(ByteView bytes) {
  const ElfSections elf(bytes);
  std::vector<std::string> out;
  const ElfSection* sec = elf.find(kShtGnuVerdef);
  if (sec == nullptr) return out;
  const ElfSection* strtab = elf.at(sec->link);
  if (strtab == nullptr) fail("VERDEF links to a missing string table");
  walk_chain(elf, *sec, 20, 16, sec->info, "VERDEF", [&](const std::uint8_t* vd, std::uint64_t pos) {
    const std::uint64_t aux = read_u32(vd + 12);
    const std::uint8_t* a = elf.range(sec->offset + pos + aux, 8);
    if (a == nullptr || pos + aux + 8 > sec->size) fail("VERDEF aux entry runs past its section");
    out.push_back(elf.string_at(*strtab, read_u32(a), "VERDEF version"));  // the first aux names the version
  });
  return out;
}

}  // namespace format

std::optional<std::uint64_t> elf_external_weights_size(ByteView so) {
  // AOTInductor brackets its constants with _binary_constants_bin_start/_end.
  // For external weights (torch: package_constants_on_disk_format
  // "binary_blob" without packaging in the .so) the bracket holds exactly one
  // int64: the blob size. 16 bytes would be the mmap layout (size+8, magic);
  // anything else embeds the weights. Both symbols are looked up in .dynsym
  // and, if the library is not stripped, in .symtab.
  try {
    const format::ElfSections elf(so);
    for (std::uint32_t type : {format::kShtDynsym, format::kShtSymtab}) {
      const format::ElfSection* sym = elf.find(type);
      if (sym == nullptr || !sym->in_file || sym->entsize != 24) continue;
      const format::ElfSection* strtab = elf.at(sym->link);
      if (strtab == nullptr) continue;
      std::optional<std::uint64_t> start, end;
      for (std::uint64_t k = 1; k < sym->size / 24 && !(start && end); ++k) {
        const std::uint8_t* e = elf.range(sym->offset + k * 24, 24);
        const std::uint32_t name = read_u32(e);
        if (name == 0 || read_u16(e + 6) == 0) continue;
        const std::string n = elf.string_at(*strtab, name, "symbol");
        if (n == "_binary_constants_bin_start") start = read_u64(e + 8);
        if (n == "_binary_constants_bin_end") end = read_u64(e + 8);
      }
      if (!start || !end) continue;
      if (*end < *start || *end - *start != 8) return std::nullopt;
      for (const format::ElfSection& s : elf.sections()) {
        if (s.type == format::kShtNobits || !s.in_file || *start < s.addr || *start - s.addr + 8 > s.size) continue;
        const std::uint8_t* v = elf.range(s.offset + (*start - s.addr), 8);
        if (v != nullptr) return read_u64(v);
      }
      return std::nullopt;
    }
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace aoti_cuda
