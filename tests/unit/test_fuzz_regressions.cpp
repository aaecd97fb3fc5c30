// The fuzz targets' inputs as unit tests: the seeds are what they claim to be,
// and every reproducer the fuzzers found (tests/fuzz/regressions/<target>-*)
// is now accepted or rejected with aoti_cuda::Error. The suite runs under
// ASan/UBSan in scripts/test.sh, which is what caught them.
#include <dirent.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "fuzz/seed_programs.hpp"
#include "fuzz/tiny_elf.hpp"
#include "format/elf.hpp"
#include "runtime/library_loader.hpp"
#include "support/pte_builder.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::Program;
using namespace aoti_cuda_test;

namespace {

std::vector<std::string> regression_files(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(AOTI_CUDA_FUZZ_REGRESSIONS)) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) out.push_back(std::string(AOTI_CUDA_FUZZ_REGRESSIONS) + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Accepted, or rejected with kInvalidProgram / kNotFound: anything else fails.
template <typename Fn>
void accepted_or_rejected(const std::string& file, Fn&& fn) {
  CAPTURE(file);
  try {
    fn();
  } catch (const aoti_cuda::Error& e) {
    CHECK((e.code() == aoti_cuda::ErrorCode::kInvalidProgram || e.code() == aoti_cuda::ErrorCode::kNotFound));
  }
}

}  // namespace

TEST_CASE("fuzz seeds: the tiny ELF has every fact the inspectors read") {
  const Bytes elf = aoti_cuda_fuzz::tiny_elf();
  CHECK(elf.size() < 2048);
  const aoti_cuda::ElfInfo info = aoti_cuda::inspect_elf({elf.data(), elf.size()});
  CHECK(info.is_shared_object);
  CHECK(info.soname == "libtiny_model.so");
  CHECK(info.needed == std::vector<std::string>{"libcuda.so.1"});
  CHECK(std::count(info.undefined_symbols.begin(), info.undefined_symbols.end(), "aoti_torch_empty_strided") == 1);
  CHECK(std::count(info.defined_symbols.begin(), info.defined_symbols.end(), "AOTInductorModelContainerRun") == 1);
  CHECK(aoti_cuda::runtime::gnu_unique_symbol_offsets({elf.data(), elf.size()}).size() == 1);
  CHECK(aoti_cuda::format::defined_function_value({elf.data(), elf.size()}, "_ZN9__gnu_cxx9__freeresEv") == 0x180);
  const aoti_cuda::CudaKernelInfo k = aoti_cuda::inspect_cuda_kernels({elf.data(), elf.size()});
  CHECK(k.fatbins == 1);
  CHECK(k.sass_archs == std::vector<int>{90});
  CHECK(k.ptx_archs == std::vector<int>{90});
}

TEST_CASE("fuzz seeds: every seed program parses, with its tiny library") {
  for (const auto& [name, pte] : aoti_cuda_fuzz::pte_seeds()) {
    CAPTURE(name);
    Program p = Program::from_memory({pte.data(), pte.size()}, {}, name, false);
    CHECK_FALSE(p.methods().empty());
  }
  const BuiltProgram ptd_program = aoti_cuda_fuzz::ptd_target_program();
  Program p = Program::from_memory({ptd_program.pte.data(), ptd_program.pte.size()},
                                   {{ptd_program.ptd.data(), ptd_program.ptd.size()}}, "ptd target", true);
  REQUIRE(p.methods().size() == 1);
  CHECK(p.methods()[0].delegates.at(0).weights.size == 24);
}

TEST_CASE("fuzz regressions: .pte reproducers are accepted or rejected cleanly") {
  for (const std::string& f : regression_files("pte-")) {
    const Bytes b = read_file(f);
    accepted_or_rejected(f, [&] { (void)Program::from_memory({b.data(), b.size()}, {}, "regression", false); });
  }
}

TEST_CASE("fuzz regressions: .ptd reproducers are accepted or rejected cleanly") {
  const BuiltProgram program = aoti_cuda_fuzz::ptd_target_program();
  for (const std::string& f : regression_files("ptd-")) {
    const Bytes b = read_file(f);
    accepted_or_rejected(f, [&] {
      (void)Program::from_memory({program.pte.data(), program.pte.size()}, {{b.data(), b.size()}}, "regression", true);
    });
  }
}

TEST_CASE("fuzz regressions: ELF reproducers are inspected without reading past the bytes") {
  for (const std::string& f : regression_files("elf-")) {
    const Bytes b = read_file(f);
    const ByteView v{b.data(), b.size()};
    (void)aoti_cuda::inspect_cuda_kernels(v);
    (void)aoti_cuda::runtime::gnu_unique_symbol_offsets(v);
    (void)aoti_cuda::format::defined_function_value(v, "_ZN9__gnu_cxx9__freeresEv");
    accepted_or_rejected(f, [&] { (void)aoti_cuda::inspect_elf(v); });
  }
}
