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

#include <functional>
#include <string>

namespace aoti_cuda::format {

/// A pointer-sized slot that the dynamic linker fills with the address of an
/// imported (undefined) .dynsym symbol: a JUMP_SLOT, GLOB_DAT or 64-bit
/// absolute relocation.
struct ImportSlot {
  std::string symbol;        ///< the imported name, e.g. "cudaMemcpy"
  std::uint64_t offset = 0;  ///< load-base-relative address of the slot (always inside a PT_LOAD segment)
  std::int64_t addend = 0;   ///< added to the symbol's address (0 for JUMP_SLOT / GLOB_DAT)
  bool in_relro = false;     ///< inside PT_GNU_RELRO: read-only once the library is relocated
};

/// Every import slot of an undefined .dynsym symbol for which `wanted(name)`
/// is true, in relocation-table order. Throws Error(kInvalidProgram) naming
/// the failed check when a relocation table, its symbol index or a slot lies
/// outside the file's tables or loadable segments (a slot outside the
/// library's own mapping is never accepted: the loader writes to it).
std::vector<ImportSlot> import_slots(ByteView elf, const std::function<bool(const std::string&)>& wanted);

}  // namespace aoti_cuda::format
