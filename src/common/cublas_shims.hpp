// Private: which operator shims a model library may import that multiply
// through cuBLAS, in one place for the loader (open cuBLAS early,
// shim/ops/gemm.hpp) and the library check (can cuBLAS be found).
#pragma once

#include <array>
#include <string_view>

namespace aoti_cuda::common {

/// The extern GEMMs of a program exported with Inductor's ATEN GEMM backend:
/// cuBLAS is required for them.
inline constexpr std::array<std::string_view, 3> kExternGemmShims = {
    "aoti_torch_cuda_mm_out", "aoti_torch_cuda_addmm_out", "aoti_torch_cuda_bmm_out"};
/// The int4 matmul: uses cuBLAS at large M when present, runs without it.
inline constexpr std::string_view kInt4MatmulShim = "aoti_torch_cuda__weight_int4pack_mm";

inline bool is_extern_gemm_shim(std::string_view symbol) noexcept {
  for (std::string_view name : kExternGemmShims) {
    if (symbol == name) return true;
  }
  return false;
}

}  // namespace aoti_cuda::common
