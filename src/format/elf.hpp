// Private format layer: ELF facts beyond the public inspect_elf(), read by the
// same bounds-checked walker (elf.cpp) — the library's one ELF reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda::format {

/// File offsets of the st_info byte of every STB_GNU_UNIQUE .dynsym symbol
/// (the loader rewrites them to STB_GLOBAL so dlclose can unload the library).
/// Empty when there are none or the bytes are not a well-formed ELF64 file.
std::vector<std::size_t> gnu_unique_symbol_offsets(ByteView elf) noexcept;

/// st_value (the load-base-relative address) of the function `name` that the
/// file defines, looked up in .symtab and .dynsym (so hidden and local symbols
/// are found too). 0 when absent or when the bytes are not a well-formed ELF64
/// file.
std::uint64_t defined_function_value(ByteView elf, const char* name) noexcept;

}  // namespace aoti_cuda::format
