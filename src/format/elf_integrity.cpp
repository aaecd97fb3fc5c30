// elf_integrity_problems: damage visible in an ELF shared object's structure
// without loading it. The format has no checksum, so this looks for what a
// linker never produces: tables outside the file, zeroed symbol/relocation
// entries, empty names, a page of zeros in code, inconsistent version and
// hash tables.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/library_check.hpp"
#include "format/checked.hpp"
#include "format/elf_sections.hpp"

namespace aoti_cuda {
namespace {

using format::ElfSection;
using format::ElfSections;
using format::read_u32;
using format::read_u64;

constexpr std::uint64_t kZeroPage = 4096;

std::string section_label(const ElfSection& s, std::size_t i) {
  return (s.name.empty() ? "section " + std::to_string(i) : s.name);
}

bool all_zero(const std::uint8_t* p, std::uint64_t n) {
  return std::all_of(p, p + n, [](std::uint8_t b) { return b == 0; });
}

void check_tables(const ElfSections& elf, std::vector<std::string>& out) {
  for (std::size_t i = 0; i < elf.sections().size(); ++i) {
    const ElfSection& s = elf.sections()[i];
    if (!s.in_file) out.push_back(section_label(s, i) + " lies outside the " + std::to_string(elf.file_size()) + "-byte file");
  }
  if (!elf.program_headers_ok()) out.push_back("the program header table is malformed or lies outside the file");
  for (const format::ElfProgramHeader& p : elf.program_headers()) {
    if (p.type == 1 && (p.filesz > p.memsz || elf.range(p.offset, p.filesz) == nullptr)) {
      out.push_back("a loadable segment (offset " + std::to_string(p.offset) + ", " + std::to_string(p.filesz) +
                    " bytes) lies outside the file or exceeds its memory size");
    }
  }
}

// Zeroed symbol entries and symbols whose name is empty (a zeroed string
// table), in .dynsym and (when present) .symtab. Returns the entry count.
std::uint64_t check_symbols(const ElfSections& elf, std::uint32_t type, const char* what, std::vector<std::string>& out) {
  const ElfSection* sym = elf.find(type);
  if (sym == nullptr || !sym->in_file || sym->entsize != 24) return 0;
  const std::uint64_t count = sym->size / 24;
  const ElfSection* strtab = elf.at(sym->link);
  std::uint64_t zeroed = 0, empty = 0;
  for (std::uint64_t k = 1; k < count; ++k) {
    const std::uint8_t* e = elf.range(sym->offset + k * 24, 24);
    if (all_zero(e, 24)) {
      ++zeroed;
      continue;
    }
    const std::uint32_t name = read_u32(e);
    if (name != 0 && strtab != nullptr && strtab->in_file && name < strtab->size &&
        elf.range(strtab->offset + name, 1)[0] == 0) {
      ++empty;
    }
  }
  if (zeroed > 0) out.push_back(std::to_string(zeroed) + " zeroed " + what + " entries");
  if (empty > 0) out.push_back(std::to_string(empty) + " " + what + " symbols with an empty name (damaged string table)");
  return count;
}

// .eh_frame is a chain of length-prefixed CIE/FDE records ending with a zero
// length at the very end; .eh_frame_hdr is a version-1 header followed by a
// table sorted by address. A zeroed page ends the chain early or breaks the order.
void check_unwind_tables(const ElfSections& elf, std::vector<std::string>& out) {
  for (const ElfSection& s : elf.sections()) {
    if (!s.in_file || s.type == format::kShtNobits) continue;
    if (s.name == ".eh_frame") {
      std::uint64_t pos = 0;
      while (pos + 4 <= s.size) {
        std::uint64_t len = read_u32(elf.range(s.offset + pos, 4));
        if (len == 0) break;
        if (len == 0xffffffffu || pos + 4 + len > s.size) {
          out.push_back(".eh_frame record at offset " + std::to_string(pos) + " runs past its section");
          return;
        }
        pos += 4 + len;
      }
      if (s.size - pos > 16) out.push_back(".eh_frame ends early (zeroed record at offset " + std::to_string(pos) + ")");
    } else if (s.name == ".eh_frame_hdr" && s.size >= 12) {
      const std::uint8_t* h = elf.range(s.offset, s.size);
      if (h[0] != 1) {
        out.push_back(".eh_frame_hdr version is " + std::to_string(h[0]) + ", expected 1");
      } else if (h[2] == 0x03 && h[3] == 0x3b) {  // udata4 count, datarel sdata4 table (what linkers write)
        const std::uint64_t n = read_u32(h + 8);
        if (12 + n * 8 > s.size) {
          out.push_back(".eh_frame_hdr table of " + std::to_string(n) + " entries runs past its section");
          continue;
        }
        for (std::uint64_t k = 1; k < n; ++k) {
          const auto prev = static_cast<std::int32_t>(read_u32(h + 12 + (k - 1) * 8));
          const auto cur = static_cast<std::int32_t>(read_u32(h + 12 + k * 8));
          if (cur <= prev) {
            out.push_back(".eh_frame_hdr search table is out of order at entry " + std::to_string(k));
            break;
          }
        }
      }
    }
  }
}

void check_relocations(const ElfSections& elf, std::uint64_t dynsym_count, std::vector<std::string>& out) {
  for (std::size_t i = 0; i < elf.sections().size(); ++i) {
    const ElfSection& s = elf.sections()[i];
    if (s.type != format::kShtRela || !s.in_file || s.entsize != 24) continue;
    std::uint64_t none = 0, bad_sym = 0;
    for (std::uint64_t k = 0; k < s.size / 24; ++k) {
      const std::uint64_t info = read_u64(elf.range(s.offset + k * 24 + 8, 8));
      if ((info & 0xffffffffu) == 0) ++none;  // R_*_NONE: linkers do not emit it
      if (dynsym_count > 0 && (info >> 32) >= dynsym_count) ++bad_sym;
    }
    if (none > 0) out.push_back(section_label(s, i) + ": " + std::to_string(none) + " empty (zeroed) relocations");
    if (bad_sym > 0) out.push_back(section_label(s, i) + ": " + std::to_string(bad_sym) + " relocations name no symbol");
  }
}

void check_code(const ElfSections& elf, std::vector<std::string>& out) {
  for (std::size_t i = 0; i < elf.sections().size(); ++i) {
    const ElfSection& s = elf.sections()[i];
    if (!(s.flags & format::kShfExecInstr) || s.type == format::kShtNobits || !s.in_file) continue;
    const std::uint8_t* p = elf.range(s.offset, s.size);
    std::uint64_t run = 0;
    for (std::uint64_t k = 0; k < s.size; ++k) {
      run = p[k] == 0 ? run + 1 : 0;
      if (run == kZeroPage) {
        out.push_back(section_label(s, i) + " (code) holds 4096 zero bytes ending at file offset " +
                      std::to_string(s.offset + k) + ": compiled code never does");
        break;
      }
    }
  }
}

void check_version_tables(const ElfSections& elf, ByteView so, std::uint64_t dynsym_count,
                          std::vector<std::string>& out) {
  try {
    (void)elf_version_needs(so);
  } catch (const Error& e) {
    out.push_back(e.what());
  }
  const ElfSection* versym = elf.find(format::kShtGnuVersym);
  if (versym != nullptr && versym->in_file && dynsym_count > 0 && versym->size / 2 != dynsym_count) {
    out.push_back(".gnu.version has " + std::to_string(versym->size / 2) + " entries for " +
                  std::to_string(dynsym_count) + " dynamic symbols");
  }
  const ElfSection* hash = elf.find(format::kShtGnuHash);
  if (hash != nullptr && hash->in_file) {
    const std::uint8_t* h = elf.range(hash->offset, 16);
    const std::uint32_t nbuckets = h ? read_u32(h) : 0, bloom = h ? read_u32(h + 8) : 0;
    std::uint64_t need = 16 + std::uint64_t{bloom} * 8 + std::uint64_t{nbuckets} * 4;
    if (h == nullptr || nbuckets == 0 || bloom == 0 || (bloom & (bloom - 1)) != 0 || need > hash->size) {
      out.push_back(".gnu.hash header is malformed (" + std::to_string(nbuckets) + " buckets, bloom size " +
                    std::to_string(bloom) + ")");
    }
  }
}

// File offset of virtual address `addr` (inside a PROGBITS section), or -1.
std::int64_t file_offset(const ElfSections& elf, std::uint64_t addr) {
  for (const ElfSection& s : elf.sections()) {
    if (s.type != format::kShtNobits && s.in_file && s.addr != 0 && addr >= s.addr && addr - s.addr < s.size) {
      return static_cast<std::int64_t>(s.offset + (addr - s.addr));
    }
  }
  return -1;
}

bool has_zero_page(const std::uint8_t* p, std::uint64_t n) {
  std::uint64_t run = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    run = p[k] == 0 ? run + 1 : 0;
    if (run == kZeroPage) return true;
  }
  return false;
}

// One embedded CUDA fat binary (layout in cuda_kernels.cpp): its entries must
// tile the payload exactly; an uncompressed SASS entry is an ELF whose tables
// lie inside it and whose code has no zero page; a compressed entry has no
// zero page either.
std::string check_fatbin(const ElfSections& elf, std::uint64_t off, std::uint64_t avail) {
  const std::uint8_t* h = elf.range(off, 16);
  if (h == nullptr || avail < 16 || read_u32(h) != 0xBA55ED50u) return "does not start with a fat binary header";
  const std::uint64_t hs = format::read_u16(h + 6), payload = read_u64(h + 8);
  if (hs < 16 || payload > avail - std::min(avail, hs)) return "header gives a size past the kernel's symbol range";
  std::uint64_t e = off + hs;
  const std::uint64_t end = e + payload;
  while (end - e >= 32) {
    const std::uint8_t* eh = elf.range(e, 32);
    const std::uint64_t ehs = read_u32(eh + 4), eps = read_u64(eh + 8), flags = read_u64(eh + 16);
    if (ehs < 32 || ehs > end - e || eps > end - e - ehs) return "entry table is damaged";
    const std::uint8_t* data = elf.range(e + ehs, eps);
    if (flags == 0 && eps >= 64 && data[0] == 0x7f && data[1] == 'E') {
      try {
        const ElfSections cubin(ByteView{data, static_cast<std::size_t>(eps)});
        std::vector<std::string> inner;
        check_tables(cubin, inner);
        check_code(cubin, inner);
        check_symbols(cubin, format::kShtSymtab, "symbol table", inner);
        if (!inner.empty()) return "SASS: " + inner.front();
      } catch (const Error& err) {
        return std::string("SASS: ") + err.what();
      }
    } else if (flags != 0 && has_zero_page(data, eps)) {
      return "a compressed entry holds 4096 zero bytes";
    }
    e += ehs + eps;
  }
  return e == end ? "" : "entries do not fill the payload";
}

// AOTInductor names each embedded kernel binary __<kernel>_start/_end.
void check_kernel_binaries(const ElfSections& elf, std::vector<std::string>& out) {
  for (std::uint32_t type : {format::kShtDynsym, format::kShtSymtab}) {
    const ElfSection* sym = elf.find(type);
    const ElfSection* strtab = sym ? elf.at(sym->link) : nullptr;
    if (sym == nullptr || strtab == nullptr || !sym->in_file || sym->entsize != 24) continue;
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> ranges;  // kernel -> (start, end)
    for (std::uint64_t k = 1; k < sym->size / 24; ++k) {
      const std::uint8_t* e = elf.range(sym->offset + k * 24, 24);
      const std::uint32_t name = read_u32(e);
      if (name == 0 || name >= strtab->size || format::read_u16(e + 6) == 0) continue;
      std::string n;
      try {
        n = elf.string_at(*strtab, name, "symbol");
      } catch (const Error&) {
        continue;  // reported by check_symbols
      }
      const bool start = n.size() > 8 && n.rfind("__", 0) == 0 && n.compare(n.size() - 6, 6, "_start") == 0;
      const bool end = n.size() > 6 && n.rfind("__", 0) == 0 && n.compare(n.size() - 4, 4, "_end") == 0;
      if (start) ranges[n.substr(2, n.size() - 8)].first = read_u64(e + 8);
      if (end) ranges[n.substr(2, n.size() - 6)].second = read_u64(e + 8);
    }
    std::size_t checked = 0;
    for (const auto& [kernel, r] : ranges) {
      if (r.first == 0 || r.second <= r.first) continue;
      const std::int64_t off = file_offset(elf, r.first);
      if (off < 0) continue;
      ++checked;
      const std::string why = check_fatbin(elf, static_cast<std::uint64_t>(off), r.second - r.first);
      if (!why.empty()) out.push_back("kernel binary of " + kernel + ": " + why);
    }
    if (checked > 0) return;  // .dynsym sufficed
  }
}

}  // namespace

std::vector<std::string> elf_integrity_problems(ByteView so) {
  std::vector<std::string> out;
  try {
    const ElfSections elf(so);
    check_tables(elf, out);
    const std::uint64_t dynsym_count = check_symbols(elf, format::kShtDynsym, ".dynsym", out);
    check_symbols(elf, format::kShtSymtab, ".symtab", out);
    check_unwind_tables(elf, out);
    check_kernel_binaries(elf, out);
    check_relocations(elf, dynsym_count, out);
    check_code(elf, out);
    check_version_tables(elf, so, dynsym_count, out);
  } catch (const Error& e) {
    out.push_back(e.what());
  }
  return out;
}

}  // namespace aoti_cuda
