// A tiny but well-formed ELF64 shared object (~1 KB) for fuzz seeds: it has
// everything the inspectors read — .dynsym with undefined shim/cudart imports,
// AOTInductor exports and an STB_GNU_UNIQUE object, .dynamic with DT_NEEDED and
// DT_SONAME, a .symtab with __gnu_cxx::__freeres, and an embedded CUDA fat
// binary (sm_90 SASS + compute_90 PTX) — and nothing else, so a program built
// around it stays a few KB and the fuzzer runs thousands of inputs a second.
// It cannot be dlopen'ed (no program headers); inspection only.
#pragma once

#include <cstdint>
#include <vector>

namespace aoti_cuda_fuzz {

std::vector<std::uint8_t> tiny_elf();

}  // namespace aoti_cuda_fuzz
