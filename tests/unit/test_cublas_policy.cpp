// When the loader opens cuBLAS early (runtime/method_loader.hpp: open_cublas_early): mapping it
// costs about 150 MiB of host memory, so a program that needs it only for the int4 matmul's
// many-row path opens it early only when its inputs can reach that many rows.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "runtime/method_loader.hpp"
#include "shim/ops/gemm.hpp"

namespace {

using aoti_cuda::DType;
using aoti_cuda::MethodSpec;
using aoti_cuda::ValueKind;
using aoti_cuda::ValueSpec;
using aoti_cuda::runtime::max_input_rows;
using aoti_cuda::runtime::open_cublas_early;
using aoti_cuda::shim::gemm::CublasUse;

ValueSpec tensor(DType dtype, std::vector<int64_t> sizes, bool dynamic = false) {
  ValueSpec v;
  v.kind = ValueKind::kTensor;
  v.tensor.dtype = dtype;
  v.tensor.sizes = std::move(sizes);
  v.tensor.dynamic = dynamic;
  return v;
}

MethodSpec method(std::vector<ValueSpec> inputs) {
  MethodSpec m;
  m.name = "m";
  m.inputs = std::move(inputs);
  return m;
}

}  // namespace

TEST_CASE("cublas policy: rows a method's inputs can reach") {
  // Activations [batch, rows, features]: every dimension but the features.
  CHECK(max_input_rows(method({tensor(DType::kBFloat16, {2, 40, 2048})})) == 80);
  CHECK(max_input_rows(method({tensor(DType::kFloat32, {8, 64})})) == 8);
  // Token ids [1, T] (T an upper bound when dynamic): every element is a row.
  CHECK(max_input_rows(method({tensor(DType::kInt64, {1, 1024}, true)})) == 1024);
  // The largest input decides; a scalar or a non-tensor input counts one row or none.
  ValueSpec none;
  none.kind = ValueKind::kInt;
  CHECK(max_input_rows(method({tensor(DType::kInt64, {1, 1}), tensor(DType::kFloat32, {300, 16}), none})) == 300);
  CHECK(max_input_rows(method({tensor(DType::kFloat32, {})})) == 1);
  CHECK(max_input_rows(method({none})) == 0);
  // Sizes that would overflow saturate instead.
  const int64_t big = int64_t{1} << 40;
  CHECK(max_input_rows(method({tensor(DType::kInt32, {big, big, 4})})) == std::numeric_limits<int64_t>::max());
}

TEST_CASE("cublas policy: opened early only when a call will need it") {
  const MethodSpec decode = method({tensor(DType::kInt64, {1, 1}), tensor(DType::kInt64, {1})});
  const MethodSpec prefill = method({tensor(DType::kInt64, {1, 128}, true), tensor(DType::kInt64, {128}, true)});
  const MethodSpec small = method({tensor(DType::kFloat32, {8, 64})});
  // Extern GEMMs need it on every call.
  CHECK(open_cublas_early(CublasUse::kAlways, {&small}, 65));
  CHECK(open_cublas_early(CublasUse::kAlways, {}, 0));
  // Nothing imported that uses it.
  CHECK_FALSE(open_cublas_early(CublasUse::kNone, {&prefill}, 65));
  // int4 only: a prompt can reach the dequantize + GEMM path; decode and small fixed inputs cannot.
  CHECK(open_cublas_early(CublasUse::kManyRows, {&decode, &prefill}, 65));
  CHECK_FALSE(open_cublas_early(CublasUse::kManyRows, {&decode}, 65));
  CHECK_FALSE(open_cublas_early(CublasUse::kManyRows, {&small}, 65));
  CHECK(open_cublas_early(CublasUse::kManyRows, {&small}, 8));  // the threshold is the Module's tuning
  // int4_dequant_min_m = 0 turns that path off: cuBLAS is never needed.
  CHECK_FALSE(open_cublas_early(CublasUse::kManyRows, {&prefill}, 0));
}

TEST_CASE("cublas policy: what each shim needs") {
  using aoti_cuda::shim::gemm::cublas_use;
  CHECK(cublas_use("aoti_torch_cuda_mm_out") == CublasUse::kAlways);
  CHECK(cublas_use("aoti_torch_cuda_addmm_out") == CublasUse::kAlways);
  CHECK(cublas_use("aoti_torch_cuda__weight_int4pack_mm") == CublasUse::kManyRows);
  CHECK(cublas_use("aoti_torch_cuda_int4_plain_mm") == CublasUse::kNone);
  CHECK(cublas_use("aoti_torch_empty_strided") == CublasUse::kNone);
}
