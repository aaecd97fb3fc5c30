// inspect_elf: reads facts from an ELF shared object WITHOUT loading it.
// Every offset, size and count comes from untrusted bytes, so each one is
// bounds-checked against the buffer before use (u64, overflow-checked).
#include <algorithm>
#include <cstring>
#include <string>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "format/checked.hpp"
#include "format/elf.hpp"

namespace aoti_cuda {

namespace {

constexpr std::uint32_t kShtDynamic = 6;
constexpr std::uint32_t kShtDynsym = 11;
constexpr std::uint64_t kElf64HeaderSize = 64;
constexpr std::uint64_t kElf64ShdrSize = 64;
constexpr std::uint64_t kElf64SymSize = 24;
constexpr std::uint64_t kElf64DynSize = 16;
constexpr std::uint8_t kStbGnuUnique = 10;
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint8_t kSttFunc = 2;
constexpr std::int64_t kDtNull = 0;
constexpr std::int64_t kDtNeeded = 1;
constexpr std::int64_t kDtSoname = 14;

[[noreturn]] void elf_fail(const std::string& check, const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, "ELF: " + check + " failed: " + detail);
}

std::string machine_name(std::uint16_t m) {
  switch (m) {
    case 3: return "x86";
    case 40: return "arm";
    case 62: return "x86-64";
    case 183: return "aarch64";
    case 243: return "riscv";
    default: return "unknown(" + std::to_string(m) + ")";
  }
}

struct Section {
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

class ElfReader {
 public:
  explicit ElfReader(ByteView b) : b_(b) {}

  // Checks that [off, off+len) lies inside the buffer.
  void require_range(std::uint64_t off, std::uint64_t len, const std::string& what) const {
    std::uint64_t end = 0;
    if (!format::add_u64(off, len, &end) || end > b_.size) {
      elf_fail("bounds", what + " [offset " + std::to_string(off) + ", size " + std::to_string(len) +
                             "] lies outside the " + std::to_string(b_.size) + "-byte file");
    }
  }

  Section section(std::uint64_t shoff, std::uint32_t index) const {
    const std::uint8_t* p = b_.data + shoff + index * kElf64ShdrSize;  // range checked by caller
    Section s;
    s.type = format::read_u32(p + 4);
    s.offset = format::read_u64(p + 24);
    s.size = format::read_u64(p + 32);
    s.link = format::read_u32(p + 40);
    s.entsize = format::read_u64(p + 56);
    return s;
  }

  // NUL-terminated string at `name_off` inside the string table section `strtab`.
  std::string string_at(const Section& strtab, std::uint64_t name_off, const char* what) const {
    if (name_off >= strtab.size) {
      elf_fail("string table", std::string(what) + " name offset " + std::to_string(name_off) +
                                   " is past the string table (" + std::to_string(strtab.size) + " bytes)");
    }
    const char* start = reinterpret_cast<const char*>(b_.data + strtab.offset + name_off);
    const std::uint64_t max_len = strtab.size - name_off;
    const void* nul = std::memchr(start, 0, static_cast<std::size_t>(max_len));
    if (nul == nullptr) {
      elf_fail("string table", std::string(what) + " name at string offset " + std::to_string(name_off) +
                                   " is not NUL-terminated inside the table");
    }
    return std::string(start, static_cast<const char*>(nul));
  }

  const std::uint8_t* at(std::uint64_t off) const { return b_.data + off; }

 private:
  ByteView b_;
};

// The identification and header checks every walk of an ELF file starts
// with; returns the section header table (shnum 0 when there is none).
struct SectionTable {
  std::uint64_t shoff = 0;
  std::uint16_t shnum = 0;
};

SectionTable read_header(ByteView bytes, ElfInfo& info) {
  if (bytes.data == nullptr && bytes.size != 0) elf_fail("input", "null data pointer with non-zero size");
  if (bytes.size < 16) {
    elf_fail("identification", "only " + std::to_string(bytes.size) + " bytes; an ELF file needs at least 64");
  }
  const std::uint8_t* d = bytes.data;
  if (!(d[0] == 0x7f && d[1] == 'E' && d[2] == 'L' && d[3] == 'F')) {
    elf_fail("magic", "bytes 0..3 are not \\x7fELF");
  }
  if (d[4] == 1) {
    info.elf_class = 32;
  } else if (d[4] == 2) {
    info.elf_class = 64;
  } else {
    elf_fail("class", "EI_CLASS " + std::to_string(d[4]) + " is neither 1 (32-bit) nor 2 (64-bit)");
  }
  if (info.elf_class != 64) elf_fail("class", "32-bit ELF is not supported (need ELF64)");
  if (d[5] != 1) {
    elf_fail("data encoding", "EI_DATA " + std::to_string(d[5]) + " is not 1 (little-endian)");
  }
  if (bytes.size < kElf64HeaderSize) {
    elf_fail("header", "file is " + std::to_string(bytes.size) + " bytes, shorter than the 64-byte ELF64 header");
  }
  info.type = format::read_u16(d + 16);
  info.machine = format::read_u16(d + 18);
  info.machine_name = machine_name(info.machine);
  info.is_shared_object = info.type == 3;

  SectionTable table;
  table.shoff = format::read_u64(d + 40);
  const std::uint16_t shentsize = format::read_u16(d + 58);
  table.shnum = format::read_u16(d + 60);
  if (table.shnum == 0) return table;  // no section headers: nothing more can be read without loading
  if (shentsize != kElf64ShdrSize) {
    elf_fail("section header", "e_shentsize is " + std::to_string(shentsize) + ", expected 64");
  }
  ElfReader(bytes).require_range(table.shoff, static_cast<std::uint64_t>(table.shnum) * kElf64ShdrSize,
                                 "section header table");
  return table;
}

// Checks a .dynsym section's bounds and entry size.
void check_dynsym(const ElfReader& r, const Section& s, std::uint32_t index) {
  r.require_range(s.offset, s.size, ".dynsym section " + std::to_string(index));
  if (s.entsize != kElf64SymSize) {
    elf_fail("symbol table", ".dynsym sh_entsize is " + std::to_string(s.entsize) + ", expected 24");
  }
}

}  // namespace

ElfInfo inspect_elf(ByteView bytes) {
  ElfInfo info;
  const SectionTable table = read_header(bytes, info);
  if (table.shnum == 0) return info;
  const std::uint64_t shoff = table.shoff;
  const std::uint16_t shnum = table.shnum;
  ElfReader r(bytes);

  for (std::uint32_t i = 0; i < shnum; ++i) {
    const Section s = r.section(shoff, i);
    if (s.type != kShtDynsym && s.type != kShtDynamic) continue;
    const char* what = s.type == kShtDynsym ? ".dynsym" : ".dynamic";
    r.require_range(s.offset, s.size, std::string(what) + " section " + std::to_string(i));
    if (s.link >= shnum) {
      elf_fail("section link", std::string(what) + " links to section " + std::to_string(s.link) + " of " +
                                   std::to_string(shnum));
    }
    const Section strtab = r.section(shoff, s.link);
    r.require_range(strtab.offset, strtab.size, std::string(what) + " string table");
    if (s.type == kShtDynsym) {
      check_dynsym(r, s, i);
      const std::uint64_t count = s.size / kElf64SymSize;
      for (std::uint64_t k = 1; k < count; ++k) {  // entry 0 is the reserved null symbol
        const std::uint8_t* sym = r.at(s.offset + k * kElf64SymSize);
        const std::uint32_t name_off = format::read_u32(sym);
        if (name_off == 0) continue;
        const std::uint8_t bind = sym[4] >> 4;
        const std::uint16_t shndx = format::read_u16(sym + 6);
        std::string name = r.string_at(strtab, name_off, "symbol");
        if (shndx == 0) {
          info.undefined_symbols.push_back(std::move(name));
        } else if ((bind == 1 || bind == 2) && name.rfind("AOTInductor", 0) == 0) {
          info.defined_symbols.push_back(std::move(name));
        }
      }
    } else {
      if (s.entsize != 0 && s.entsize != kElf64DynSize) {
        elf_fail("dynamic section", ".dynamic sh_entsize is " + std::to_string(s.entsize) + ", expected 16");
      }
      const std::uint64_t count = s.size / kElf64DynSize;
      for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint8_t* dyn = r.at(s.offset + k * kElf64DynSize);
        const auto tag = static_cast<std::int64_t>(format::read_u64(dyn));
        const std::uint64_t val = format::read_u64(dyn + 8);
        if (tag == kDtNull) break;
        if (tag == kDtNeeded) info.needed.push_back(r.string_at(strtab, val, "DT_NEEDED"));
        if (tag == kDtSoname) info.soname = r.string_at(strtab, val, "DT_SONAME");
      }
    }
  }
  auto sort_unique = [](std::vector<std::string>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  sort_unique(info.undefined_symbols);
  sort_unique(info.defined_symbols);
  return info;
}

namespace format {

std::vector<std::size_t> gnu_unique_symbol_offsets(ByteView bytes) noexcept {
  std::vector<std::size_t> out;
  try {
    ElfInfo info;
    const SectionTable table = read_header(bytes, info);
    const ElfReader r(bytes);
    for (std::uint32_t i = 0; i < table.shnum; ++i) {
      const Section s = r.section(table.shoff, i);
      if (s.type != kShtDynsym) continue;
      check_dynsym(r, s, i);
      for (std::uint64_t off = 0; off + kElf64SymSize <= s.size; off += kElf64SymSize) {
        const std::uint64_t info_off = s.offset + off + 4;  // st_info
        if ((*r.at(info_off) >> 4) == kStbGnuUnique) out.push_back(static_cast<std::size_t>(info_off));
      }
    }
  } catch (...) {
    return {};  // not a readable ELF64 file: nothing to patch (loading reports the real problem)
  }
  return out;
}

std::uint64_t defined_function_value(ByteView bytes, const char* name) noexcept {
  try {
    ElfInfo info;
    const SectionTable table = read_header(bytes, info);
    const ElfReader r(bytes);
    for (std::uint32_t i = 0; i < table.shnum; ++i) {
      const Section s = r.section(table.shoff, i);
      if (s.type != kShtSymtab && s.type != kShtDynsym) continue;
      r.require_range(s.offset, s.size, "symbol table");
      if (s.entsize != kElf64SymSize || s.link >= table.shnum) continue;
      const Section strtab = r.section(table.shoff, s.link);
      r.require_range(strtab.offset, strtab.size, "symbol string table");
      for (std::uint64_t off = kElf64SymSize; off + kElf64SymSize <= s.size; off += kElf64SymSize) {
        const std::uint8_t* sym = r.at(s.offset + off);
        const std::uint64_t value = format::read_u64(sym + 8);
        if ((sym[4] & 0x0f) != kSttFunc || format::read_u16(sym + 6) == 0 || value == 0) continue;
        const std::uint32_t name_off = format::read_u32(sym);
        if (name_off != 0 && name_off < strtab.size && r.string_at(strtab, name_off, "symbol") == name) return value;
      }
    }
  } catch (...) {
    return 0;  // not a readable ELF64 file: nothing found
  }
  return 0;
}

}  // namespace format
}  // namespace aoti_cuda
