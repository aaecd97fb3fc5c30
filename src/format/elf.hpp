// Private format layer: ELF facts beyond the public inspect_elf(), read by the
// same bounds-checked walker (elf.cpp) — the library's one ELF reader.
#pragma once

#include <cstddef>
#include <vector>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda::format {

/// File offsets of the st_info byte of every STB_GNU_UNIQUE .dynsym symbol
/// (the loader rewrites them to STB_GLOBAL so dlclose can unload the library).
/// Empty when there are none or the bytes are not a well-formed ELF64 file.
std::vector<std::size_t> gnu_unique_symbol_offsets(ByteView elf) noexcept;

}  // namespace aoti_cuda::format
