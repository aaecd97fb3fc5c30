// Private: the library's one ELF reader — a bounds-checked view of an ELF64
// little-endian file's section and program headers, used by inspect_elf
// (elf.cpp), the symbol-version and integrity checks (elf_versions.cpp,
// elf_integrity.cpp) and the loader's GNU_UNIQUE scan. Every accessor
// validates offsets against the buffer; nothing is loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda {
namespace format {

constexpr std::uint32_t kShtNobits = 8;
constexpr std::uint32_t kShtRela = 4;
constexpr std::uint32_t kShtDynsym = 11;
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtGnuHash = 0x6ffffff6;
constexpr std::uint32_t kShtGnuVerdef = 0x6ffffffd;
constexpr std::uint32_t kShtGnuVerneed = 0x6ffffffe;
constexpr std::uint32_t kShtGnuVersym = 0x6fffffff;
constexpr std::uint64_t kShfExecInstr = 4;

struct ElfSection {
  std::string name;  // from .shstrtab ("" when absent)
  std::uint32_t type = 0;
  std::uint64_t flags = 0, addr = 0, offset = 0, size = 0, entsize = 0;
  std::uint32_t link = 0, info = 0;
  bool in_file = false;  // [offset, offset+size) lies inside the file (always true for NOBITS)
};

struct ElfProgramHeader {
  std::uint32_t type = 0;
  std::uint64_t offset = 0, vaddr = 0, filesz = 0, memsz = 0;
  std::uint32_t flags = 0;  // p_flags: PF_X 1, PF_W 2, PF_R 4
};

/// The headers of an ELF64 little-endian file. Throws Error(kInvalidProgram)
/// "ELF: <check> failed: ..." when the identification, the ELF header or the
/// section header table is unusable; individual sections outside the file
/// are marked !in_file.
class ElfSections {
 public:
  explicit ElfSections(ByteView bytes);

  const std::vector<ElfSection>& sections() const noexcept { return sections_; }
  const std::vector<ElfProgramHeader>& program_headers() const noexcept { return phdrs_; }
  /// False when the program header table is malformed or outside the file.
  bool program_headers_ok() const noexcept { return phdrs_ok_; }
  /// First section of `type`, or nullptr.
  const ElfSection* find(std::uint32_t type) const noexcept;
  /// Section `index`, or nullptr when out of range.
  const ElfSection* at(std::uint32_t index) const noexcept;
  /// NUL-terminated string at `off` of string-table section `strtab`; throws
  /// Error(kInvalidProgram) naming `what` when out of bounds or unterminated.
  std::string string_at(const ElfSection& strtab, std::uint64_t off, const char* what) const;
  /// Pointer to [off, off+len) when inside the file, else nullptr.
  const std::uint8_t* range(std::uint64_t off, std::uint64_t len) const noexcept;
  std::uint64_t file_size() const noexcept { return bytes_.size; }

 private:
  ByteView bytes_;
  std::vector<ElfSection> sections_;
  std::vector<ElfProgramHeader> phdrs_;
  bool phdrs_ok_ = true;
};

/// Version names an ELF file defines (VERDEF), e.g. {"GLIBC_2.2.5", ...,
/// "GLIBC_2.36"} for libc.so.6. Throws Error(kInvalidProgram) when malformed.
std::vector<std::string> elf_version_definitions(ByteView bytes);

}  // namespace format
}  // namespace aoti_cuda
