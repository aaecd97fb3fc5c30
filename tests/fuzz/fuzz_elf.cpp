// libFuzzer target: everything that reads a model library's bytes before (or
// instead of) dlopen — inspect_elf, the import check, the fat-binary scan, and
// the loader's own table walks (STB_GNU_UNIQUE patch offsets, the
// __gnu_cxx::__freeres lookup). Contract as for fuzz_pte.cpp; the table walks
// never throw at all.
#include <cstdint>
#include <cstdlib>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "format/elf.hpp"
#include "runtime/library_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const aoti_cuda::ByteView so{data, size};
  (void)aoti_cuda::inspect_cuda_kernels(so);
  for (std::size_t off : aoti_cuda::runtime::gnu_unique_symbol_offsets(so)) {
    if (off >= size) std::abort();  // the loader writes at these offsets
  }
  (void)aoti_cuda::format::defined_function_value(so, "_ZN9__gnu_cxx9__freeresEv");
  try {
    const aoti_cuda::ElfInfo info = aoti_cuda::inspect_elf(so);
    (void)aoti_cuda::runtime::missing_imports(info);
  } catch (const aoti_cuda::Error&) {
  }
  return 0;
}
