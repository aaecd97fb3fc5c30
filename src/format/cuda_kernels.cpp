// Finds the CUDA fat binaries that AOTInductor embeds in a model library and
// reads which GPU architectures they carry, so a load can fail up front with
// "built for sm_90, this GPU is sm_80" instead of a launch error later.
//
// Fat binary layout (little-endian), as produced by nvcc/fatbinary:
//   header : u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 payload_size
//   entries: u16 kind (1 = PTX, 2 = ELF/SASS), u16 version, u32 entry_header_size,
//            u64 entry_payload_size, ..., u32 sm_arch at entry offset 28, ...
// Each entry's payload follows its header. Everything is bounds-checked: the
// bytes come from an untrusted file.
#include <algorithm>
#include <cstring>
#include <string>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "format/elf_sections.hpp"

namespace aoti_cuda {
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr std::uint16_t kKindPtx = 1;
constexpr std::uint16_t kKindSass = 2;

template <typename T>
T read_le(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 is little-endian, like the format
  return v;
}

void add_unique(std::vector<int>& v, int x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// Parses one fat binary at `p` (with `avail` bytes after it). Returns false if
// it does not look like a well-formed fat binary.
bool parse_fatbin(const std::uint8_t* p, std::size_t avail, CudaKernelInfo& info) {
  if (avail < 16) return false;
  const std::uint16_t header_size = read_le<std::uint16_t>(p + 6);
  const std::uint64_t payload_size = read_le<std::uint64_t>(p + 8);
  if (header_size < 16 || header_size > avail || payload_size > avail - header_size) return false;
  const std::uint8_t* e = p + header_size;
  const std::uint8_t* end = e + payload_size;
  bool any = false;
  while (end - e >= 32) {
    const std::uint16_t kind = read_le<std::uint16_t>(e);
    const std::uint32_t entry_header = read_le<std::uint32_t>(e + 4);
    const std::uint64_t entry_payload = read_le<std::uint64_t>(e + 8);
    if (entry_header < 32 || entry_header > static_cast<std::size_t>(end - e)) break;
    if (entry_payload > static_cast<std::size_t>(end - e) - entry_header) break;
    const std::uint32_t arch = read_le<std::uint32_t>(e + 28);
    if (arch > 0 && arch < 1000) {
      if (kind == kKindSass) add_unique(info.sass_archs, static_cast<int>(arch));
      if (kind == kKindPtx) add_unique(info.ptx_archs, static_cast<int>(arch));
      any = any || kind == kKindSass || kind == kKindPtx;
    }
    e += entry_header + entry_payload;
  }
  return any;
}

}  // namespace

bool CudaKernelInfo::runs_on(int sm) const noexcept {
  if (fatbins == 0) return true;  // nothing to check against
  if (std::find(sass_archs.begin(), sass_archs.end(), sm) != sass_archs.end()) return true;
  for (int ptx : ptx_archs) {
    if (ptx <= sm) return true;
  }
  return false;
}

std::string CudaKernelInfo::describe() const {
  if (fatbins == 0) return "none found";
  std::string s;
  for (int a : sass_archs) s += (s.empty() ? "" : ", ") + std::string("sm_") + std::to_string(a) + " (SASS)";
  for (int a : ptx_archs) s += (s.empty() ? "" : ", ") + std::string("compute_") + std::to_string(a) + " (PTX)";
  return s;
}

namespace {

// Every fat binary starting in [begin, end); each may extend to the end of the file.
void scan_for_fatbins(const std::uint8_t* begin, const std::uint8_t* end, const std::uint8_t* file_end,
                      CudaKernelInfo& info) {
  std::uint8_t magic[4];
  std::memcpy(magic, &kFatbinMagic, 4);
  const std::uint8_t* p = begin;
  while (end - p >= 4) {
    const void* hit = memmem(p, static_cast<std::size_t>(end - p), magic, 4);
    if (hit == nullptr) break;
    const auto* f = static_cast<const std::uint8_t*>(hit);
    if (parse_fatbin(f, static_cast<std::size_t>(file_end - f), info)) ++info.fatbins;
    p = f + 4;
  }
}

constexpr std::uint32_t kShtProgbits = 1;
constexpr std::uint64_t kShfAlloc = 2;

}  // namespace

CudaKernelInfo inspect_cuda_kernels(ByteView so) {
  CudaKernelInfo info;
  if (so.data == nullptr || so.size < 16) return info;
  const std::uint8_t* const end = so.data + so.size;
  // In a model library the kernels can only be in data the loader maps (the
  // CUDA runtime reads them from memory): the allocated, non-executable
  // PROGBITS sections (.rodata in every AOTInductor library seen, or
  // .nv_fatbin). Scanning those alone skips code and symbol tables, ~90 % of
  // the bytes. Anything that is not a readable ELF file is scanned whole.
  bool scanned = false;
  try {
    const format::ElfSections elf(so);
    for (const format::ElfSection& s : elf.sections()) {
      if (s.type != kShtProgbits || (s.flags & kShfAlloc) == 0 || (s.flags & format::kShfExecInstr) != 0) continue;
      const std::uint8_t* begin = elf.range(s.offset, s.size);
      if (begin == nullptr) continue;
      scan_for_fatbins(begin, begin + s.size, end, info);
      scanned = true;
    }
  } catch (const Error&) {
    scanned = false;
  }
  if (!scanned) {
    info = CudaKernelInfo{};
    scan_for_fatbins(so.data, end, end, info);
  }
  std::sort(info.sass_archs.begin(), info.sass_archs.end());
  std::sort(info.ptx_archs.begin(), info.ptx_archs.end());
  return info;
}

}  // namespace aoti_cuda
