// aoti_cuda shim — the int4 matmul's weight-streaming kernel for few rows (M <= 8 in the dispatch,
// a tuning candidate up to 16), compiled in weight_int4pack_gemv.cu; the tile kernels and the
// dispatch (weight_int4pack_mm.cu) launch it through these. Internal to the int4 kernels.
#pragma once

#include <cuda_runtime.h>

#include "shim/ops/int4_common.cuh"
#include "shim/ops/weight_int4pack_mm.hpp"

namespace aoti_cuda {
namespace shim {
namespace int4mm {

/// The kernel with chunks of U k-super-tiles per warp, NP n-tile pairs per block and at most
/// KWMax warps per block; innerKTiles IKT. Instantiated for the combinations the dispatch and the
/// tuning candidates use (weight_int4pack_gemv.cu).
template <int IKT, int U, int NP, int KWMax>
cudaError_t launch_gemv(const Problem& p, const Shape& s, cudaStream_t stream);

/// The dispatch's choice among those for a problem of innerKTiles IKT (2, 4 or 8).
template <int IKT>
cudaError_t launch_gemv_default(const Problem& p, const Shape& s, cudaStream_t stream);

}  // namespace int4mm
}  // namespace shim
}  // namespace aoti_cuda
