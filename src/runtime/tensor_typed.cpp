// Out-of-line error paths of Tensor's typed helpers (data_ptr<T>, from_vector<T>).
#include <string>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/tensor.hpp"

namespace aoti_cuda {

void Tensor::throw_dtype_mismatch(const char* dtype, const char* type) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string("data_ptr<") + type + ">() on a " + dtype + " tensor: the element type does not match");
}

void Tensor::throw_size_mismatch(int64_t numel, std::size_t values) {
  throw Error(ErrorCode::kInvalidArgument, "from_vector: the shape holds " + std::to_string(numel) + " elements, " +
                                               std::to_string(values) + " values given");
}

}  // namespace aoti_cuda
