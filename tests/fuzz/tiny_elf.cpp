#include "tiny_elf.hpp"

#include <cstring>
#include <string>

namespace aoti_cuda_fuzz {
namespace {

using Bytes = std::vector<std::uint8_t>;

template <typename T>
void put(Bytes& b, std::size_t off, T v) {
  if (b.size() < off + sizeof v) b.resize(off + sizeof v);
  std::memcpy(b.data() + off, &v, sizeof v);
}

// A string table under construction; add() returns the name's offset.
struct StrTab {
  Bytes bytes{0};
  std::uint32_t add(const std::string& s) {
    const auto off = static_cast<std::uint32_t>(bytes.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    bytes.push_back(0);
    return off;
  }
};

// Elf64_Sym: name, info (bind << 4 | type), other, shndx, value, size.
void add_sym(Bytes& tab, std::uint32_t name, std::uint8_t bind, std::uint8_t type, std::uint16_t shndx,
             std::uint64_t value) {
  const std::size_t at = tab.size();
  tab.resize(at + 24);
  put(tab, at, name);
  tab[at + 4] = static_cast<std::uint8_t>(bind << 4 | type);
  put(tab, at + 6, shndx);
  put(tab, at + 8, value);
}

Bytes fatbin() {
  Bytes f;
  put<std::uint32_t>(f, 0, 0xBA55ED50u);
  put<std::uint16_t>(f, 4, 1);   // version
  put<std::uint16_t>(f, 6, 16);  // header size
  put<std::uint64_t>(f, 8, 2 * (32 + 8));
  std::size_t e = 16;
  for (std::uint16_t kind : {2, 1}) {  // SASS, PTX
    put<std::uint16_t>(f, e, kind);
    put<std::uint16_t>(f, e + 2, 0x0101);
    put<std::uint32_t>(f, e + 4, 32);
    put<std::uint64_t>(f, e + 8, 8);
    put<std::uint32_t>(f, e + 28, 90);
    put<std::uint64_t>(f, e + 32, 0);  // payload
    e += 40;
  }
  return f;
}

}  // namespace

Bytes tiny_elf() {
  StrTab dynstr, strtab, shstr;
  Bytes dynsym(24, 0), symtab(24, 0), dynamic;
  constexpr std::uint16_t kText = 7;  // any defined section index
  add_sym(dynsym, dynstr.add("aoti_torch_empty_strided"), 1, 2, 0, 0);
  add_sym(dynsym, dynstr.add("aoti_torch_get_data_ptr"), 1, 2, 0, 0);
  add_sym(dynsym, dynstr.add("cudaMalloc"), 1, 2, 0, 0);
  add_sym(dynsym, dynstr.add("cuLaunchKernel"), 1, 2, 0, 0);
  add_sym(dynsym, dynstr.add("AOTInductorModelContainerRun"), 1, 2, kText, 0x100);
  add_sym(dynsym, dynstr.add("AOTInductorModelContainerCreateWithDevice"), 1, 2, kText, 0x140);
  add_sym(dynsym, dynstr.add("_ZN9__gnu_cxx9__freeresEv"), 1, 2, kText, 0x180);
  add_sym(dynsym, dynstr.add("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4nposE"), 10, 1, kText, 0x1c0);
  add_sym(symtab, strtab.add("_ZN9__gnu_cxx9__freeresEv"), 0, 2, kText, 0x180);
  add_sym(symtab, strtab.add("_GLOBAL__sub_I_eh_alloc.cc"), 0, 2, kText, 0x1a0);
  const std::uint32_t needed = dynstr.add("libcuda.so.1"), soname = dynstr.add("libtiny_model.so");
  for (auto [tag, val] : {std::pair<std::int64_t, std::uint64_t>{1, needed}, {14, soname}, {0, 0}}) {
    const std::size_t at = dynamic.size();
    put(dynamic, at, tag);
    put(dynamic, at + 8, val);
  }
  // Sections: 0 null, 1 .dynstr, 2 .dynsym, 3 .dynamic, 4 .strtab, 5 .symtab, 6 .shstrtab, 7 .nv_fatbin
  struct Sec {
    std::uint32_t name, type, link;
    std::uint64_t entsize;
    Bytes data;
  };
  std::vector<Sec> secs = {
      {0, 0, 0, 0, {}},
      {shstr.add(".dynstr"), 3, 0, 0, dynstr.bytes},
      {shstr.add(".dynsym"), 11, 1, 24, dynsym},
      {shstr.add(".dynamic"), 6, 1, 16, dynamic},
      {shstr.add(".strtab"), 3, 0, 0, strtab.bytes},
      {shstr.add(".symtab"), 2, 4, 24, symtab},
      {0, 3, 0, 0, {}},
      {shstr.add(".nv_fatbin"), 1, 0, 0, fatbin()},
  };
  secs[6].name = shstr.add(".shstrtab");
  secs[6].data = shstr.bytes;

  Bytes out(64, 0);
  const std::uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::memcpy(out.data(), ident, sizeof ident);
  put<std::uint16_t>(out, 16, 3);  // ET_DYN
#if defined(__aarch64__)
  put<std::uint16_t>(out, 18, 183);
#else
  put<std::uint16_t>(out, 18, 62);
#endif
  put<std::uint32_t>(out, 20, 1);
  put<std::uint16_t>(out, 52, 64);  // e_ehsize
  put<std::uint16_t>(out, 58, 64);  // e_shentsize
  put<std::uint16_t>(out, 60, static_cast<std::uint16_t>(secs.size()));
  put<std::uint16_t>(out, 62, 6);   // e_shstrndx
  std::vector<std::uint64_t> offsets;
  for (const Sec& s : secs) {
    while (out.size() % 8 != 0) out.push_back(0);
    offsets.push_back(out.size());
    out.insert(out.end(), s.data.begin(), s.data.end());
  }
  while (out.size() % 8 != 0) out.push_back(0);
  put<std::uint64_t>(out, 40, out.size());  // e_shoff
  for (std::size_t i = 0; i < secs.size(); ++i) {
    const std::size_t at = out.size();
    out.resize(at + 64, 0);
    put(out, at, secs[i].name);
    put(out, at + 4, secs[i].type);
    put<std::uint64_t>(out, at + 24, i == 0 ? 0 : offsets[i]);
    put<std::uint64_t>(out, at + 32, secs[i].data.size());
    put(out, at + 40, secs[i].link);
    put(out, at + 56, secs[i].entsize);
  }
  return out;
}

}  // namespace aoti_cuda_fuzz
