// aoti_cuda — umbrella header. Run ExecuTorch CUDA-delegate programs without
// libtorch or the ExecuTorch runtime.
#pragma once

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/error.hpp"
#include "aoti_cuda/memory.hpp"
#include "aoti_cuda/module.hpp"
#include "aoti_cuda/log.hpp"
#include "aoti_cuda/npy.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/tensor.hpp"
#include "aoti_cuda/version.hpp"
