// For the CPU suites that run fake-model programs (built with PteBuilder) on the CPU device: load one, make the
// host tensors their methods take, and read float results back.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda/tensor.hpp"
#include "support/pte_builder.hpp"

namespace aoti_cuda_test {

/// `built` as a Module on the CPU device (the fake libraries' device), with the rest of `options` as given; `name`
/// is the program's name in messages.
inline aoti_cuda::Module load_on_cpu(const BuiltProgram& built, aoti_cuda::LoadOptions options = {},
                                     const std::string& name = "fake_test.pte") {
  options.device = aoti_cuda::Device::cpu();
  return aoti_cuda::Module(aoti_cuda::Program::from_memory({built.pte.data(), built.pte.size()},
                                                           {{built.ptd.data(), built.ptd.size()}}, name),
                           options);
}

/// A float32 host tensor of `shape` holding `values`, one per element.
inline aoti_cuda::Tensor host_floats(std::vector<int64_t> shape, const std::vector<float>& values) {
  aoti_cuda::Tensor t = aoti_cuda::Tensor::empty(std::move(shape), aoti_cuda::DType::kFloat32);
  REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
  if (t.nbytes() > 0) std::memcpy(t.data(), values.data(), t.nbytes());
  return t;
}

/// A one-element int64 host tensor: the position input of the fake KV-cache methods.
inline aoti_cuda::Tensor host_position(int64_t position) {
  aoti_cuda::Tensor t = aoti_cuda::Tensor::empty({1}, aoti_cuda::DType::kInt64);
  t.data_ptr<int64_t>()[0] = position;
  return t;
}

/// The elements of a contiguous float32 host tensor.
inline std::vector<float> floats(const aoti_cuda::Tensor& t) {
  REQUIRE(t.dtype() == aoti_cuda::DType::kFloat32);
  REQUIRE(t.device().is_cpu());
  REQUIRE(t.is_contiguous());
  const float* p = t.data_ptr<float>();
  return std::vector<float>(p, p + t.numel());
}

}  // namespace aoti_cuda_test
