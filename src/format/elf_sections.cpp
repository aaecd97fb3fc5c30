// ElfSections: bounds-checked section/program header tables (see elf_sections.hpp).
#include "format/elf_sections.hpp"

#include <cstring>

#include "aoti_cuda/error.hpp"
#include "format/checked.hpp"

namespace aoti_cuda {
namespace format {
namespace {

[[noreturn]] void fail(const std::string& check, const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, "ELF: " + check + " failed: " + detail);
}

}  // namespace

const std::uint8_t* ElfSections::range(std::uint64_t off, std::uint64_t len) const noexcept {
  std::uint64_t end = 0;
  if (!add_u64(off, len, &end) || end > bytes_.size) return nullptr;
  return bytes_.data + off;
}

ElfSections::ElfSections(ByteView b) : bytes_(b) {
  if (b.data == nullptr && b.size != 0) fail("input", "null data pointer with non-zero size");
  if (b.size < 16) fail("identification", "only " + std::to_string(b.size) + " bytes; an ELF file needs at least 64");
  const std::uint8_t* d = b.data;
  if (!(d[0] == 0x7f && d[1] == 'E' && d[2] == 'L' && d[3] == 'F')) fail("magic", "bytes 0..3 are not \\x7fELF");
  if (d[4] != 1 && d[4] != 2) {
    fail("class", "EI_CLASS " + std::to_string(d[4]) + " is neither 1 (32-bit) nor 2 (64-bit)");
  }
  if (d[4] != 2) fail("class", "32-bit ELF is not supported (need ELF64)");
  if (d[5] != 1) fail("data encoding", "EI_DATA " + std::to_string(d[5]) + " is not 1 (little-endian)");
  if (b.size < 64) {
    fail("header", "file is " + std::to_string(b.size) + " bytes, shorter than the 64-byte ELF64 header");
  }
  const std::uint64_t phoff = read_u64(d + 32), shoff = read_u64(d + 40);
  const std::uint16_t phentsize = read_u16(d + 54), phnum = read_u16(d + 56);
  const std::uint16_t shentsize = read_u16(d + 58), shnum = read_u16(d + 60), shstrndx = read_u16(d + 62);
  // Program headers matter only to the integrity check: a bad table is
  // recorded (program_headers_ok()), not thrown, so inspect_elf still reads
  // the sections.
  const std::uint8_t* p = phnum != 0 && phentsize == 56 ? range(phoff, std::uint64_t{phnum} * 56) : nullptr;
  phdrs_ok_ = phnum == 0 || p != nullptr;
  if (p != nullptr) {
    for (std::uint16_t i = 0; i < phnum; ++i, p += 56) {
      phdrs_.push_back({read_u32(p), read_u64(p + 8), read_u64(p + 16), read_u64(p + 32), read_u64(p + 40), read_u32(p + 4)});
    }
  }
  if (shnum == 0) return;
  if (shentsize != 64) fail("section header", "e_shentsize is " + std::to_string(shentsize) + ", expected 64");
  const std::uint8_t* s = range(shoff, std::uint64_t{shnum} * 64);
  if (s == nullptr) fail("bounds", "section header table lies outside the " + std::to_string(b.size) + "-byte file");
  for (std::uint16_t i = 0; i < shnum; ++i, s += 64) {
    ElfSection e;
    e.type = read_u32(s + 4);
    e.flags = read_u64(s + 8);
    e.addr = read_u64(s + 16);
    e.offset = read_u64(s + 24);
    e.size = read_u64(s + 32);
    e.link = read_u32(s + 40);
    e.info = read_u32(s + 44);
    e.entsize = read_u64(s + 56);
    e.in_file = e.type == kShtNobits || e.type == 0 || range(e.offset, e.size) != nullptr;
    sections_.push_back(e);
  }
  // Section names are a convenience for messages; a damaged .shstrtab leaves them empty.
  // in_file is also true for SHT_NULL / SHT_NOBITS sections, whose offset and
  // size need not lie in the file: check the bytes themselves (found by
  // tests/fuzz, reproducer in tests/fuzz/regressions).
  if (shstrndx < sections_.size() && range(sections_[shstrndx].offset, sections_[shstrndx].size) != nullptr) {
    const ElfSection names = sections_[shstrndx];
    for (std::size_t i = 0; i < sections_.size(); ++i) {
      std::uint32_t off = read_u32(b.data + shoff + i * 64);
      if (off < names.size) {
        const char* p = reinterpret_cast<const char*>(b.data + names.offset + off);
        if (std::memchr(p, 0, static_cast<std::size_t>(names.size - off)) != nullptr) sections_[i].name = p;
      }
    }
  }
}

const ElfSection* ElfSections::find(std::uint32_t type) const noexcept {
  for (const ElfSection& s : sections_) {
    if (s.type == type) return &s;
  }
  return nullptr;
}

const ElfSection* ElfSections::at(std::uint32_t index) const noexcept {
  return index < sections_.size() ? &sections_[index] : nullptr;
}

std::string ElfSections::string_at(const ElfSection& strtab, std::uint64_t off, const char* what) const {
  // Not in_file: that is also true for SHT_NULL / SHT_NOBITS sections, whose
  // bytes need not be in the file (found by tests/fuzz).
  if (range(strtab.offset, strtab.size) == nullptr) {
    fail("bounds", std::string(what) + " string table lies outside the file");
  }
  if (off >= strtab.size) {
    fail("string table", std::string(what) + " name offset " + std::to_string(off) + " is past the string table (" +
                             std::to_string(strtab.size) + " bytes)");
  }
  const char* p = reinterpret_cast<const char*>(bytes_.data + strtab.offset + off);
  const void* nul = std::memchr(p, 0, static_cast<std::size_t>(strtab.size - off));
  if (nul == nullptr) {
    fail("string table", std::string(what) + " name at string offset " + std::to_string(off) +
                             " is not NUL-terminated inside the table");
  }
  return std::string(p, static_cast<const char*>(nul));
}

}  // namespace format
}  // namespace aoti_cuda
