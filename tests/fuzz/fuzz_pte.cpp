// libFuzzer target: the .pte reader. Any byte string must be accepted or
// rejected with aoti_cuda::Error — never a crash, hang, leak, sanitizer report
// or other exception. Data files are not required (require_data = false), so
// the walk reaches every method, delegate and named-data entry of the .pte.
#include <cstdint>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "touch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    aoti_cuda::Program p = aoti_cuda::Program::from_memory({data, size}, {}, "fuzz.pte", false);
    for (const aoti_cuda::MethodSpec& m : p.methods()) {
      for (const aoti_cuda::DelegateSpec& d : m.delegates) {
        aoti_cuda_fuzz::touch(d.so);
        aoti_cuda_fuzz::touch(d.weights);
        (void)inspect_cuda_kernels(d.so);
      }
    }
    for (const aoti_cuda::NamedDataInfo& e : p.named_data_entries()) {
      if (auto v = p.named_data(e.key)) aoti_cuda_fuzz::touch(*v);
    }
  } catch (const aoti_cuda::Error&) {
  }
  return 0;
}
