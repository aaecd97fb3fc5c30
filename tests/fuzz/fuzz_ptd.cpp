// libFuzzer target: the .ptd (FlatTensor) reader and how the program resolves
// its blobs and external constants from it. The input is the data file; the
// program is fixed (seed_programs.hpp), so every input exercises the
// .pte-to-.ptd lookups. Contract as for fuzz_pte.cpp.
#include <cstdint>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "seed_programs.hpp"
#include "touch.hpp"

namespace {
const aoti_cuda_test::Bytes& program_bytes() {
  static const aoti_cuda_test::Bytes pte = aoti_cuda_fuzz::ptd_target_program().pte;
  return pte;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const aoti_cuda_test::Bytes& pte = program_bytes();
  // Strict lookups (require_data) fail at open, lenient ones later; the
  // input's length picks one, so each execution parses once.
  {
    const bool require = size % 2 == 0;
    try {
      aoti_cuda::Program p =
          aoti_cuda::Program::from_memory({pte.data(), pte.size()}, {{data, size}}, "fuzz.pte", require);
      for (const aoti_cuda::NamedDataInfo& e : p.named_data_entries()) {
        if (auto v = p.named_data(e.key)) aoti_cuda_fuzz::touch(*v);
      }
      for (const aoti_cuda::MethodSpec& m : p.methods()) {
        for (const aoti_cuda::DelegateSpec& d : m.delegates) aoti_cuda_fuzz::touch(d.weights);
      }
    } catch (const aoti_cuda::Error&) {
    }
  }
  return 0;
}
