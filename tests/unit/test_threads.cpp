// The threading contract exercised for ThreadSanitizer (scripts/test.sh runs
// this suite in a TSan build): concurrent calls on one Module, concurrent
// loads/unloads of different Modules, Tensor copies shared across threads,
// and the shim's allocator, handles and per-thread stream tables. In regular
// builds the same cases check results; under TSan any race is a report.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/memory.hpp"
#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "support/affine_program.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

constexpr int kThreads = 4;

LoadOptions cpu_options(std::size_t num_models = 1) {
  LoadOptions o;
  o.device = Device::cpu();
  o.num_models = num_models;
  return o;
}

Tensor row(float v) {
  Tensor t = Tensor::empty({1, 4}, DType::kFloat32);
  for (int k = 0; k < 4; ++k) t.data_ptr<float>()[k] = v;
  return t;
}

Tensor position(int64_t p) {
  Tensor t = Tensor::empty({1}, DType::kInt64);
  *t.data_ptr<int64_t>() = p;
  return t;
}

}  // namespace

TEST_CASE("threads: concurrent execute of two methods on one Module, with the accessors") {
  TempDir dir;
  Module m(write_affine_kv_program(dir.path, "threads", 1), cpu_options(2));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const float v = static_cast<float>(t * 100 + i);
        auto out = m.forward({row(v), row(1)});
        for (int k = 0; k < 4; ++k) bad += out.at(0).data_ptr<float>()[k] != v * static_cast<float>(k + 1) + 1;
        // Rows 0..3 of the shared cache; all writers store the same value per
        // row, so the sum is known whatever the interleaving.
        auto sum = m.execute("accumulate", {position(t), row(static_cast<float>(t))});
        bad += sum.at(0).numel() != 4;
        bad += m.method_meta("accumulate").inputs.size() != 2;
        bad += m.method_names().size() != 2;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
  auto sum = m.execute("accumulate", {position(0), row(0)});
  for (int k = 0; k < 4; ++k) CHECK(sum[0].data_ptr<float>()[k] == 0 + 1 + 2 + 3);
}

TEST_CASE("threads: different Modules loaded, run and unloaded concurrently") {
  TempDir dir;
  const std::string pte = write_affine_kv_program(dir.path, "threads", 1);
  const int64_t handles = aoti_cuda_shim_live_handles();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        Module m(pte, cpu_options());
        auto out = m.forward({row(static_cast<float>(t)), row(0)});
        bad += out.at(1).data_ptr<float>()[3] != 4.0f * static_cast<float>(t);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
  CHECK(aoti_cuda_shim_live_handles() == handles);
}

TEST_CASE("threads: copies of one Tensor used and destroyed on several threads") {
  Tensor shared = Tensor::empty({64}, DType::kFloat32);
  for (int i = 0; i < 64; ++i) shared.data_ptr<float>()[i] = static_cast<float>(i);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Each thread owns a copy (copying one Tensor object while another thread
    // assigns it would be a race by contract); all copies share the storage.
    threads.emplace_back([&bad, mine_copy = shared] {
      for (int i = 0; i < 200; ++i) {
        Tensor copy = mine_copy;  // shared ownership, const reads only
        Tensor mine = copy.to(Device::cpu());
        Tensor other = Tensor::empty({64}, DType::kFloat32);
        other.copy_from(copy);
        bad += mine.data_ptr<float>()[63] != 63.0f || other.data_ptr<float>()[1] != 1.0f;
        bad += copy.nbytes() != 64 * sizeof(float) || !copy.is_contiguous();
      }
    });
  }
  // The last owner of the storage may be any of the threads.
  shared = Tensor();
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
}

TEST_CASE("threads: the shim's allocator, handles and per-thread streams under concurrent use") {
  const int64_t handles = aoti_cuda_shim_live_handles();
  AtenTensorHandle common = nullptr;
  const int64_t sizes[2] = {8, 8};
  REQUIRE(aoti_torch_empty_strided(2, sizes, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0,
                                   &common) == 0);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread's stream table is its own: a fake stream value per thread.
      void* mine = reinterpret_cast<void*>(static_cast<std::uintptr_t>(0x1000 + t * 0x100));
      void* previous = nullptr;
      bad += aoti_cuda_shim_set_current_stream(0, mine, &previous) != 0 || previous != nullptr;
      for (int i = 0; i < 200; ++i) {
        AtenTensorHandle h = nullptr, alias = nullptr;
        bad += aoti_torch_empty_strided(2, sizes, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(),
                                        0, &h) != 0;
        bad += aoti_torch_new_tensor_handle(common, &alias) != 0;  // shared storage refcount
        void* seen = nullptr;
        bad += aoti_torch_get_current_cuda_stream(0, &seen) != 0 || seen != mine;
        bad += aoti_torch_delete_tensor_object(alias) != 0;
        bad += aoti_torch_delete_tensor_object(h) != 0;
        (void)aoti_cuda::device_memory_stats(0);
      }
      bad += aoti_cuda_shim_set_current_stream(0, nullptr, nullptr) != 0;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
  CHECK(aoti_torch_delete_tensor_object(common) == 0);
  CHECK(aoti_cuda_shim_live_handles() == handles);
}
