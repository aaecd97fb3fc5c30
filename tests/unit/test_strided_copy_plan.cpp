// How the device strided copy plans its dimensions (host code: no GPU needed): size-1 dimensions
// dropped, dimensions contiguous in both layouts merged, what the kernel cannot express refused.
// The kernel itself is checked on the GPU (tests/gpu/test_conformance.cpp).
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "common/strided_copy_kernel.hpp"

using aoti_cuda::common::kMaxStridedCopyDims;
using aoti_cuda::common::plan_strided_copy;
using aoti_cuda::common::StridedCopyPlan;

namespace {

StridedCopyPlan plan_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dst,
                        const std::vector<int64_t>& src, int expected_status = 0) {
  StridedCopyPlan p;
  CHECK(plan_strided_copy(dst.data(), src.data(), sizes.data(), static_cast<int>(sizes.size()), p) ==
        expected_status);
  return p;
}

std::vector<int64_t> dims(const int64_t* values, int n) { return std::vector<int64_t>(values, values + n); }

}  // namespace

TEST_CASE("strided copy plan: two row-major layouts become one run") {
  const StridedCopyPlan p = plan_of({4, 6, 5}, {30, 5, 1}, {30, 5, 1});
  CHECK(p.ndim == 1);
  CHECK(p.numel == 120);
  CHECK(p.sizes[0] == 120);
  CHECK(p.dst_strides[0] == 1);
  CHECK(p.src_strides[0] == 1);
}

TEST_CASE("strided copy plan: a transpose keeps its two dimensions; size-1 dimensions are dropped") {
  // [1, 8, 10] row-major <- the same shape stored transposed (strides 80 / 1 / 8), as fp16_mlp's output.
  const StridedCopyPlan p = plan_of({1, 8, 10}, {80, 10, 1}, {80, 1, 8});
  CHECK(p.ndim == 2);
  CHECK(p.numel == 80);
  CHECK(dims(p.sizes, 2) == std::vector<int64_t>{8, 10});
  CHECK(dims(p.dst_strides, 2) == std::vector<int64_t>{10, 1});
  CHECK(dims(p.src_strides, 2) == std::vector<int64_t>{1, 8});
}

TEST_CASE("strided copy plan: only the dimensions contiguous in both layouts merge") {
  // [4, 6, 5]: the destination is row-major; the source keeps rows of 5 contiguous inside a
  // [4, 6] grid laid out column-major, so the last two dimensions merge only in the destination.
  const StridedCopyPlan p = plan_of({4, 6, 5}, {30, 5, 1}, {5, 20, 1});
  CHECK(p.ndim == 3);
  CHECK(p.numel == 120);
  // A [2, 3, 4, 5] source whose two middle dimensions are contiguous (80 = 4 x 20) but not the
  // last two (20 != 5 x 2), into row-major memory: 4 -> 3 dimensions.
  const StridedCopyPlan q = plan_of({2, 3, 4, 5}, {60, 20, 5, 1}, {1, 80, 20, 2});
  CHECK(q.ndim == 3);
  CHECK(dims(q.sizes, 3) == std::vector<int64_t>{2, 12, 5});
  CHECK(dims(q.dst_strides, 3) == std::vector<int64_t>{60, 5, 1});
  CHECK(dims(q.src_strides, 3) == std::vector<int64_t>{1, 20, 2});
  // The same with the last two contiguous too (10 = 5 x 2): everything past the first merges.
  const StridedCopyPlan r = plan_of({2, 3, 4, 5}, {60, 20, 5, 1}, {1, 40, 10, 2});
  CHECK(r.ndim == 2);
  CHECK(dims(r.sizes, 2) == std::vector<int64_t>{2, 60});
  CHECK(dims(r.src_strides, 2) == std::vector<int64_t>{1, 2});
}

TEST_CASE("strided copy plan: empty and single-element copies") {
  const StridedCopyPlan empty = plan_of({3, 0, 2}, {0, 2, 1}, {0, 2, 1});
  CHECK(empty.numel == 0);
  CHECK(empty.ndim == 0);
  const StridedCopyPlan one = plan_of({1, 1}, {7, 3}, {1, 1});
  CHECK(one.numel == 1);
  CHECK(one.ndim == 0);
  const StridedCopyPlan scalar = plan_of({}, {}, {});
  CHECK(scalar.numel == 1);
}

TEST_CASE("strided copy plan: what the kernel cannot express is refused") {
  plan_of({2, 3}, {3, -1}, {3, 1}, cudaErrorInvalidValue);  // negative stride
  // Nine dimensions of size 2 that never merge (each stride 3x the next in the source).
  std::vector<int64_t> sizes(kMaxStridedCopyDims + 1, 2), dst(sizes.size()), src(sizes.size());
  int64_t step = 1, step3 = 1;
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    dst[i] = step;
    src[i] = step3;
    step *= 2;
    step3 *= 3;
  }
  plan_of(sizes, dst, src, cudaErrorInvalidValue);
  sizes.pop_back();
  dst.pop_back();
  src.pop_back();
  for (int64_t& d : dst) d /= 2;  // eight dimensions: expressible
  for (int64_t& s : src) s /= 3;
  CHECK(plan_of(sizes, dst, src).ndim == kMaxStridedCopyDims);
}
