// Programs for the fuzz targets' seeds: every one carries the tiny ELF
// (tiny_elf.hpp) where a real program has its multi-MB model library, so
// inputs stay a few KB.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "support/pte_builder.hpp"

namespace aoti_cuda_fuzz {

/// The program the .ptd target pairs every input with: one CUDA method
/// (1.1-style keys: .so in the .pte, weights in the .ptd) plus an external
/// constant whose data and layout live in the .ptd. Its .ptd is the seed.
aoti_cuda_test::BuiltProgram ptd_target_program();

/// Named .pte seeds covering the exporter generations and layouts.
std::vector<std::pair<std::string, aoti_cuda_test::Bytes>> pte_seeds();

}  // namespace aoti_cuda_fuzz
