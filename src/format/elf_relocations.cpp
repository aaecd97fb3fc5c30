// import_slots: where a shared object's imports land after relocation, read
// through the one bounds-checked ELF reader (elf_sections.hpp). The loader
// uses it to bind a model library's CUDA imports to the SDK's hooks
// (runtime/cuda_hooks.hpp) independently of the process's symbol search order.
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "format/checked.hpp"
#include "format/elf.hpp"
#include "format/elf_sections.hpp"

namespace aoti_cuda::format {
namespace {

constexpr std::uint64_t kSymSize = 24;
constexpr std::uint64_t kRelaSize = 24;
constexpr std::uint32_t kPtLoad = 1;
constexpr std::uint32_t kPtGnuRelro = 0x6474e552;
constexpr std::uint32_t kPfWrite = 2;

// Relocation types whose slot receives S + A for an imported symbol S.
bool stores_symbol_address(std::uint16_t machine, std::uint32_t type) {
  if (machine == 62) return type == 1 || type == 6 || type == 7;            // R_X86_64_64, GLOB_DAT, JUMP_SLOT
  if (machine == 183) return type == 257 || type == 1025 || type == 1026;   // R_AARCH64_ABS64, GLOB_DAT, JUMP_SLOT
  return false;
}

[[noreturn]] void fail(const std::string& check, const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, "ELF: " + check + " failed: " + detail);
}

bool inside(const ElfProgramHeader& p, std::uint64_t off, std::uint64_t len) {
  std::uint64_t end = 0, seg_end = 0;
  return add_u64(off, len, &end) && add_u64(p.vaddr, p.memsz, &seg_end) && off >= p.vaddr && end <= seg_end;
}

}  // namespace

std::vector<ImportSlot> import_slots(ByteView bytes, const std::function<bool(const std::string&)>& wanted) {
  const ElfSections elf(bytes);
  const std::uint16_t machine = read_u16(bytes.data + 18);
  std::vector<ImportSlot> out;
  std::vector<ElfProgramHeader> loads;
  const ElfProgramHeader* relro = nullptr;
  for (const ElfProgramHeader& p : elf.program_headers()) {
    if (p.type == kPtLoad && (p.flags & kPfWrite) != 0) loads.push_back(p);  // slots live in writable data
    if (p.type == kPtGnuRelro) relro = &p;
  }
  const auto& sections = elf.sections();
  for (std::size_t r = 0; r < sections.size(); ++r) {
    const ElfSection& rela = sections[r];
    if (rela.type != kShtRela || rela.size == 0) continue;
    const ElfSection* symtab = elf.at(rela.link);
    if (symtab == nullptr || symtab->type != kShtDynsym) continue;  // e.g. static relocations of a .o
    if (!elf.program_headers_ok()) fail("program headers", "malformed, so relocation slots cannot be placed");
    if (!rela.in_file || rela.entsize != kRelaSize || !symtab->in_file || symtab->entsize != kSymSize) {
      fail("relocations", "section " + std::to_string(r) + " or its .dynsym lies outside the file or has a bad entry size");
    }
    const ElfSection* strtab = elf.at(symtab->link);
    if (strtab == nullptr || !strtab->in_file) fail("relocations", ".dynsym of section " + std::to_string(r) + " has no string table");
    const std::uint64_t symbols = symtab->size / kSymSize;
    std::vector<signed char> verdict(symbols, -1);  // -1 unknown, 0 not wanted, 1 wanted
    std::vector<std::string> names(symbols);
    for (std::uint64_t k = 0; k + kRelaSize <= rela.size; k += kRelaSize) {
      const std::uint8_t* e = elf.range(rela.offset + k, kRelaSize);
      const std::uint64_t offset = read_u64(e), info = read_u64(e + 8);
      const auto sym = static_cast<std::uint64_t>(info >> 32);
      if (sym == 0 || !stores_symbol_address(machine, static_cast<std::uint32_t>(info & 0xffffffffu))) continue;
      if (sym >= symbols) {
        fail("relocations", "entry at offset " + std::to_string(rela.offset + k) + " names symbol " +
                                std::to_string(sym) + " of " + std::to_string(symbols));
      }
      if (verdict[sym] < 0) {
        const std::uint8_t* s = elf.range(symtab->offset + sym * kSymSize, kSymSize);
        const bool undefined = read_u16(s + 6) == 0;
        names[sym] = undefined ? elf.string_at(*strtab, read_u32(s), "symbol") : std::string();
        verdict[sym] = undefined && wanted(names[sym]) ? 1 : 0;
      }
      if (verdict[sym] == 0) continue;
      bool placed = false;
      for (const ElfProgramHeader& p : loads) placed = placed || inside(p, offset, 8);
      if (!placed) {
        fail("relocations", "the slot of " + names[sym] + " at " + std::to_string(offset) +
                                " lies outside every writable loadable segment");
      }
      out.push_back(ImportSlot{names[sym], offset, static_cast<std::int64_t>(read_u64(e + 16)),
                               relro != nullptr && inside(*relro, offset, 8)});
    }
  }
  return out;
}

}  // namespace aoti_cuda::format
