// Shim C ABI on CUDA tensors: allocation, streams, guards, copies in every
// direction, clones, item, memory statistics, out-of-memory. Needs a GPU.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/memory.hpp"
#include "aoti_cuda/shim.h"
#include "shim/allocator.hpp"
#include "shim/tensor_object.hpp"
#include "support/gpu.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::iota_f32;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;

namespace {
const int32_t kF32 = 6;
const int32_t kCUDA = 1;

OwnedTensor cuda_empty(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides = {},
                       int32_t dtype = kF32) {
  return empty(sizes, strides, dtype, kCUDA, 0);
}

// Device tensor with the same sizes, strides and elements as a host tensor.
OwnedTensor to_device(const OwnedTensor& host) {
  std::vector<int64_t> sizes = host.sizes();
  std::vector<int64_t> strides = host.strides();
  int32_t dtype = 0;
  REQUIRE(aoti_torch_get_dtype(host.get(), &dtype) == 0);
  OwnedTensor out = empty(sizes, strides, dtype, kCUDA, 0);
  REQUIRE_MESSAGE(aoti_torch_copy_(out.get(), host.get(), 0) == 0, aoti_cuda_shim_last_error());
  return out;
}

// Whole storage of a tensor copied back to the host.
template <class T>
std::vector<T> storage_to_host(const OwnedTensor& t) {
  int64_t bytes = 0;
  REQUIRE(aoti_torch_get_storage_size(t.get(), &bytes) == 0);
  std::vector<T> out(static_cast<std::size_t>(bytes) / sizeof(T));
  char* base = static_cast<char*>(t.data()) - t.offset() * static_cast<int64_t>(sizeof(T));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(out.data(), base, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

// Contiguous host copy of a (possibly strided) tensor via the shim.
std::vector<float> elements_f32(const OwnedTensor& t) {
  std::vector<int64_t> sizes = t.sizes();
  OwnedTensor host = empty(sizes, {}, kF32);
  REQUIRE_MESSAGE(aoti_torch_copy_(host.get(), t.get(), 0) == 0, aoti_cuda_shim_last_error());
  int64_t numel = 0;
  REQUIRE(aoti_torch_get_numel(host.get(), &numel) == 0);
  const float* p = host.data_as<float>();
  return std::vector<float>(p, p + numel);
}

OwnedTensor view(const OwnedTensor& base, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset) {
  OwnedTensor v;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(),
                                         offset, v.out()) == 0);
  return v;
}
}  // namespace

TEST_CASE("cuda shim: empty_strided allocates device memory and tracks statistics" * AOTI_CUDA_GPU_CASE) {
  const aoti_cuda::MemoryStats before = aoti_cuda::device_memory_stats(0);
  {
    OwnedTensor t = cuda_empty({256, 4});
    int32_t v = -1;
    REQUIRE(aoti_torch_get_device_type(t.get(), &v) == 0);
    CHECK(v == kCUDA);
    REQUIRE(aoti_torch_get_device_index(t.get(), &v) == 0);
    CHECK(v == 0);
    CHECK(reinterpret_cast<uintptr_t>(t.data()) % 16 == 0);
    cudaPointerAttributes attr{};
    REQUIRE(cudaPointerGetAttributes(&attr, t.data()) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice);
    CHECK(attr.device == 0);
    aoti_cuda::MemoryStats during = aoti_cuda::device_memory_stats(0);
    CHECK(during.bytes_in_use == before.bytes_in_use + 4096);
    CHECK(during.live_allocations == before.live_allocations + 1);
    CHECK(during.total_allocations == before.total_allocations + 1);
    CHECK(during.peak_bytes_in_use >= during.bytes_in_use);
    CHECK(during.pool_reserved_bytes >= 4096);
    // device index -1 = current device
    OwnedTensor cur;
    int64_t sizes[] = {3};
    REQUIRE(aoti_torch_empty_strided(1, sizes, nullptr, kF32, kCUDA, -1, cur.out()) == 0);
    REQUIRE(aoti_torch_get_device_index(cur.get(), &v) == 0);
    CHECK(v == 0);
  }
  const aoti_cuda::MemoryStats after = aoti_cuda::device_memory_stats(0);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.live_allocations == before.live_allocations);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cuda shim: contiguous H2D / D2H / D2D round trip" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor host = iota_f32({64, 33});
  OwnedTensor dev = to_device(host);
  OwnedTensor dev2 = cuda_empty({64, 33});
  REQUIRE(aoti_torch_copy_(dev2.get(), dev.get(), 0) == 0);
  std::vector<float> back = elements_f32(dev2);
  REQUIRE(back.size() == 64u * 33u);
  for (std::size_t k = 0; k < back.size(); ++k) REQUIRE(back[k] == static_cast<float>(k));
}

TEST_CASE("cuda shim: strided copies in every direction" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor host = iota_f32({3, 4});  // host[i][j] = 4i + j
  OwnedTensor host_t = view(host, {4, 3}, {1, 4}, 0);  // transposed view

  SUBCASE("H2D from a transposed host view") {
    OwnedTensor dev = cuda_empty({4, 3});
    REQUIRE(aoti_torch_copy_(dev.get(), host_t.get(), 0) == 0);
    std::vector<float> got = storage_to_host<float>(dev);
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) CHECK(got[static_cast<std::size_t>(j * 3 + i)] == static_cast<float>(4 * i + j));
  }
  SUBCASE("D2H into a transposed host view") {
    OwnedTensor dev = to_device(host);
    OwnedTensor out_base = empty({4, 3}, {}, kF32);
    OwnedTensor out_t = view(out_base, {3, 4}, {1, 3}, 0);
    REQUIRE(aoti_torch_copy_(out_t.get(), dev.get(), 0) == 0);
    const float* o = out_base.data_as<float>();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) CHECK(o[j * 3 + i] == static_cast<float>(4 * i + j));
  }
  SUBCASE("D2D transposed -> contiguous, and 3-d permutation") {
    OwnedTensor dev = to_device(host);
    OwnedTensor dev_t = view(dev, {4, 3}, {1, 4}, 0);
    OwnedTensor dst = cuda_empty({4, 3});
    REQUIRE(aoti_torch_copy_(dst.get(), dev_t.get(), 0) == 0);
    std::vector<float> got = storage_to_host<float>(dst);
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) CHECK(got[static_cast<std::size_t>(j * 3 + i)] == static_cast<float>(4 * i + j));

    OwnedTensor cube_host = iota_f32({5, 6, 7});  // c[a][b][c] = 42a + 7b + c
    OwnedTensor cube = to_device(cube_host);
    OwnedTensor perm = view(cube, {7, 5, 6}, {1, 42, 7}, 0);  // p[c][a][b]
    OwnedTensor pd = cuda_empty({7, 5, 6});
    REQUIRE(aoti_torch_copy_(pd.get(), perm.get(), 0) == 0);
    std::vector<float> p = storage_to_host<float>(pd);
    for (int c = 0; c < 7; ++c)
      for (int a = 0; a < 5; ++a)
        for (int b = 0; b < 6; ++b)
          CHECK(p[static_cast<std::size_t>(c * 30 + a * 6 + b)] == static_cast<float>(42 * a + 7 * b + c));
  }
  SUBCASE("copies into a device window leave the gaps untouched") {
    OwnedTensor base_host = iota_f32({4, 5});
    OwnedTensor base = to_device(base_host);
    OwnedTensor window = view(base, {2, 2}, {5, 1}, 7);  // elements 7, 8, 12, 13
    std::vector<float> values = {-1, -2, -3, -4};
    int64_t vs[] = {2, 2};
    OwnedTensor src;
    REQUIRE(aoti_torch_create_tensor_from_blob(values.data(), 2, vs, nullptr, 0, kF32, 0, 0, src.out()) == 0);
    REQUIRE(aoti_torch_copy_(window.get(), src.get(), 0) == 0);
    // And a gapped column view (stride 5, size 4) written D2D from a contiguous device vector.
    OwnedTensor col = view(base, {4}, {5}, 4);  // elements 4, 9, 14, 19
    std::vector<float> cv = {100, 101, 102, 103};
    int64_t c4[] = {4};
    OwnedTensor col_host;
    REQUIRE(aoti_torch_create_tensor_from_blob(cv.data(), 1, c4, nullptr, 0, kF32, 0, 0, col_host.out()) == 0);
    OwnedTensor col_dev = to_device(col_host);
    REQUIRE(aoti_torch_copy_(col.get(), col_dev.get(), 0) == 0);
    std::vector<float> got = storage_to_host<float>(base);
    for (int k = 0; k < 20; ++k) {
      float expected = static_cast<float>(k);
      if (k == 7) expected = -1;
      if (k == 8) expected = -2;
      if (k == 12) expected = -3;
      if (k == 13) expected = -4;
      if (k % 5 == 4) expected = 100.0f + static_cast<float>(k / 5);
      CHECK(got[static_cast<std::size_t>(k)] == expected);
    }
  }
  SUBCASE("many slabs go through host staging correctly") {
    // 4-d permutation with > 1024 outer slabs: [2048, 2, 2] viewed with its inner dims swapped.
    OwnedTensor big_host = iota_f32({2048, 2, 2});
    OwnedTensor big = to_device(big_host);
    OwnedTensor swapped = view(big, {2048, 2, 2}, {4, 1, 2}, 0);
    OwnedTensor out = cuda_empty({2048, 2, 2});
    REQUIRE(aoti_torch_copy_(out.get(), swapped.get(), 0) == 0);
    std::vector<float> got = storage_to_host<float>(out);
    for (int n = 0; n < 2048; ++n)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
          REQUIRE(got[static_cast<std::size_t>(n * 4 + a * 2 + b)] == static_cast<float>(n * 4 + b * 2 + a));
  }
  SUBCASE("overlapping device views are copied through a temporary") {
    OwnedTensor line_host = iota_f32({10});
    OwnedTensor line = to_device(line_host);
    OwnedTensor dst = view(line, {8}, {1}, 1);
    OwnedTensor src = view(line, {8}, {1}, 0);
    REQUIRE(aoti_torch_copy_(dst.get(), src.get(), 0) == 0);
    CHECK(storage_to_host<float>(line) == std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6, 7, 9});
  }
  SUBCASE("broadcast and dtype conversion with a CUDA side") {
    OwnedTensor row = iota_f32({3});
    OwnedTensor dev = cuda_empty({2, 3});
    REQUIRE(aoti_torch_copy_(dev.get(), row.get(), 0) == 0);  // spitch 0: staged
    std::vector<float> got = storage_to_host<float>(dev);
    for (int k = 0; k < 6; ++k) CHECK(got[static_cast<std::size_t>(k)] == static_cast<float>(k % 3));
    OwnedTensor half = cuda_empty({2, 3}, {}, 5);
    REQUIRE(aoti_torch_copy_(half.get(), dev.get(), 0) == 0);  // f32 -> f16 on device
    std::vector<uint16_t> h = storage_to_host<uint16_t>(half);
    CHECK(h[1] == 0x3c00);  // 1.0
    CHECK(h[5] == 0x4000);  // 2.0
    OwnedTensor ints = empty({2, 3}, {}, 3);
    REQUIRE(aoti_torch_copy_(ints.get(), half.get(), 0) == 0);  // f16 device -> i32 host
    CHECK(ints.data_as<int32_t>()[4] == 1);
  }
}

TEST_CASE("cuda shim: non_blocking copies with pinned and pageable host memory" * AOTI_CUDA_GPU_CASE) {
  int64_t n[] = {1024};
  OwnedTensor pinned;
  REQUIRE(aoti_torch_empty_strided_pinned(1, n, nullptr, kF32, 0, 0, pinned.out()) == 0);
  cudaPointerAttributes attr{};
  REQUIRE(cudaPointerGetAttributes(&attr, pinned.data()) == cudaSuccess);
  CHECK(attr.type == cudaMemoryTypeHost);  // page-locked (cudaMallocHost), not pageable
  for (int k = 0; k < 1024; ++k) pinned.data_as<float>()[k] = static_cast<float>(k) * 0.5f;
  OwnedTensor dev = cuda_empty({1024});
  REQUIRE(aoti_torch_copy_(dev.get(), pinned.get(), 1) == 0);  // async from pinned memory
  OwnedTensor pageable = empty({1024}, {}, kF32);
  REQUIRE(aoti_torch_copy_(pageable.get(), dev.get(), 1) == 0);  // pageable: synchronized anyway
  for (int k = 0; k < 1024; ++k) REQUIRE(pageable.data_as<float>()[k] == static_cast<float>(k) * 0.5f);
  OwnedTensor pinned_back;
  REQUIRE(aoti_torch_empty_strided_pinned(1, n, nullptr, kF32, 0, 0, pinned_back.out()) == 0);
  REQUIRE(aoti_torch_copy_(pinned_back.get(), dev.get(), 1) == 0);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);  // current stream = legacy default stream
  CHECK(pinned_back.data_as<float>()[1023] == 511.5f);
}

TEST_CASE("cuda shim: clone, clone_preserve_strides, zero_" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor host = iota_f32({3, 4});
  OwnedTensor dev = to_device(host);
  OwnedTensor dev_t = view(dev, {4, 3}, {1, 4}, 0);
  OwnedTensor c;
  REQUIRE(aoti_torch_clone(dev_t.get(), c.out()) == 0);
  int32_t type = -1;
  REQUIRE(aoti_torch_get_device_type(c.get(), &type) == 0);
  CHECK(type == kCUDA);
  CHECK(c.strides() == std::vector<int64_t>{1, 4});
  CHECK(c.data() != dev.data());
  CHECK(elements_f32(c) == elements_f32(dev_t));

  OwnedTensor gapped = view(dev, {3, 2}, {4, 2}, 1);
  OwnedTensor g;
  REQUIRE(aoti_torch_clone(gapped.get(), g.out()) == 0);
  CHECK(g.strides() == std::vector<int64_t>{2, 1});
  CHECK(elements_f32(g) == std::vector<float>{1, 3, 5, 7, 9, 11});

  OwnedTensor ps;
  REQUIRE(aoti_torch_clone_preserve_strides(gapped.get(), ps.out()) == 0);
  CHECK(ps.strides() == std::vector<int64_t>{4, 2});
  CHECK(ps.offset() == 0);
  std::vector<float> span = storage_to_host<float>(ps);
  REQUIRE(span.size() == 11u);
  for (int k = 0; k < 11; ++k) CHECK(span[static_cast<std::size_t>(k)] == static_cast<float>(k + 1));

  REQUIRE(aoti_torch_zero_(gapped.get()) == 0);  // strided: staged
  std::vector<float> after = storage_to_host<float>(dev);
  for (int k = 0; k < 12; ++k) {
    bool zeroed = k == 1 || k == 3 || k == 5 || k == 7 || k == 9 || k == 11;
    CHECK(after[static_cast<std::size_t>(k)] == (zeroed ? 0.0f : static_cast<float>(k)));
  }
  REQUIRE(aoti_torch_zero_(dev.get()) == 0);  // dense: cudaMemsetAsync
  for (float v : storage_to_host<float>(dev)) CHECK(v == 0.0f);
}

TEST_CASE("cuda shim: item reads device scalars; check_inf_and_nan stages" * AOTI_CUDA_GPU_CASE) {
  OwnedTensor h;
  REQUIRE(aoti_torch_scalar_to_tensor_float32(-3.5f, h.out()) == 0);
  OwnedTensor d = empty({}, {}, kF32, kCUDA, 0);
  REQUIRE(aoti_torch_copy_(d.get(), h.get(), 0) == 0);
  float f = 0;
  REQUIRE(aoti_torch_item_float32(d.get(), &f) == 0);
  CHECK(f == -3.5f);
  int64_t i = 0;
  REQUIRE(aoti_torch_item_int64(d.get(), &i) == 0);
  CHECK(i == -3);
  OwnedTensor hb;
  REQUIRE(aoti_torch_scalar_to_tensor_bool(true, hb.out()) == 0);
  OwnedTensor db = empty({1}, {}, 11, kCUDA, 0);
  REQUIRE(aoti_torch_copy_(db.get(), hb.get(), 0) == 0);
  bool b = false;
  REQUIRE(aoti_torch_item_bool(db.get(), &b) == 0);
  CHECK(b);

  OwnedTensor host = iota_f32({8});
  host.data_as<float>()[6] = std::nanf("");
  OwnedTensor dev = to_device(host);
  CHECK(aoti_torch_check_inf_and_nan("dev", dev.get()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("At least one NaN in dev"));
  OwnedTensor first = view(dev, {4}, {1}, 0);
  CHECK(aoti_torch_check_inf_and_nan("first", first.get()) == AOTI_TORCH_SUCCESS);
  aoti_torch_print_tensor_handle(dev.get(), "device tensor");
}

TEST_CASE("cuda shim: stream guard installs the stream; allocations are ordered on it" * AOTI_CUDA_GPU_CASE) {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  int device_before = -1;
  REQUIRE(cudaGetDevice(&device_before) == cudaSuccess);
  void* current = reinterpret_cast<void*>(0x1);
  REQUIRE(aoti_torch_get_current_cuda_stream(0, &current) == 0);
  CHECK(current == nullptr);  // default: legacy stream
  {
    CUDAStreamGuardHandle guard = nullptr;
    REQUIRE(aoti_torch_create_cuda_stream_guard(stream, 0, &guard) == 0);
    REQUIRE(aoti_torch_get_current_cuda_stream(0, &current) == 0);
    CHECK(current == static_cast<void*>(stream));
    REQUIRE(aoti_torch_get_current_cuda_stream(-1, &current) == 0);
    CHECK(current == static_cast<void*>(stream));
    OwnedTensor t = cuda_empty({1000});
    CHECK(t.get()->storage->free_stream == static_cast<void*>(stream));  // allocated (and to be freed) on it
    OwnedTensor host = iota_f32({1000});
    REQUIRE(aoti_torch_copy_(t.get(), host.get(), 0) == 0);
    float v = 0;
    OwnedTensor last = view(t, {}, {}, 999);
    REQUIRE(aoti_torch_item_float32(last.get(), &v) == 0);
    CHECK(v == 999.0f);
    // Nested guard on the legacy stream, then back.
    CUDAStreamGuardHandle inner = nullptr;
    REQUIRE(aoti_torch_create_cuda_stream_guard(nullptr, 0, &inner) == 0);
    REQUIRE(aoti_torch_get_current_cuda_stream(0, &current) == 0);
    CHECK(current == nullptr);
    REQUIRE(aoti_torch_delete_cuda_stream_guard(inner) == 0);
    REQUIRE(aoti_torch_get_current_cuda_stream(0, &current) == 0);
    CHECK(current == static_cast<void*>(stream));
    t.reset();  // freed with cudaFreeAsync on `stream`
    REQUIRE(aoti_torch_delete_cuda_stream_guard(guard) == 0);
  }
  REQUIRE(aoti_torch_get_current_cuda_stream(0, &current) == 0);
  CHECK(current == nullptr);
  int device_after = -1;
  REQUIRE(cudaGetDevice(&device_after) == cudaSuccess);
  CHECK(device_after == device_before);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("cuda shim: device guard saves and restores the device" * AOTI_CUDA_GPU_CASE) {
  int before = -1;
  REQUIRE(cudaGetDevice(&before) == cudaSuccess);
  CUDAGuardHandle guard = nullptr;
  REQUIRE(aoti_torch_create_cuda_guard(0, &guard) == 0);
  int now = -1;
  REQUIRE(cudaGetDevice(&now) == cudaSuccess);
  CHECK(now == 0);
  REQUIRE(aoti_torch_cuda_guard_set_index(guard, 0) == 0);
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(aoti_torch_cuda_guard_set_index(guard, count) == AOTI_TORCH_FAILURE);  // no such device
  CHECK(cudaGetLastError() == cudaSuccess);  // the shim cleared its failure
  REQUIRE(aoti_torch_delete_cuda_guard(guard) == 0);
  REQUIRE(cudaGetDevice(&now) == cudaSuccess);
  CHECK(now == before);
}

TEST_CASE("cuda shim: peak, reset and trim" * AOTI_CUDA_GPU_CASE) {
  const std::size_t big = std::size_t{64} << 20;
  aoti_cuda::reset_peak_memory(0);
  aoti_cuda::MemoryStats start = aoti_cuda::device_memory_stats(0);
  CHECK(start.peak_bytes_in_use == start.bytes_in_use);
  {
    OwnedTensor t = cuda_empty({static_cast<int64_t>(big)}, {}, 0);
    aoti_cuda::MemoryStats during = aoti_cuda::device_memory_stats(0);
    CHECK(during.bytes_in_use == start.bytes_in_use + big);
    CHECK(during.peak_bytes_in_use == during.bytes_in_use);
    CHECK(during.pool_reserved_bytes >= big);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  aoti_cuda::MemoryStats freed = aoti_cuda::device_memory_stats(0);
  CHECK(freed.bytes_in_use == start.bytes_in_use);
  CHECK(freed.peak_bytes_in_use == start.bytes_in_use + big);  // high-water mark remembered
  CHECK(freed.pool_reserved_bytes >= big);                     // cached by the pool (release threshold)
  aoti_cuda::reset_peak_memory(0);
  CHECK(aoti_cuda::device_memory_stats(0).peak_bytes_in_use == freed.bytes_in_use);
  aoti_cuda::trim_device_memory(0, 0);
  aoti_cuda::MemoryStats trimmed = aoti_cuda::device_memory_stats(0);
  CHECK(trimmed.pool_reserved_bytes < freed.pool_reserved_bytes);
  CHECK(trimmed.pool_reserved_bytes < big);
}

TEST_CASE("cuda shim: out of memory is an error, not an abort" * AOTI_CUDA_GPU_CASE) {
  const aoti_cuda::MemoryStats before = aoti_cuda::device_memory_stats(0);
  int64_t sizes[] = {int64_t{1} << 50};
  AtenTensorHandle h = reinterpret_cast<AtenTensorHandle>(0x1);
  CHECK(aoti_torch_empty_strided(1, sizes, nullptr, 0, kCUDA, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(h == nullptr);
  CHECK(last_error_contains("out of memory: requested 1125899906842624 bytes on cuda:0"));
  CHECK(cudaGetLastError() == cudaSuccess);
  const aoti_cuda::MemoryStats after = aoti_cuda::device_memory_stats(0);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.total_allocations == before.total_allocations);
  void* ptr = reinterpret_cast<void*>(0x1);
  CHECK(aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t{1} << 50, &ptr) == AOTI_TORCH_FAILURE);
  CHECK(ptr == nullptr);
  CHECK(last_error_contains("out of memory"));
}

TEST_CASE("cuda shim: raw allocator shares the pool and the statistics" * AOTI_CUDA_GPU_CASE) {
  const aoti_cuda::MemoryStats before = aoti_cuda::device_memory_stats(0);
  void* ptr = nullptr;
  REQUIRE(aoti_torch_cuda_caching_allocator_raw_alloc(1000, &ptr) == 0);
  REQUIRE(ptr != nullptr);
  CHECK(aoti_cuda::device_memory_stats(0).bytes_in_use == before.bytes_in_use + 1024);  // one 512-byte-multiple block
  REQUIRE(cudaMemsetAsync(ptr, 0, 1000, nullptr) == cudaSuccess);
  REQUIRE(aoti_torch_cuda_caching_allocator_raw_delete(ptr) == 0);
  CHECK(aoti_cuda::device_memory_stats(0).bytes_in_use == before.bytes_in_use);
  CHECK(aoti_torch_cuda_caching_allocator_raw_delete(ptr) == AOTI_TORCH_FAILURE);  // double free detected
  CHECK(last_error_contains("already freed"));
  REQUIRE(aoti_torch_cuda_caching_allocator_raw_alloc(0, &ptr) == 0);
  CHECK(ptr == nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cuda shim: CUDA from_blob wraps existing device memory without owning it" * AOTI_CUDA_GPU_CASE) {
  void* raw = nullptr;
  REQUIRE(cudaMalloc(&raw, 64 * sizeof(float)) == cudaSuccess);
  {
    int64_t sizes[] = {4, 4};
    OwnedTensor t;
    REQUIRE(aoti_torch_create_tensor_from_blob_v2(raw, 2, sizes, nullptr, 8, kF32, kCUDA, 0, t.out(), 0, nullptr, 0) ==
            0);
    CHECK(t.data() == static_cast<void*>(static_cast<float*>(raw) + 8));
    OwnedTensor host = iota_f32({4, 4});
    REQUIRE(aoti_torch_copy_(t.get(), host.get(), 0) == 0);
    CHECK(elements_f32(t) == elements_f32(host));
  }
  // Still ours to free: the shim did not free it.
  CHECK(cudaFree(raw) == cudaSuccess);
}

TEST_CASE("cuda shim: call block cache: same size back on the same stream; a call's leftovers freed at its end" *
          AOTI_CUDA_GPU_CASE) {
  using aoti_cuda::shim::BlockCache;
  using aoti_cuda::shim::BlockCacheScope;
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  const aoti_cuda::MemoryStats start = aoti_cuda::device_memory_stats(0);
  {
    BlockCache cache(std::size_t{1} << 30);
    void* first = nullptr;
    {  // call 1: a 64 KiB intermediate
      BlockCacheScope call(&cache, 0, s);
      first = aoti_cuda::shim::cuda_allocate(std::size_t{64} << 10, 0, s);
      REQUIRE(first != nullptr);
      CHECK(aoti_cuda::shim::cuda_free(first, std::size_t{64} << 10, 0, s) == 0);
    }
    CHECK(cache.size() == 1);
    CHECK(aoti_cuda::device_memory_stats(0).cached_bytes == start.cached_bytes + (std::size_t{64} << 10));
    {  // call 2, same shapes: the same block, no new allocation
      BlockCacheScope call(&cache, 0, s);
      void* again = aoti_cuda::shim::cuda_allocate(std::size_t{64} << 10, 0, s);
      CHECK(again == first);
      REQUIRE(cudaMemsetAsync(again, 0, std::size_t{64} << 10, s) == cudaSuccess);
      CHECK(aoti_cuda::shim::cuda_free(again, std::size_t{64} << 10, 0, s) == 0);
    }
    CHECK(aoti_cuda::device_memory_stats(0).cache_hits == start.cache_hits + 1);
    {  // call 3, other shapes: the 64 KiB block was not taken back, so it is freed at the end
      BlockCacheScope call(&cache, 0, s);
      void* small = aoti_cuda::shim::cuda_allocate(1000, 0, s);
      CHECK(aoti_cuda::shim::cuda_free(small, 1000, 0, s) == 0);
    }
    CHECK(cache.size() == 1);
    CHECK(cache.bytes() == 1024);
    CHECK(aoti_cuda::device_memory_stats(0).cached_bytes == start.cached_bytes + 1024);
  }
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  const aoti_cuda::MemoryStats end = aoti_cuda::device_memory_stats(0);
  CHECK(end.cached_bytes == start.cached_bytes);
  CHECK(end.bytes_in_use == start.bytes_in_use);
  CHECK(cudaGetLastError() == cudaSuccess);
}
