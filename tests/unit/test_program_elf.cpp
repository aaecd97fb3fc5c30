// inspect_elf on a synthesized minimal ELF64 shared object and on hostile
// variants of it (truncations, bad offsets, huge counts, broken string tables).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "support/pte_builder.hpp"

using aoti_cuda::ByteView;
using aoti_cuda_test::Bytes;
using aoti_cuda_test::get_u64;
using aoti_cuda_test::put_u32;
using aoti_cuda_test::put_u64;

namespace {

void put_u16(Bytes& b, std::size_t off, std::uint16_t v) {
  b.at(off) = static_cast<std::uint8_t>(v);
  b.at(off + 1) = static_cast<std::uint8_t>(v >> 8);
}

struct TinyElf {
  Bytes bytes;
  std::size_t dynstr_off = 0, dynstr_size = 0, dynsym_off = 0, dynamic_off = 0, shoff = 0;
};

// header | .dynstr | .dynsym (4 symbols) | .dynamic (3 entries) | 4 section headers
TinyElf make_elf() {
  TinyElf e;
  static const char kStrtab[] = "\0libfoo.so\0libcuda.so.1\0aoti_torch_empty_strided\0AOTInductorModelContainerRun\0cudaMalloc";
  const std::string strtab(kStrtab, sizeof kStrtab);  // includes the final NUL
  const std::uint32_t s_soname = 1, s_needed = 11, s_shim = 24, s_run = 49, s_cuda = 78;
  Bytes b(64, 0);
  b[0] = 0x7f; b[1] = 'E'; b[2] = 'L'; b[3] = 'F';
  b[4] = 2; b[5] = 1; b[6] = 1;
  put_u16(b, 16, 3);   // ET_DYN
  put_u16(b, 18, 62);  // x86-64
  e.dynstr_off = b.size();
  e.dynstr_size = strtab.size();
  b.insert(b.end(), strtab.begin(), strtab.end());
  while (b.size() % 8) b.push_back(0);
  e.dynsym_off = b.size();
  b.resize(b.size() + 4 * 24, 0);
  auto sym = [&](int i, std::uint32_t name, std::uint8_t info, std::uint16_t shndx) {
    const std::size_t o = e.dynsym_off + i * 24;
    put_u32(b, o, name);
    b[o + 4] = info;
    put_u16(b, o + 6, shndx);
  };
  sym(1, s_shim, 0x12, 0);
  sym(2, s_run, 0x12, 3);
  sym(3, s_cuda, 0x12, 0);
  e.dynamic_off = b.size();
  b.resize(b.size() + 3 * 16, 0);
  put_u64(b, e.dynamic_off, 14);  // DT_SONAME
  put_u64(b, e.dynamic_off + 8, s_soname);
  put_u64(b, e.dynamic_off + 16, 1);  // DT_NEEDED
  put_u64(b, e.dynamic_off + 24, s_needed);
  e.shoff = b.size();
  b.resize(b.size() + 4 * 64, 0);
  auto shdr = [&](int i, std::uint32_t type, std::size_t off, std::size_t size, std::uint32_t link, std::uint64_t entsize) {
    const std::size_t o = e.shoff + i * 64;
    put_u32(b, o + 4, type);
    put_u64(b, o + 24, off);
    put_u64(b, o + 32, size);
    put_u32(b, o + 40, link);
    put_u64(b, o + 56, entsize);
  };
  shdr(1, 11, e.dynsym_off, 4 * 24, 2, 24);   // .dynsym -> .dynstr
  shdr(2, 3, e.dynstr_off, strtab.size(), 0, 0);
  shdr(3, 6, e.dynamic_off, 3 * 16, 2, 16);   // .dynamic -> .dynstr
  put_u64(b, 40, e.shoff);
  put_u16(b, 58, 64);
  put_u16(b, 60, 4);
  e.bytes = b;
  return e;
}

void expect_rejected(const std::string& name, const Bytes& b, const std::vector<std::string>& expect) {
  CAPTURE(name);
  try {
    aoti_cuda::inspect_elf(ByteView{b.data(), b.size()});
    FAIL_CHECK("accepted hostile ELF: " << name);
  } catch (const aoti_cuda::Error& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(e.code() == aoti_cuda::ErrorCode::kInvalidProgram);
    for (const auto& s : expect) CHECK_MESSAGE(msg.find(s) != std::string::npos, "missing \"" << s << "\"");
  }
}

}  // namespace

TEST_CASE("elf: facts of a minimal shared object") {
  const TinyElf e = make_elf();
  const aoti_cuda::ElfInfo info = aoti_cuda::inspect_elf(ByteView{e.bytes.data(), e.bytes.size()});
  CHECK(info.elf_class == 64);
  CHECK(info.machine == 62);
  CHECK(info.machine_name == "x86-64");
  CHECK(info.type == 3);
  CHECK(info.is_shared_object);
  CHECK(info.soname == "libfoo.so");
  CHECK(info.needed == std::vector<std::string>{"libcuda.so.1"});
  CHECK(info.undefined_symbols == std::vector<std::string>{"aoti_torch_empty_strided", "cudaMalloc"});
  CHECK(info.defined_symbols == std::vector<std::string>{"AOTInductorModelContainerRun"});
}

TEST_CASE("elf: hostile inputs are rejected with the failed check") {
  const TinyElf e = make_elf();
  int count = 0;
  auto patched = [&](const std::string& name, const std::function<void(Bytes&)>& patch, std::vector<std::string> expect) {
    Bytes b = e.bytes;
    patch(b);
    expect_rejected(name, b, expect);
    ++count;
  };
  for (std::size_t n : {0, 1, 4, 15}) {
    patched("truncated to " + std::to_string(n), [&](Bytes& b) { b.resize(n); }, {"ELF: identification failed"});
  }
  for (std::size_t n : {16, 40, 63}) {
    patched("truncated to " + std::to_string(n), [&](Bytes& b) { b.resize(n); }, {"ELF: header failed", "64-byte ELF64 header"});
  }
  for (std::size_t n : {e.shoff, e.shoff + 64, e.bytes.size() - 1}) {
    patched("section headers truncated at " + std::to_string(n), [&](Bytes& b) { b.resize(n); }, {"ELF: bounds failed", "section header table"});
  }
  patched("bad magic", [](Bytes& b) { b[1] = 'X'; }, {"ELF: magic failed"});
  patched("ELF32", [](Bytes& b) { b[4] = 1; }, {"ELF: class failed", "32-bit"});
  patched("class 7", [](Bytes& b) { b[4] = 7; }, {"ELF: class failed", "EI_CLASS 7"});
  patched("big endian", [](Bytes& b) { b[5] = 2; }, {"ELF: data encoding failed", "little-endian"});
  patched("shoff huge", [](Bytes& b) { put_u64(b, 40, ~0ULL - 8); }, {"ELF: bounds failed", "section header table"});
  patched("shnum huge", [](Bytes& b) { put_u16(b, 60, 0xffff); }, {"ELF: bounds failed", "section header table"});
  patched("shentsize 32", [](Bytes& b) { put_u16(b, 58, 32); }, {"ELF: section header failed", "e_shentsize is 32"});
  patched("dynsym offset past EOF", [&](Bytes& b) { put_u64(b, e.shoff + 64 + 24, 1ULL << 40); }, {"ELF: bounds failed", ".dynsym"});
  patched("dynsym size overflow", [&](Bytes& b) { put_u64(b, e.shoff + 64 + 32, ~0ULL); }, {"ELF: bounds failed", ".dynsym"});
  patched("dynsym entsize 16", [&](Bytes& b) { put_u64(b, e.shoff + 64 + 56, 16); }, {"ELF: symbol table failed", "sh_entsize is 16"});
  patched("dynsym link out of range", [&](Bytes& b) { put_u32(b, e.shoff + 64 + 40, 99); }, {"ELF: section link failed", "section 99"});
  patched("dynstr past EOF", [&](Bytes& b) { put_u64(b, e.shoff + 128 + 32, 1ULL << 33); }, {"ELF: bounds failed", "string table"});
  patched("symbol name past strtab", [&](Bytes& b) { put_u32(b, e.dynsym_off + 24, 5000); }, {"ELF: string table failed", "name offset 5000"});
  patched("strtab not terminated", [&](Bytes& b) {
    put_u64(b, e.shoff + 128 + 32, e.dynstr_size - 1);  // cut the final NUL off the table
  }, {"ELF: string table failed", "not NUL-terminated"});
  patched("DT_NEEDED past strtab", [&](Bytes& b) { put_u64(b, e.dynamic_off + 24, 1ULL << 62); }, {"ELF: string table failed", "DT_NEEDED"});
  patched("dynamic entsize 7", [&](Bytes& b) { put_u64(b, e.shoff + 192 + 56, 7); }, {"ELF: dynamic section failed", "sh_entsize is 7"});
  patched("dynamic past EOF", [&](Bytes& b) { put_u64(b, e.shoff + 192 + 24, e.bytes.size() - 8); }, {"ELF: bounds failed", ".dynamic"});
  CHECK(count >= 25);

  // A non-ELF blob (what a corrupted .so key would hand out).
  expect_rejected("text", aoti_cuda_test::to_bytes("this is not an ELF file at all, just text......"), {"ELF: magic failed"});
}

TEST_CASE("elf: no section headers yields header facts only") {
  TinyElf e = make_elf();
  put_u16(e.bytes, 60, 0);
  const auto info = aoti_cuda::inspect_elf(ByteView{e.bytes.data(), e.bytes.size()});
  CHECK(info.is_shared_object);
  CHECK(info.undefined_symbols.empty());
  CHECK(info.needed.empty());
}
