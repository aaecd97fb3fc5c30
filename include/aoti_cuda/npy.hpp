// aoti_cuda — NumPy .npy files: tensors in and out of Python without a
// custom format (numpy.save / numpy.load on the other side).
//
// Supported: format versions 1.0, 2.0 and 3.0, little-endian, C order; dtypes
// float32 (<f4), float64 (<f8), float16 (<f2), int64/32/16/8, uint8, bool, and
// bfloat16 stored as 2-byte raw values (descr <V2, as NumPy has no bfloat16).
// Fortran-ordered arrays and other dtypes are refused with kUnsupported.
//
// Errors: load_npy / parse_npy throw Error(kNotFound) for a missing file,
// kIo when it cannot be read, kInvalidArgument for a malformed file (naming
// what is wrong), kUnsupported as above. save_npy throws kInvalidArgument for
// an undefined tensor, kUnsupported for a dtype .npy cannot hold, kIo when
// writing fails.
// Thread-safety: the functions share no state.
#pragma once

#include <string>

#include "aoti_cuda/export.h"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda {

/// Reads `path` into a new owned, contiguous host tensor with the file's
/// dtype and shape.
AOTI_CUDA_API Tensor load_npy(const std::string& path);

/// Parses .npy bytes (e.g. from memory); `label` names them in messages.
AOTI_CUDA_API Tensor parse_npy(ByteView bytes, const std::string& label = "<memory>");

/// Writes `t` (any device, any strides: device or strided tensors are first
/// copied to a contiguous host tensor) as a version 1.0 .npy file.
AOTI_CUDA_API void save_npy(const Tensor& t, const std::string& path);

}  // namespace aoti_cuda
