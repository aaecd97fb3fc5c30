// The low layer (src/common), tested directly through aoti_cuda_core: the
// device guard's host policy, the strided copy engine on host memory (the path
// both the shim and Tensor take), and the bounds-checked ELF walker's
// GNU_UNIQUE scan on malformed input.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/tensor.hpp"
#include "common/cuda.hpp"
#include "common/dtype_convert.hpp"
#include "common/kernel_timer.hpp"
#include "common/small_copy.hpp"
#include "common/strided_copy.hpp"
#include "common/text.hpp"
#include "format/elf.hpp"

using aoti_cuda::common::View;

namespace {

View host_view(void* data, std::vector<int64_t> sizes, std::vector<int64_t> strides, int32_t dtype) {
  View v;
  v.data = static_cast<char*>(data);
  v.sizes = std::move(sizes);
  v.strides = std::move(strides);
  v.dtype = dtype;
  return v;
}

}  // namespace

TEST_CASE("common: a DeviceGuard for a negative ordinal is host work and touches no CUDA state") {
  // Without a GPU any cudart call would fail; the guard must neither call nor throw.
  CHECK_NOTHROW(aoti_cuda::common::DeviceGuard(-1));
  CHECK_NOTHROW(aoti_cuda::common::DeviceGuard(-1, aoti_cuda::common::DeviceGuard::OnFailure::kThrow));
}

TEST_CASE("common: the copy engine transposes, broadcasts and converts on the host") {
  // 2x3 int32 source read transposed into a 3x2 float32 destination.
  const std::vector<int32_t> src = {1, 2, 3, 4, 5, 6};
  std::vector<float> dst(6, -1.0f);
  aoti_cuda::common::copy_views(host_view(dst.data(), {3, 2}, {2, 1}, 6),
                                host_view(const_cast<int32_t*>(src.data()), {3, 2}, {1, 3}, 3), false, nullptr);
  CHECK(dst == std::vector<float>{1, 4, 2, 5, 3, 6});

  // A row broadcast over 3 rows (stride-0 source after broadcasting).
  const std::vector<float> row = {7, 8};
  aoti_cuda::common::copy_views(host_view(dst.data(), {3, 2}, {2, 1}, 6),
                                host_view(const_cast<float*>(row.data()), {2}, {1}, 6), false, nullptr);
  CHECK(dst == std::vector<float>{7, 8, 7, 8, 7, 8});

  // Shapes that do not broadcast are refused.
  CHECK_THROWS_AS(aoti_cuda::common::copy_views(host_view(dst.data(), {3, 2}, {2, 1}, 6),
                                                host_view(const_cast<float*>(row.data()), {3}, {1}, 6), false, nullptr),
                  aoti_cuda::Error);
}

TEST_CASE("common: overlapping host copies read the source before writing") {
  // Shift [0, 1, 2, 3, 4] right by one inside the same buffer: a forward
  // element loop would smear element 0 over everything.
  std::vector<int64_t> buf = {0, 1, 2, 3, 4, 5};
  aoti_cuda::common::copy_views(host_view(buf.data() + 1, {5}, {1}, 4), host_view(buf.data(), {5}, {1}, 4), false,
                                nullptr);
  CHECK(buf == std::vector<int64_t>{0, 0, 1, 2, 3, 4});
}

TEST_CASE("common: Tensor::copy_from uses the engine for strided host copies, negative strides included") {
  using aoti_cuda::Device;
  using aoti_cuda::DType;
  using aoti_cuda::Tensor;
  float data[4] = {1, 2, 3, 4};
  // A reversed view: element i is data[3 - i].
  Tensor reversed = Tensor::from_blob(data + 3, {4}, DType::kFloat32, Device::cpu(), {-1});
  Tensor out = Tensor::empty({4}, DType::kFloat32, Device::cpu());
  out.copy_from(reversed);
  std::vector<float> got(static_cast<const float*>(out.data()), static_cast<const float*>(out.data()) + 4);
  CHECK(got == std::vector<float>{4, 3, 2, 1});
}

TEST_CASE("common: half and bfloat16 round to nearest even in the one conversion") {
  using namespace aoti_cuda::common;
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(half_bits_to_float(0x3c00) == 1.0f);
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 0x3f81 and 0x3f82: ties go to the even one
  // (truncation would give 0x3f81).
  CHECK(float_to_bfloat16_bits(1.01171875f) == 0x3f82);
  float h = 0;
  const uint16_t two = 0x4000;
  convert_element(&two, 5, &h, 6);
  CHECK(h == 2.0f);
  CHECK(join({"a", "b"}, "; ") == "a; b");
}

TEST_CASE("format: the GNU_UNIQUE scan shares the bounds-checked ELF walker and gives up on bad tables") {
  // A minimal ELF64 header whose section header table points past the end.
  std::vector<std::uint8_t> elf(64, 0);
  const std::uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::memcpy(elf.data(), ident, sizeof ident);
  const std::uint64_t shoff = 1u << 20;
  std::memcpy(elf.data() + 40, &shoff, 8);
  const std::uint16_t shentsize = 64, shnum = 3;
  std::memcpy(elf.data() + 58, &shentsize, 2);
  std::memcpy(elf.data() + 60, &shnum, 2);
  CHECK(aoti_cuda::format::gnu_unique_symbol_offsets({elf.data(), elf.size()}).empty());
  // The public walker reports the same table as a bounds failure.
  CHECK_THROWS_WITH_AS(aoti_cuda::inspect_elf({elf.data(), elf.size()}), doctest::Contains("bounds"), aoti_cuda::Error);
}

TEST_CASE("kernel timer: current only inside its scope; without a GPU nothing is recorded and nothing leaks") {
  using aoti_cuda::common::KernelTimer;
  CHECK(KernelTimer::current() == nullptr);
  KernelTimer outer, inner;
  {
    KernelTimer::Scope a(&outer);
    CHECK(KernelTimer::current() == &outer);
    {
      KernelTimer::Scope b(&inner);
      CHECK(KernelTimer::current() == &inner);
    }
    CHECK(KernelTimer::current() == &outer);
    // No timer: a no-op, whatever happens to the launch.
    KernelTimer::Launch none(nullptr, nullptr, "x", nullptr);
    none.done(true);
  }
  CHECK(KernelTimer::current() == nullptr);
  {
    // Events cannot be had without a GPU (or the launch "failed"): the launch is left out.
    KernelTimer::Launch failed(&outer, nullptr, "failed launch", nullptr);
    failed.done(false);
    KernelTimer::Launch unfinished(&outer, nullptr, "threw before done()", nullptr);
  }
  CHECK(outer.finish().empty());
  CHECK(aoti_cuda::common::kernel_function_name(nullptr).rfind("kernel ", 0) == 0);
}

TEST_CASE("small copies: a list holds at most kCopyListMax copies, and an empty or overfull one makes no node") {
  namespace common = aoti_cuda::common;
  common::CopyList list;
  char a[4] = {}, b[4] = {};
  for (int i = 0; i < common::kCopyListMax; ++i) CHECK(list.add(a, b, sizeof a));
  CHECK_FALSE(list.add(a, b, sizeof a));  // full: nothing added
  CHECK(list.count == common::kCopyListMax);
  // Refused before any CUDA call (no GPU needed): the node would launch no copy, or read past the lists.
  cudaGraphNode_t node = nullptr;
  common::CopyList none;
  CHECK(common::add_copy_list_node(&node, nullptr, nullptr, 0, none) == static_cast<int>(cudaErrorInvalidValue));
  list.count = common::kCopyListMax + 1;
  CHECK(common::set_copy_list_node(nullptr, nullptr, list) == static_cast<int>(cudaErrorInvalidValue));
  CHECK(node == nullptr);
}
