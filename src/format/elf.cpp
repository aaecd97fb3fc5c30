// inspect_elf: reads facts from an ELF shared object WITHOUT loading it,
// through the library's one bounds-checked ELF reader (format/elf_sections.hpp).
#include <algorithm>
#include <string>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "format/checked.hpp"
#include "format/elf.hpp"
#include "format/elf_sections.hpp"

namespace aoti_cuda {

namespace {

constexpr std::uint32_t kShtDynamic = 6;
constexpr std::uint64_t kElf64SymSize = 24;
constexpr std::uint64_t kElf64DynSize = 16;
constexpr std::uint8_t kStbGnuUnique = 10;
constexpr std::uint8_t kSttFunc = 2;
constexpr std::int64_t kDtNull = 0;
constexpr std::int64_t kDtNeeded = 1;
constexpr std::int64_t kDtSoname = 14;

using format::ElfSection;
using format::ElfSections;

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

void require_in_file(const ElfSections& elf, const ElfSection& s, const std::string& what) {
  if (!s.in_file) {
    elf_fail("bounds", what + " [offset " + std::to_string(s.offset) + ", size " + std::to_string(s.size) +
                           "] lies outside the " + std::to_string(elf.file_size()) + "-byte file");
  }
}

// Checks a .dynsym section's bounds and entry size.
void check_dynsym(const ElfSections& elf, const ElfSection& s, std::size_t index) {
  require_in_file(elf, s, ".dynsym section " + std::to_string(index));
  if (s.entsize != kElf64SymSize) {
    elf_fail("symbol table", ".dynsym sh_entsize is " + std::to_string(s.entsize) + ", expected 24");
  }
}

// The string table a .dynsym / .dynamic section links to, checked.
const ElfSection& linked_strtab(const ElfSections& elf, const ElfSection& s, const char* what) {
  const ElfSection* strtab = elf.at(s.link);
  if (strtab == nullptr) {
    elf_fail("section link", std::string(what) + " links to section " + std::to_string(s.link) + " of " +
                                 std::to_string(elf.sections().size()));
  }
  require_in_file(elf, *strtab, std::string(what) + " string table");
  return *strtab;
}

void read_dynsym(const ElfSections& elf, const ElfSection& s, const ElfSection& strtab, ElfInfo& info) {
  const std::uint64_t count = s.size / kElf64SymSize;
  for (std::uint64_t k = 1; k < count; ++k) {  // entry 0 is the reserved null symbol
    const std::uint8_t* sym = elf.range(s.offset + k * kElf64SymSize, kElf64SymSize);
    const std::uint32_t name_off = format::read_u32(sym);
    if (name_off == 0) continue;
    const std::uint8_t bind = sym[4] >> 4;
    const std::uint16_t shndx = format::read_u16(sym + 6);
    std::string name = elf.string_at(strtab, name_off, "symbol");
    if (shndx == 0) {
      info.undefined_symbols.push_back(std::move(name));
    } else if ((bind == 1 || bind == 2) && name.rfind("AOTInductor", 0) == 0) {
      info.defined_symbols.push_back(std::move(name));
    }
  }
}

void read_dynamic(const ElfSections& elf, const ElfSection& s, const ElfSection& strtab, ElfInfo& info) {
  if (s.entsize != 0 && s.entsize != kElf64DynSize) {
    elf_fail("dynamic section", ".dynamic sh_entsize is " + std::to_string(s.entsize) + ", expected 16");
  }
  const std::uint64_t count = s.size / kElf64DynSize;
  for (std::uint64_t k = 0; k < count; ++k) {
    const std::uint8_t* dyn = elf.range(s.offset + k * kElf64DynSize, kElf64DynSize);
    const auto tag = static_cast<std::int64_t>(format::read_u64(dyn));
    const std::uint64_t val = format::read_u64(dyn + 8);
    if (tag == kDtNull) break;
    if (tag == kDtNeeded) info.needed.push_back(elf.string_at(strtab, val, "DT_NEEDED"));
    if (tag == kDtSoname) info.soname = elf.string_at(strtab, val, "DT_SONAME");
  }
}

}  // namespace

ElfInfo inspect_elf(ByteView bytes) {
  const ElfSections elf(bytes);
  ElfInfo info;
  info.elf_class = 64;  // ElfSections accepts nothing else
  info.type = format::read_u16(bytes.data + 16);
  info.machine = format::read_u16(bytes.data + 18);
  info.machine_name = machine_name(info.machine);
  info.is_shared_object = info.type == 3;
  for (std::size_t i = 0; i < elf.sections().size(); ++i) {
    const ElfSection& s = elf.sections()[i];
    if (s.type != format::kShtDynsym && s.type != kShtDynamic) continue;
    const char* what = s.type == format::kShtDynsym ? ".dynsym" : ".dynamic";
    require_in_file(elf, s, std::string(what) + " section " + std::to_string(i));
    const ElfSection& strtab = linked_strtab(elf, s, what);
    if (s.type == format::kShtDynsym) {
      check_dynsym(elf, s, i);
      read_dynsym(elf, s, strtab, info);
    } else {
      read_dynamic(elf, s, strtab, info);
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
    const ElfSections elf(bytes);
    for (std::size_t i = 0; i < elf.sections().size(); ++i) {
      const ElfSection& s = elf.sections()[i];
      if (s.type != kShtDynsym) continue;
      check_dynsym(elf, s, i);
      for (std::uint64_t off = 0; off + kElf64SymSize <= s.size; off += kElf64SymSize) {
        const std::uint64_t info_off = s.offset + off + 4;  // st_info
        if ((*elf.range(info_off, 1) >> 4) == kStbGnuUnique) out.push_back(static_cast<std::size_t>(info_off));
      }
    }
  } catch (...) {
    return {};  // not a readable ELF64 file: nothing to patch (loading reports the real problem)
  }
  return out;
}

std::uint64_t defined_function_value(ByteView bytes, const char* name) noexcept {
  try {
    const ElfSections elf(bytes);
    for (const ElfSection& s : elf.sections()) {
      if ((s.type != kShtSymtab && s.type != kShtDynsym) || !s.in_file || s.entsize != kElf64SymSize) continue;
      const ElfSection* strtab = elf.at(s.link);
      if (strtab == nullptr || elf.range(strtab->offset, strtab->size) == nullptr) continue;
      for (std::uint64_t off = kElf64SymSize; off + kElf64SymSize <= s.size; off += kElf64SymSize) {
        const std::uint8_t* sym = elf.range(s.offset + off, kElf64SymSize);
        if (sym == nullptr) break;
        const std::uint64_t value = format::read_u64(sym + 8);
        if ((sym[4] & 0x0f) != kSttFunc || format::read_u16(sym + 6) == 0 || value == 0) continue;
        const std::uint32_t name_off = format::read_u32(sym);
        if (name_off != 0 && name_off < strtab->size && elf.string_at(*strtab, name_off, "symbol") == name) {
          return value;
        }
      }
    }
  } catch (...) {
    return 0;  // not a readable ELF64 file: nothing found
  }
  return 0;
}

}  // namespace format
}  // namespace aoti_cuda
