// inspect_cuda_kernels: architecture facts of the GPU code embedded in model
// libraries, on real fixtures and on hand-made (including hostile) fat binaries.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/program.hpp"
#include "format/elf_sections.hpp"

namespace {

void put16(std::vector<std::uint8_t>& b, size_t at, std::uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put32(std::vector<std::uint8_t>& b, size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put64(std::vector<std::uint8_t>& b, size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// A fat binary with one entry per (kind, arch) pair, 16 payload bytes each.
std::vector<std::uint8_t> make_fatbin(const std::vector<std::pair<std::uint16_t, std::uint32_t>>& entries) {
  const size_t entry_header = 64, entry_payload = 16;
  std::vector<std::uint8_t> b(16 + entries.size() * (entry_header + entry_payload), 0);
  put32(b, 0, 0xBA55ED50u);
  put16(b, 4, 1);
  put16(b, 6, 16);
  put64(b, 8, entries.size() * (entry_header + entry_payload));
  size_t at = 16;
  for (const auto& [kind, arch] : entries) {
    put16(b, at, kind);
    put16(b, at + 2, 0x101);
    put32(b, at + 4, entry_header);
    put64(b, at + 8, entry_payload);
    put32(b, at + 28, arch);
    at += entry_header + entry_payload;
  }
  return b;
}

aoti_cuda::ByteView view(const std::vector<std::uint8_t>& b) { return {b.data(), b.size()}; }

}  // namespace

TEST_CASE("cuda kernels: every fixture library carries sm_90 SASS and PTX") {
  for (const char* name : {"add", "mlp", "conv", "encdec", "block"}) {
    CAPTURE(name);
    const std::string dir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name;
    aoti_cuda::Program program = aoti_cuda::Program::open(dir + "/" + name + ".pte");
    for (const aoti_cuda::MethodSpec& m : program.methods()) {
      for (const aoti_cuda::DelegateSpec& d : m.delegates) {
        const aoti_cuda::CudaKernelInfo k = aoti_cuda::inspect_cuda_kernels(d.so);
        CHECK(k.fatbins >= 1);
        CHECK(k.sass_archs == std::vector<int>{90});
        CHECK(k.ptx_archs == std::vector<int>{90});
        CHECK(k.runs_on(90));
        CHECK_FALSE(k.runs_on(80));
        CHECK(k.describe() == "sm_90 (SASS), compute_90 (PTX)");
      }
    }
  }
}

TEST_CASE("cuda kernels: hand-made fat binaries") {
  std::vector<std::uint8_t> lib(100, 0x11);
  const auto fb = make_fatbin({{2, 80}, {2, 86}, {1, 80}});
  lib.insert(lib.end(), fb.begin(), fb.end());
  lib.insert(lib.end(), 50, 0x22);
  const aoti_cuda::CudaKernelInfo k = aoti_cuda::inspect_cuda_kernels(view(lib));
  CHECK(k.fatbins == 1);
  CHECK(k.sass_archs == std::vector<int>{80, 86});
  CHECK(k.ptx_archs == std::vector<int>{80});
  CHECK(k.runs_on(86));
  CHECK(k.runs_on(90));  // via PTX
  CHECK_FALSE(k.runs_on(75));

  SUBCASE("no fat binary at all: nothing to check, any GPU passes") {
    std::vector<std::uint8_t> plain(4096, 0x5a);
    const auto none = aoti_cuda::inspect_cuda_kernels(view(plain));
    CHECK(none.fatbins == 0);
    CHECK(none.runs_on(70));
    CHECK(none.describe() == "none found");
  }
  SUBCASE("truncated fat binaries are skipped, never read past the end") {
    for (size_t cut = 0; cut < fb.size(); cut += 7) {
      std::vector<std::uint8_t> t(fb.begin(), fb.begin() + static_cast<long>(cut));
      const auto r = aoti_cuda::inspect_cuda_kernels(view(t));
      CHECK(r.fatbins == 0);
    }
  }
  SUBCASE("hostile sizes are rejected") {
    auto bad = fb;
    put64(bad, 8, ~0ull);  // payload larger than the file
    CHECK(aoti_cuda::inspect_cuda_kernels(view(bad)).fatbins == 0);
    bad = fb;
    put32(bad, 16 + 4, 0xffffffffu);  // entry header larger than the payload
    CHECK(aoti_cuda::inspect_cuda_kernels(view(bad)).fatbins == 0);
    bad = fb;
    put16(bad, 6, 0xffff);  // header size past the end
    CHECK(aoti_cuda::inspect_cuda_kernels(view(bad)).fatbins == 0);
  }
  SUBCASE("empty and null input") {
    CHECK(aoti_cuda::inspect_cuda_kernels({}).fatbins == 0);
  }
}

TEST_CASE("cuda kernels: a model library is scanned in its mapped data sections only, else whole") {
  const std::string dir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/lm";
  aoti_cuda::Program program = aoti_cuda::Program::open(dir + "/lm.pte");
  const aoti_cuda::ByteView so = program.methods().front().delegates.front().so;
  std::vector<std::uint8_t> lib(so.data, so.data + so.size);
  const aoti_cuda::CudaKernelInfo real = aoti_cuda::inspect_cuda_kernels(view(lib));
  REQUIRE(real.fatbins >= 2);

  // Not an ELF file any more (its magic broken): the whole buffer is scanned and finds the same kernels.
  std::vector<std::uint8_t> raw = lib;
  raw[1] = 'X';
  const aoti_cuda::CudaKernelInfo whole = aoti_cuda::inspect_cuda_kernels(view(raw));
  CHECK(whole.fatbins == real.fatbins);
  CHECK(whole.sass_archs == real.sass_archs);
  CHECK(whole.ptx_archs == real.ptx_archs);

  // A fat binary's bytes inside the code (.text) are not kernels the runtime could load: ignored; the same
  // bytes in a mapped data section count.
  const aoti_cuda::format::ElfSections elf(view(lib));
  const aoti_cuda::format::ElfSection* text = nullptr;
  const aoti_cuda::format::ElfSection* data = nullptr;
  for (const auto& sec : elf.sections()) {
    if (sec.name == ".text") text = &sec;
    if (sec.name == ".data") data = &sec;
  }
  REQUIRE(text != nullptr);
  REQUIRE(data != nullptr);
  const auto fb = make_fatbin({{2, 75}});
  REQUIRE(text->size > fb.size());
  REQUIRE(data->size > fb.size());
  std::vector<std::uint8_t> in_code = lib;
  std::copy(fb.begin(), fb.end(), in_code.begin() + static_cast<long>(text->offset));
  const aoti_cuda::CudaKernelInfo code = aoti_cuda::inspect_cuda_kernels(view(in_code));
  CHECK(code.fatbins == real.fatbins);
  CHECK(code.sass_archs == real.sass_archs);
  std::vector<std::uint8_t> in_data = lib;
  std::copy(fb.begin(), fb.end(), in_data.begin() + static_cast<long>(data->offset));
  const aoti_cuda::CudaKernelInfo planted = aoti_cuda::inspect_cuda_kernels(view(in_data));
  CHECK(planted.fatbins == real.fatbins + 1);
  CHECK(planted.sass_archs.front() == 75);
}
