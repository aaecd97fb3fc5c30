// The CLI's tensor files: raw .bin with shapes from the method (dynamic
// dimensions inferred or given), .npy round trips, comparisons.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tensor_io.hpp"

namespace {

using aoti_cuda::DType;
using aoti_cuda::TensorSpec;

std::string temp_path(const std::string& name) { return std::string(AOTI_CUDA_BINARY_DIR) + "/tensor_io_" + name; }

void write_floats(const std::string& path, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n * 4));
}

TensorSpec spec(std::vector<int64_t> sizes, bool dynamic, DType t = DType::kFloat32) {
  TensorSpec s;
  s.dtype = t;
  s.sizes = std::move(sizes);
  s.dim_order.resize(s.sizes.size());
  s.dynamic = dynamic;
  return s;
}

}  // namespace

TEST_CASE("cli tensor io: raw files take the method's shape") {
  const std::string p = temp_path("static.bin");
  write_floats(p, 12);
  aoti_cuda::Tensor t = aoti_cuda_cli::load_tensor(p, spec({3, 4}, false));
  CHECK(t.shape() == std::vector<int64_t>{3, 4});
  CHECK(aoti_cuda_cli::element_as_double(t, 11) == 11.0);
  CHECK_THROWS_WITH_AS(aoti_cuda_cli::load_tensor(p, spec({3, 5}, false)), doctest::Contains("is 48 bytes but float32[3,5]"),
                       aoti_cuda::Error);
  std::remove(p.c_str());
}

TEST_CASE("cli tensor io: dynamic shapes are inferred when unambiguous, else given with @") {
  const std::string p = temp_path("dynamic.bin");
  write_floats(p, 17 * 64);
  // Both dimensions could shrink to 17: the leading (batch) one is preferred.
  CHECK(aoti_cuda_cli::load_tensor(p, spec({64, 64}, true)).shape() == std::vector<int64_t>{17, 64});
  // [1,2,<=128,<=32] with 1024 elements: [1,2,16,32] or [1,2,128,4] -> ambiguous.
  write_floats(p, 1024);
  CHECK_THROWS_WITH_AS(aoti_cuda_cli::load_tensor(p, spec({1, 2, 128, 32}, true)), doctest::Contains("unambiguously"),
                       aoti_cuda::Error);
  CHECK(aoti_cuda_cli::load_tensor(p + "@1,2,16,32", spec({1, 2, 128, 32}, true)).shape() ==
        std::vector<int64_t>{1, 2, 16, 32});
  // An explicit shape beyond the bound is refused.
  CHECK_THROWS_WITH_AS(aoti_cuda_cli::load_tensor(p + "@1,2,256,2", spec({1, 2, 128, 32}, true)),
                       doctest::Contains("but float32[<=1,<=2,<=128,<=32] is expected"), aoti_cuda::Error);
  std::remove(p.c_str());
}

TEST_CASE("cli tensor io: .npy round trip and comparison") {
  aoti_cuda::Tensor t = aoti_cuda_cli::random_tensor(spec({2, 3}, false), 5);
  const std::string npy = temp_path("rt.npy"), bin = temp_path("rt.bin");
  aoti_cuda_cli::save_tensor(t, npy);
  aoti_cuda_cli::save_tensor(t, bin);
  aoti_cuda::Tensor back = aoti_cuda_cli::load_tensor(npy, spec({2, 3}, false));
  CHECK(back.shape() == t.shape());
  for (int64_t i = 0; i < 6; ++i) CHECK(aoti_cuda_cli::element_as_double(back, i) == aoti_cuda_cli::element_as_double(t, i));
  CHECK(aoti_cuda_cli::compare_to_file(t, bin, 0, 0).ok);
  // A wrong dtype in the .npy is named.
  CHECK_THROWS_WITH_AS(aoti_cuda_cli::load_tensor(npy, spec({2, 3}, false, DType::kInt32)),
                       doctest::Contains("holds float32 but int32 is expected"), aoti_cuda::Error);
  // Mismatching values are reported.
  t.data_ptr<float>()[4] += 1.0f;
  const auto c = aoti_cuda_cli::compare_to_file(t, bin, 1e-3, 0);
  CHECK_FALSE(c.ok);
  CHECK(c.first_bad == 4);
  std::remove(npy.c_str());
  std::remove(bin.c_str());
}

TEST_CASE("cli tensor io: --expect reads .npy (dtype and shape from the file) as well as raw .bin") {
  aoti_cuda::Tensor t = aoti_cuda::Tensor::empty({2, 3}, aoti_cuda::DType::kFloat32);
  for (int i = 0; i < 6; ++i) static_cast<float*>(t.data())[i] = static_cast<float>(i) * 0.5f;
  const std::string npy = temp_path("expect.npy"), bin = temp_path("expect.bin");
  aoti_cuda_cli::save_tensor(t, npy);
  aoti_cuda_cli::save_tensor(t, bin);
  CHECK(aoti_cuda_cli::compare_to_file(t, npy, 0, 0).ok);
  CHECK(aoti_cuda_cli::compare_to_file(t, bin, 0, 0).ok);
  aoti_cuda::Tensor other = aoti_cuda::Tensor::empty({3, 2}, aoti_cuda::DType::kFloat32);
  std::memcpy(other.data(), t.data(), t.nbytes());
  const aoti_cuda_cli::Comparison c = aoti_cuda_cli::compare_to_file(other, npy, 0, 0);
  CHECK_FALSE(c.ok);  // same bytes, different shape: a .npy knows
  CHECK(c.message.find("has shape [2,3] but float32[3,2] is expected") != std::string::npos);
  static_cast<float*>(t.data())[4] += 1.0f;
  const aoti_cuda_cli::Comparison d = aoti_cuda_cli::compare_to_file(t, npy, 1e-3, 0);
  CHECK_FALSE(d.ok);
  CHECK(d.first_bad == 4);
}
