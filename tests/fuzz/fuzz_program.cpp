// libFuzzer target for the reader: any byte string must be either accepted or
// rejected with aoti_cuda::Error — never a crash, hang, sanitizer report or
// other exception.
//
// Input layout: u32 little-endian length N, then N bytes of .pte, then the
// rest as one .ptd (so the fuzzer can mutate both files and their interplay).
// Seeds: tests/fuzz/make_corpus.sh builds them from the fixtures.
#include <cstdint>
#include <cstring>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t n;
  std::memcpy(&n, data, 4);
  data += 4;
  size -= 4;
  if (n > size) n = static_cast<std::uint32_t>(size);
  // Copies keep the fuzzer's buffer boundaries exact for ASan.
  std::vector<std::uint8_t> pte(data, data + n), ptd(data + n, data + size);
  std::vector<aoti_cuda::ByteView> data_files;
  if (!ptd.empty()) data_files.push_back({ptd.data(), ptd.size()});
  try {
    aoti_cuda::Program p = aoti_cuda::Program::from_memory({pte.data(), pte.size()}, data_files, "fuzz", false);
    for (const aoti_cuda::MethodSpec& m : p.methods()) {
      for (const aoti_cuda::DelegateSpec& d : m.delegates) {
        (void)aoti_cuda::inspect_cuda_kernels(d.so);
        try {
          (void)aoti_cuda::inspect_elf(d.so);
        } catch (const aoti_cuda::Error&) {
        }
      }
    }
    for (const aoti_cuda::NamedDataInfo& e : p.named_data_entries()) (void)p.named_data(e.key);
  } catch (const aoti_cuda::Error&) {
  }
  return 0;
}
