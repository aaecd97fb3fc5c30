// Reading and writing tensors for the CLI and benchmarks: raw little-endian
// .bin files (shape and dtype from the method signature) and NumPy .npy files
// (shape and dtype from the file), plus element conversion for printing and
// comparing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"

namespace aoti_cuda_cli {

/// Loads `path` as a host tensor. `.npy` files carry their own dtype and
/// shape, which must match `spec` (dynamic dims may be smaller). Raw files use
/// spec's dtype and sizes; for a dynamic spec the leading dimension is
/// inferred from the file size. Throws aoti_cuda::Error naming the file.
aoti_cuda::Tensor load_tensor(const std::string& path, const aoti_cuda::TensorSpec& spec);

/// A host tensor of `spec`'s (upper-bound) shape with reproducible random
/// values: floats in [-1,1), integers in [0,8), bools alternating.
aoti_cuda::Tensor random_tensor(const aoti_cuda::TensorSpec& spec, uint32_t seed);

/// Writes a host tensor as raw bytes (`.bin`) or NumPy format (`.npy`), by extension.
void save_tensor(const aoti_cuda::Tensor& t, const std::string& path);

/// Element i (row-major over a contiguous host tensor) as double.
double element_as_double(const aoti_cuda::Tensor& t, int64_t i);

/// "float32[8,10]"
std::string describe(const aoti_cuda::Tensor& t);
std::string describe(const aoti_cuda::TensorSpec& s);

struct Comparison {
  bool ok = true;
  double max_abs_err = 0;
  int64_t first_bad = -1;
  std::string message;
};
/// Compares `got` (host) with raw expected bytes: |got-want| <= atol + rtol*|want|.
Comparison compare_to_file(const aoti_cuda::Tensor& got, const std::string& expected_path, double atol, double rtol);

}  // namespace aoti_cuda_cli
