// Shim C ABI on CPU tensors: enum getters, accessors, creation, views, aliasing, lifetime, validation.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "aoti_cuda/shim.h"
#include "support/gpu.hpp"
#include "support/shim_testing.hpp"

using aoti_cuda_test::empty;
using aoti_cuda_test::iota_f32;
using aoti_cuda_test::last_error_contains;
using aoti_cuda_test::OwnedTensor;

namespace {
const int32_t kF32 = 6;
const int32_t kCPU = 0;
const int32_t kCUDA = 1;
}  // namespace

TEST_CASE("shim: enum getters return the c10 codes") {
  CHECK(aoti_torch_abi_version() == 0x020B000000000000ULL);
  CHECK(aoti_torch_device_type_cpu() == 0);
  CHECK(aoti_torch_device_type_cuda() == 1);
  CHECK(aoti_torch_device_type_xpu() == 12);
  CHECK(aoti_torch_device_type_mps() == 13);
  CHECK(aoti_torch_device_type_meta() == 14);
  CHECK(aoti_torch_device_type_privateuse1() == 20);
  CHECK(aoti_torch_dtype_uint8() == 0);
  CHECK(aoti_torch_dtype_int8() == 1);
  CHECK(aoti_torch_dtype_int16() == 2);
  CHECK(aoti_torch_dtype_int32() == 3);
  CHECK(aoti_torch_dtype_int64() == 4);
  CHECK(aoti_torch_dtype_float16() == 5);
  CHECK(aoti_torch_dtype_float32() == 6);
  CHECK(aoti_torch_dtype_float64() == 7);
  CHECK(aoti_torch_dtype_complex32() == 8);
  CHECK(aoti_torch_dtype_complex64() == 9);
  CHECK(aoti_torch_dtype_complex128() == 10);
  CHECK(aoti_torch_dtype_bool() == 11);
  CHECK(aoti_torch_dtype_bfloat16() == 15);
  CHECK(aoti_torch_dtype_float8_e5m2() == 23);
  CHECK(aoti_torch_dtype_float8_e4m3fn() == 24);
  CHECK(aoti_torch_dtype_float8_e5m2fnuz() == 25);
  CHECK(aoti_torch_dtype_float8_e4m3fnuz() == 26);
  CHECK(aoti_torch_dtype_uint16() == 27);
  CHECK(aoti_torch_dtype_uint32() == 28);
  CHECK(aoti_torch_dtype_uint64() == 29);
  CHECK(aoti_torch_layout_strided() == 0);
  CHECK(aoti_torch_layout_sparse_coo() == 1);
  CHECK(aoti_torch_layout_sparse_csr() == 2);
  CHECK(aoti_torch_layout__mkldnn() == 3);
  CHECK(aoti_torch_layout_sparse_csc() == 4);
  CHECK(aoti_torch_layout_sparse_bsr() == 5);
  CHECK(aoti_torch_layout_sparse_bsc() == 6);
  CHECK(aoti_torch_layout_jagged() == 7);
  CHECK(aoti_torch_memory_format_contiguous_format() == 0);
  CHECK(aoti_torch_memory_format_preserve_format() == 1);
  CHECK(aoti_torch_memory_format_channels_last() == 2);
  CHECK(aoti_torch_memory_format_channels_last_3d() == 3);
  CHECK(aoti_torch_dtype_element_size(6) == 4);
  CHECK(aoti_torch_dtype_element_size(15) == 2);
  CHECK(aoti_torch_dtype_element_size(10) == 16);
  CHECK(aoti_torch_dtype_element_size(4) == 8);
  CHECK(aoti_torch_dtype_element_size(11) == 1);
  CHECK(aoti_torch_dtype_element_size(99) == 0);
  CHECK(aoti_torch_dtype_element_size(-1) == 0);
}

TEST_CASE("shim: empty_strided CPU tensor accessors") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  {
    OwnedTensor t = empty({2, 3, 4}, {}, kF32);
    CHECK(aoti_cuda_shim_live_handles() == live_before + 1);
    CHECK(t.sizes() == std::vector<int64_t>{2, 3, 4});
    CHECK(t.strides() == std::vector<int64_t>{12, 4, 1});
    CHECK(t.offset() == 0);
    int64_t v = 0;
    REQUIRE(aoti_torch_get_dim(t.get(), &v) == 0);
    CHECK(v == 3);
    REQUIRE(aoti_torch_get_numel(t.get(), &v) == 0);
    CHECK(v == 24);
    REQUIRE(aoti_torch_get_storage_size(t.get(), &v) == 0);
    CHECK(v == 96);
    REQUIRE(aoti_torch_get_storage_numel(t.get(), &v) == 0);
    CHECK(v == 24);
    REQUIRE(aoti_torch_get_size(t.get(), 1, &v) == 0);
    CHECK(v == 3);
    REQUIRE(aoti_torch_get_size(t.get(), -1, &v) == 0);
    CHECK(v == 4);
    REQUIRE(aoti_torch_get_stride(t.get(), 0, &v) == 0);
    CHECK(v == 12);
    REQUIRE(aoti_torch_get_stride(t.get(), -3, &v) == 0);
    CHECK(v == 12);
    CHECK(aoti_torch_get_size(t.get(), 3, &v) == AOTI_TORCH_FAILURE);
    CHECK(last_error_contains("dimension 3 is out of range for a 3-d tensor"));
    CHECK(aoti_torch_get_stride(t.get(), -4, &v) == AOTI_TORCH_FAILURE);
    int32_t i32 = -1;
    REQUIRE(aoti_torch_get_dtype(t.get(), &i32) == 0);
    CHECK(i32 == kF32);
    REQUIRE(aoti_torch_get_device_type(t.get(), &i32) == 0);
    CHECK(i32 == kCPU);
    REQUIRE(aoti_torch_get_device_index(t.get(), &i32) == 0);
    CHECK(i32 == 0);
    REQUIRE(aoti_torch_get_layout(t.get(), &i32) == 0);
    CHECK(i32 == 0);
    bool b = false;
    REQUIRE(aoti_torch_is_contiguous(t.get(), &b) == 0);
    CHECK(b);
    REQUIRE(aoti_torch_is_defined(t.get(), &b) == 0);
    CHECK(b);
    // 64-byte aligned host memory, writable over the whole storage.
    CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
    std::memset(t.data(), 0x5a, 96);
    // get_sizes / get_strides return the same stable arrays every time.
    int64_t* s1 = nullptr;
    int64_t* s2 = nullptr;
    REQUIRE(aoti_torch_get_sizes(t.get(), &s1) == 0);
    REQUIRE(aoti_torch_get_sizes(t.get(), &s2) == 0);
    CHECK(s1 == s2);
  }
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim: empty_strided storage size follows the strided span rule") {
  OwnedTensor t = empty({2, 3}, {1, 2}, kF32);  // transposed layout: span 1 + 1*1 + 2*2 = 6
  int64_t bytes = 0;
  REQUIRE(aoti_torch_get_storage_size(t.get(), &bytes) == 0);
  CHECK(bytes == 24);
  bool contiguous = true;
  REQUIRE(aoti_torch_is_contiguous(t.get(), &contiguous) == 0);
  CHECK_FALSE(contiguous);

  OwnedTensor padded = empty({2, 3}, {8, 1}, 4);  // int64 rows padded to 8
  REQUIRE(aoti_torch_get_storage_size(padded.get(), &bytes) == 0);
  CHECK(bytes == (1 + 8 + 2) * 8);

  OwnedTensor zero = empty({4, 0, 3}, {}, kF32);
  REQUIRE(aoti_torch_get_storage_size(zero.get(), &bytes) == 0);
  CHECK(bytes == 0);
  int64_t numel = -1;
  REQUIRE(aoti_torch_get_numel(zero.get(), &numel) == 0);
  CHECK(numel == 0);
  CHECK(zero.data() == nullptr);
}

TEST_CASE("shim: 0-d tensors from ndim 0 with null arrays") {
  OwnedTensor t;
  REQUIRE(aoti_torch_empty_strided(0, nullptr, nullptr, 4, kCPU, 0, t.out()) == 0);
  int64_t v = -1;
  REQUIRE(aoti_torch_get_dim(t.get(), &v) == 0);
  CHECK(v == 0);
  REQUIRE(aoti_torch_get_numel(t.get(), &v) == 0);
  CHECK(v == 1);
  REQUIRE(aoti_torch_get_storage_size(t.get(), &v) == 0);
  CHECK(v == 8);
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  REQUIRE(aoti_torch_get_sizes(t.get(), &sizes) == 0);
  REQUIRE(aoti_torch_get_strides(t.get(), &strides) == 0);
  CHECK(sizes != nullptr);  // non-null even for 0-d, like a real array
  CHECK(strides != nullptr);
  CHECK(aoti_torch_get_size(t.get(), 0, &v) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim: empty_strided argument validation") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  AtenTensorHandle h = reinterpret_cast<AtenTensorHandle>(0x1);
  int64_t sizes[] = {2, 3};
  int64_t neg[] = {2, -3};
  int64_t strides[] = {3, 1};
  int64_t neg_strides[] = {-3, 1};

  CHECK(aoti_torch_empty_strided(2, sizes, strides, kF32, kCPU, 0, nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret_new_tensor is null"));

  CHECK(aoti_torch_empty_strided(-1, sizes, strides, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ndim -1 is out of range"));
  CHECK(h == nullptr);  // out-parameter is cleared on failure

  CHECK(aoti_torch_empty_strided(1000, sizes, strides, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ndim 1000 is out of range"));

  CHECK(aoti_torch_empty_strided(2, nullptr, strides, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("sizes is null"));

  CHECK(aoti_torch_empty_strided(2, neg, strides, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("size -3 of dimension 1 is negative"));

  CHECK(aoti_torch_empty_strided(2, sizes, neg_strides, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("stride -3 of dimension 0 is negative"));

  CHECK(aoti_torch_empty_strided(2, sizes, strides, 99, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("unknown dtype code 99"));

  CHECK(aoti_torch_empty_strided(2, sizes, strides, kF32, 14, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("unsupported device type 14"));

  int64_t huge[] = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(aoti_torch_empty_strided(2, huge, nullptr, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("overflow"));

  int64_t big_stride[] = {int64_t{1} << 62, 1};
  int64_t two[] = {3, 1};
  CHECK(aoti_torch_empty_strided(2, two, big_stride, kF32, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("overflow"));

  // Representable but impossible host allocation: an out-of-memory error, not a crash.
  int64_t too_big[] = {int64_t{1} << 60};
  CHECK(aoti_torch_empty_strided(1, too_big, nullptr, 0, kCPU, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("out of memory"));

  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim: accessors reject null, garbage and undefined handles") {
  int64_t v = 0;
  CHECK(aoti_torch_get_dim(nullptr, &v) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("aoti_torch_get_dim"));
  CHECK(last_error_contains("is null"));

  alignas(16) unsigned char garbage[256];
  std::memset(garbage, 0xab, sizeof(garbage));
  auto fake = reinterpret_cast<AtenTensorHandle>(garbage);
  CHECK(aoti_torch_get_numel(fake, &v) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("not a live aoti_cuda tensor"));
  CHECK(aoti_torch_delete_tensor_object(fake) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_delete_tensor_object(nullptr) == AOTI_TORCH_FAILURE);

  OwnedTensor t = empty({2}, {}, kF32);
  CHECK(aoti_torch_get_dim(t.get(), nullptr) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("ret_dim is null"));
  CHECK(aoti_torch_get_sizes(t.get(), nullptr) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_get_data_ptr(t.get(), nullptr) == AOTI_TORCH_FAILURE);

  OwnedTensor undefined;
  REQUIRE(aoti_torch_new_uninitialized_tensor(undefined.out()) == 0);
  bool defined = true;
  REQUIRE(aoti_torch_is_defined(undefined.get(), &defined) == 0);
  CHECK_FALSE(defined);
  CHECK(aoti_torch_get_dim(undefined.get(), &v) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("undefined tensor"));
}

TEST_CASE("shim: last error persists across successful calls until cleared") {
  int64_t v = 0;
  aoti_cuda_shim_clear_error();
  CHECK(std::string(aoti_cuda_shim_last_error()).empty());
  CHECK(aoti_torch_get_dim(nullptr, &v) == AOTI_TORCH_FAILURE);
  std::string first = aoti_cuda_shim_last_error();
  CHECK_FALSE(first.empty());
  OwnedTensor t = empty({1}, {}, kF32);  // a success does not clear it
  CHECK(std::string(aoti_cuda_shim_last_error()) == first);
  aoti_cuda_shim_clear_error();
  CHECK(std::string(aoti_cuda_shim_last_error()).empty());
}

TEST_CASE("shim: new_tensor_handle and assign_tensors_out alias the same storage") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  OwnedTensor t = iota_f32({2, 3});
  OwnedTensor alias;
  REQUIRE(aoti_torch_new_tensor_handle(t.get(), alias.out()) == 0);
  OwnedTensor alias2;
  REQUIRE(aoti_torch_assign_tensors_out(t.get(), alias2.out()) == 0);
  CHECK(aoti_cuda_shim_live_handles() == live_before + 3);
  CHECK(alias.get() != t.get());
  CHECK(alias.data() == t.data());
  CHECK(alias2.data() == t.data());
  CHECK(alias.sizes() == t.sizes());
  CHECK(alias.strides() == t.strides());
  // Deleting the original keeps the storage alive for the aliases.
  float* data = t.data_as<float>();
  t.reset();
  CHECK(aoti_cuda_shim_live_handles() == live_before + 2);
  CHECK(alias.data_as<float>() == data);
  CHECK(alias.data_as<float>()[5] == 5.0f);  // still readable: ASan would flag a freed storage
  alias.reset();
  CHECK(alias2.data_as<float>()[4] == 4.0f);
  alias2.reset();
  CHECK(aoti_cuda_shim_live_handles() == live_before);

  CHECK(aoti_torch_new_tensor_handle(nullptr, alias.out()) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_assign_tensors_out(nullptr, alias2.out()) == AOTI_TORCH_FAILURE);
  OwnedTensor x = empty({1}, {}, kF32);
  CHECK(aoti_torch_new_tensor_handle(x.get(), nullptr) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim: assign_tensors makes dst alias src") {
  OwnedTensor src = iota_f32({4});
  OwnedTensor dst;
  REQUIRE(aoti_torch_new_uninitialized_tensor(dst.out()) == 0);
  REQUIRE(aoti_torch_assign_tensors(src.get(), dst.get()) == 0);
  bool defined = false;
  REQUIRE(aoti_torch_is_defined(dst.get(), &defined) == 0);
  CHECK(defined);
  CHECK(dst.data() == src.data());
  CHECK(dst.sizes() == std::vector<int64_t>{4});

  // Assigning over a defined tensor drops its old storage reference.
  OwnedTensor other = iota_f32({2, 2});
  REQUIRE(aoti_torch_assign_tensors(other.get(), dst.get()) == 0);
  CHECK(dst.data() == other.data());
  CHECK(dst.sizes() == std::vector<int64_t>{2, 2});
  other.reset();
  CHECK(dst.data_as<float>()[3] == 3.0f);
  // Self-assignment is harmless.
  REQUIRE(aoti_torch_assign_tensors(dst.get(), dst.get()) == 0);
  CHECK(dst.data_as<float>()[3] == 3.0f);
  CHECK(aoti_torch_assign_tensors(nullptr, dst.get()) == AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_assign_tensors(dst.get(), nullptr) == AOTI_TORCH_FAILURE);
}

TEST_CASE("shim: _reinterpret_tensor offset is an increment on self's offset") {
  OwnedTensor base = iota_f32({4, 4});
  int64_t sizes[] = {2, 2};
  int64_t strides[] = {4, 1};
  OwnedTensor v1;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 5, v1.out()) == 0);
  CHECK(v1.offset() == 5);
  CHECK(v1.data_as<float>()[0] == 5.0f);
  OwnedTensor v2;
  REQUIRE(aoti_torch__reinterpret_tensor(v1.get(), 2, sizes, strides, 2, v2.out()) == 0);
  CHECK(v2.offset() == 7);
  CHECK(v2.data_as<float>()[0] == 7.0f);
  int64_t storage = 0;
  REQUIRE(aoti_torch_get_storage_size(v2.get(), &storage) == 0);
  CHECK(storage == 64);  // whole allocation, shared

  // Transposed view of the same storage.
  int64_t t_strides[] = {1, 4};
  int64_t t_sizes[] = {4, 4};
  OwnedTensor tr;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, t_sizes, t_strides, 0, tr.out()) == 0);
  CHECK(tr.strides() == std::vector<int64_t>{1, 4});
  bool contiguous = true;
  REQUIRE(aoti_torch_is_contiguous(tr.get(), &contiguous) == 0);
  CHECK_FALSE(contiguous);

  // Out of bounds of the storage: rejected with the numbers.
  OwnedTensor bad;
  CHECK(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, 12, bad.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("needs 72 bytes but the storage has 64"));
  CHECK(aoti_torch__reinterpret_tensor(base.get(), 2, sizes, strides, -1, bad.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("negative"));
  // A 0-element view anywhere is fine (it touches no memory).
  int64_t zero_sizes[] = {0, 2};
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 2, zero_sizes, strides, 100, bad.out()) == 0);
}

TEST_CASE("shim: views keep storage alive after the base handle is deleted") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  OwnedTensor base = iota_f32({8});
  int64_t sizes[] = {2};
  int64_t strides[] = {3};
  OwnedTensor view;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 1, sizes, strides, 1, view.out()) == 0);
  base.reset();
  CHECK(view.data_as<float>()[0] == 1.0f);
  CHECK(view.data_as<float>()[3] == 4.0f);
  view.reset();
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim: as_strided keeps the storage offset and ndim") {
  OwnedTensor base = iota_f32({12});
  int64_t sizes[] = {3};
  int64_t strides[] = {1};
  OwnedTensor off;
  REQUIRE(aoti_torch__reinterpret_tensor(base.get(), 1, sizes, strides, 2, off.out()) == 0);
  int64_t new_sizes[] = {2};
  int64_t new_strides[] = {4};
  OwnedTensor s;
  REQUIRE(aoti_torch_as_strided(off.get(), new_sizes, new_strides, s.out()) == 0);
  CHECK(s.offset() == 2);
  CHECK(s.sizes() == std::vector<int64_t>{2});
  CHECK(s.strides() == std::vector<int64_t>{4});
  CHECK(s.data_as<float>()[4] == 6.0f);
  CHECK(aoti_torch_as_strided(off.get(), new_sizes, nullptr, s.out()) == AOTI_TORCH_FAILURE);
  int64_t too_far[] = {10};
  CHECK(aoti_torch_as_strided(off.get(), too_far, new_strides, s.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("needs"));
}

TEST_CASE("shim: _alloc_from_pool views a pool at a byte offset with a new dtype") {
  OwnedTensor pool = empty({256}, {}, 0);  // uint8 pool of 256 bytes
  int64_t sizes[] = {4, 2};
  OwnedTensor f;
  REQUIRE(aoti_torch__alloc_from_pool(pool.get(), 64, kF32, 2, sizes, nullptr, f.out()) == 0);
  CHECK(f.offset() == 16);
  CHECK(static_cast<char*>(f.data()) == static_cast<char*>(pool.data()) + 64);
  int32_t dtype = -1;
  REQUIRE(aoti_torch_get_dtype(f.get(), &dtype) == 0);
  CHECK(dtype == kF32);
  CHECK(f.strides() == std::vector<int64_t>{2, 1});
  CHECK(aoti_torch__alloc_from_pool(pool.get(), 62, kF32, 2, sizes, nullptr, f.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("not a multiple"));
  CHECK(aoti_torch__alloc_from_pool(pool.get(), 240, kF32, 2, sizes, nullptr, f.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("needs 272 bytes but the storage has 256"));
  // The pool must have offset 0.
  int64_t one[] = {8};
  OwnedTensor shifted;
  REQUIRE(aoti_torch__reinterpret_tensor(pool.get(), 1, one, nullptr, 8, shifted.out()) == 0);
  CHECK(aoti_torch__alloc_from_pool(shifted.get(), 0, kF32, 2, sizes, nullptr, f.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("storage offset 0"));
}

TEST_CASE("shim: create_tensor_from_blob borrows memory and honours the element offset") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  std::vector<float> host(16);
  for (int i = 0; i < 16; ++i) host[static_cast<std::size_t>(i)] = static_cast<float>(i);
  int64_t sizes[] = {2, 3};
  int64_t strides[] = {4, 1};
  OwnedTensor t;
  REQUIRE(aoti_torch_create_tensor_from_blob(host.data(), 2, sizes, strides, 3, kF32, kCPU, 0, t.out()) == 0);
  CHECK(t.offset() == 3);
  CHECK(t.data_as<float>() == host.data() + 3);  // data is the storage base; offset is in elements
  int64_t storage = 0;
  REQUIRE(aoti_torch_get_storage_size(t.get(), &storage) == 0);
  CHECK(storage == (3 + 1 + 4 + 2) * 4);
  OwnedTensor alias;
  REQUIRE(aoti_torch_new_tensor_handle(t.get(), alias.out()) == 0);
  t.reset();
  alias.reset();  // last reference: borrowed memory must NOT be freed (ASan would report a bad free)
  CHECK(host[15] == 15.0f);
  CHECK(aoti_cuda_shim_live_handles() == live_before);

  // null strides = contiguous
  REQUIRE(aoti_torch_create_tensor_from_blob(host.data(), 2, sizes, nullptr, 0, kF32, kCPU, 0, t.out()) == 0);
  CHECK(t.strides() == std::vector<int64_t>{3, 1});

  // v2 with strided layout behaves the same; other layouts are unsupported
  OwnedTensor v2;
  REQUIRE(aoti_torch_create_tensor_from_blob_v2(host.data(), 2, sizes, strides, 1, kF32, kCPU, 0, v2.out(), 0, nullptr,
                                                0) == 0);
  CHECK(v2.data_as<float>() == host.data() + 1);
  CHECK(aoti_torch_create_tensor_from_blob_v2(host.data(), 2, sizes, strides, 0, kF32, kCPU, 0, v2.out(), 3, nullptr,
                                              0) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("layout 3 is not supported"));

  CHECK(aoti_torch_create_tensor_from_blob(host.data(), 2, sizes, strides, -2, kF32, kCPU, 0, t.out()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("storage_offset -2 is negative"));
  CHECK(aoti_torch_create_tensor_from_blob(host.data(), 2, sizes, strides, 0, 77, kCPU, 0, t.out()) ==
        AOTI_TORCH_FAILURE);
  CHECK(aoti_torch_create_tensor_from_blob(host.data(), 2, sizes, strides, 0, kF32, kCPU, 0, nullptr) ==
        AOTI_TORCH_FAILURE);
}

TEST_CASE("shim: create_tensor_from_blob with null data allocates like libtorch") {
  int64_t sizes[] = {3};
  OwnedTensor t;
  REQUIRE(aoti_torch_create_tensor_from_blob(nullptr, 1, sizes, nullptr, 0, kF32, kCPU, 0, t.out()) == 0);
  REQUIRE(t.data() != nullptr);
  t.data_as<float>()[2] = 1.0f;  // owned and writable; freed on delete (ASan checks both)
  int64_t zero[] = {0};
  REQUIRE(aoti_torch_create_tensor_from_blob(nullptr, 1, zero, nullptr, 0, kF32, kCPU, 0, t.out()) == 0);
  int64_t numel = -1;
  REQUIRE(aoti_torch_get_numel(t.get(), &numel) == 0);
  CHECK(numel == 0);
}

TEST_CASE("shim: CUDA blob wrappers carry device metadata without touching the GPU") {
  alignas(64) static float fake_device_memory[8];
  int64_t sizes[] = {8};
  OwnedTensor t;
  REQUIRE(aoti_torch_create_tensor_from_blob(fake_device_memory, 1, sizes, nullptr, 0, kF32, kCUDA, 3, t.out()) == 0);
  int32_t v = -1;
  REQUIRE(aoti_torch_get_device_type(t.get(), &v) == 0);
  CHECK(v == kCUDA);
  REQUIRE(aoti_torch_get_device_index(t.get(), &v) == 0);
  CHECK(v == 3);
  CHECK(aoti_torch_create_tensor_from_blob(fake_device_memory, 1, sizes, nullptr, 0, kF32, kCUDA, 64, t.out()) ==
        AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("out of range"));
  CHECK(aoti_torch_create_tensor_from_blob(fake_device_memory, 1, sizes, nullptr, 0, kF32, kCUDA, -7, t.out()) ==
        AOTI_TORCH_FAILURE);
}

TEST_CASE("shim: empty_strided_pinned gives usable host memory") {
  int64_t sizes[] = {5};
  OwnedTensor t;
  REQUIRE(aoti_torch_empty_strided_pinned(1, sizes, nullptr, kF32, kCPU, 0, t.out()) == 0);
  int32_t device_type = -1;
  REQUIRE(aoti_torch_get_device_type(t.get(), &device_type) == 0);
  CHECK(device_type == kCPU);
  REQUIRE(t.data() != nullptr);
  t.data_as<float>()[4] = 2.5f;
  CHECK(t.data_as<float>()[4] == 2.5f);
  CHECK(aoti_torch_empty_strided_pinned(1, sizes, nullptr, kF32, kCUDA, 0, t.out()) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("pinned memory is host memory"));
}

TEST_CASE("shim: CUDA allocation fails cleanly without a GPU" * doctest::skip(aoti_cuda_test::gpu_available())) {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  int64_t sizes[] = {4};
  AtenTensorHandle h = reinterpret_cast<AtenTensorHandle>(0x1);
  CHECK(aoti_torch_empty_strided(1, sizes, nullptr, kF32, kCUDA, 0, &h) == AOTI_TORCH_FAILURE);
  CHECK(h == nullptr);
  CHECK(last_error_contains("aoti_torch_empty_strided"));
  CHECK(last_error_contains("cuda"));
  CHECK(last_error_contains("failed: cudaError"));  // names the CUDA error (e.g. cudaErrorNoDevice)
  // device index -1 = current device: cudaGetDevice fails first
  CHECK(aoti_torch_empty_strided(1, sizes, nullptr, kF32, kCUDA, -1, &h) == AOTI_TORCH_FAILURE);
  CHECK(last_error_contains("cudaGetDevice"));
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim: aliases created and deleted concurrently keep the count and the storage right") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  OwnedTensor shared = iota_f32({64});
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        AtenTensorHandle alias = nullptr;
        if (aoti_torch_new_tensor_handle(shared.get(), &alias) != 0) ++failures;
        int64_t sizes[] = {8};
        AtenTensorHandle view = nullptr;
        if (aoti_torch__reinterpret_tensor(alias, 1, sizes, nullptr, i % 56, &view) != 0) ++failures;
        if (aoti_torch_delete_tensor_object(alias) != 0) ++failures;
        void* data = nullptr;
        if (aoti_torch_get_data_ptr(view, &data) != 0 || *static_cast<float*>(data) != static_cast<float>(i % 56)) {
          ++failures;
        }
        if (aoti_torch_delete_tensor_object(view) != 0) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(aoti_cuda_shim_live_handles() == live_before + 1);
  shared.reset();
  CHECK(aoti_cuda_shim_live_handles() == live_before);
}

TEST_CASE("shim: deleted handles are recycled whole: no residue, still detected as deleted, counted, any thread") {
  const int64_t live_before = aoti_cuda_shim_live_handles();
  AtenTensorHandle first = nullptr;
  {
    OwnedTensor big = iota_f32({2, 3, 4});
    first = big.get();
  }  // deleted: its object waits in this thread's pool
  CHECK(aoti_torch_delete_tensor_object(first) == AOTI_TORCH_FAILURE);  // a second delete is still refused
  CHECK(last_error_contains("not a live aoti_cuda tensor"));
  CHECK(aoti_cuda_shim_live_handles() == live_before);
  // The next handle may be that object: it carries nothing of the old tensor.
  AtenTensorHandle u = nullptr;
  REQUIRE(aoti_torch_new_uninitialized_tensor(&u) == AOTI_TORCH_SUCCESS);
  bool defined = true;
  int64_t dim = -1;
  REQUIRE(aoti_torch_is_defined(u, &defined) == AOTI_TORCH_SUCCESS);
  CHECK_FALSE(defined);
  CHECK(aoti_torch_get_dim(u, &dim) == AOTI_TORCH_FAILURE);  // an undefined tensor has no shape to read
  REQUIRE(aoti_torch_delete_tensor_object(u) == AOTI_TORCH_SUCCESS);
  OwnedTensor small = iota_f32({5});
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  REQUIRE(aoti_torch_get_dim(small.get(), &dim) == AOTI_TORCH_SUCCESS);
  REQUIRE(aoti_torch_get_sizes(small.get(), &sizes) == AOTI_TORCH_SUCCESS);
  REQUIRE(aoti_torch_get_strides(small.get(), &strides) == AOTI_TORCH_SUCCESS);
  CHECK(dim == 1);
  CHECK(sizes[0] == 5);
  CHECK(strides[0] == 1);
  int64_t offset = -1;
  REQUIRE(aoti_torch_get_storage_offset(small.get(), &offset) == AOTI_TORCH_SUCCESS);
  CHECK(offset == 0);
  // More handles than a pool keeps, made on one thread and deleted on others
  // (whose pools die with them): every one is counted out, nothing leaks (LSan).
  std::vector<AtenTensorHandle> many(600, nullptr);
  for (AtenTensorHandle& h : many) {
    OwnedTensor t = iota_f32({3});
    REQUIRE(aoti_torch_new_tensor_handle(t.get(), &h) == AOTI_TORCH_SUCCESS);
  }
  CHECK(aoti_cuda_shim_live_handles() == live_before + 1 + 600);
  std::thread a([&] {
    for (std::size_t i = 0; i < 300; ++i) CHECK(aoti_torch_delete_tensor_object(many[i]) == AOTI_TORCH_SUCCESS);
  });
  a.join();
  for (std::size_t i = 300; i < many.size(); ++i) CHECK(aoti_torch_delete_tensor_object(many[i]) == AOTI_TORCH_SUCCESS);
  CHECK(aoti_cuda_shim_live_handles() == live_before + 1);
}
