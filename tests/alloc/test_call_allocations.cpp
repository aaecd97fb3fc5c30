// Heap allocations of a steady-state call: operator new is replaced in this
// test program and counts, on the calling thread, while a CountAllocations
// scope is open. Each counted allocation's backtrace says whose code asked
// for it: this program (aoti_cuda) or a model library (the AOTI container's
// own code). On the CPU (fake model library) execute_into allocates nothing;
// on the GPU aoti_cuda's code must allocate nothing for the core fixtures, and
// the counts of the others are reported.
// AOTI_CUDA_ALLOC_TRACE=1 prints them (frames in a model library show as its
// in-memory file plus an offset).
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "support/affine_program.hpp"
#include "support/gpu.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

namespace {
thread_local bool t_counting = false;
thread_local std::size_t t_count = 0;

// A backtrace per counted allocation, kept in static storage (recording must
// not allocate), to tell allocations made by aoti_cuda's code (this program)
// from those a model library makes inside its own code.
constexpr int kTraceFrames = 14;
constexpr std::size_t kMaxTraces = 16;
struct Trace {
  void* frames[kTraceFrames];
  int depth;
  std::size_t bytes;
};
Trace g_traces[kMaxTraces];
thread_local bool t_tracing = false;
const bool g_print_traces = [] {
  void* warm[1];
  (void)::backtrace(warm, 1);  // its first call loads the unwinder, which allocates
  const char* v = std::getenv("AOTI_CUDA_ALLOC_TRACE");
  return v != nullptr && *v != '\0' && *v != '0';
}();

__attribute__((noinline)) void count_allocation(std::size_t n) {
  const std::size_t i = t_count++;
  if (t_tracing || i >= kMaxTraces) return;
  t_tracing = true;  // backtrace() itself must not recurse into the record
  g_traces[i].depth = ::backtrace(g_traces[i].frames, kTraceFrames);
  g_traces[i].bytes = n;
  t_tracing = false;
}

bool starts_with(const char* s, const char* prefix) {
  return s != nullptr && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// The file of the code that asked for the allocation: the first frame past
// operator new and the C/C++ runtime libraries ("" when unknown).
std::string requesting_file(const Trace& t) {
  for (int f = 1; f < t.depth; ++f) {
    Dl_info info{};
    if (::dladdr(t.frames[f], &info) == 0 || info.dli_fname == nullptr) return "";
    if (starts_with(info.dli_sname, "_Znw") || starts_with(info.dli_sname, "_Zna")) continue;  // operator new
    const std::string file = info.dli_fname;
    if (file.find("libstdc++") != std::string::npos || file.find("/libc.so") != std::string::npos ||
        file.find("libgcc_s") != std::string::npos) {
      continue;
    }
    return file;
  }
  return "";
}

std::string program_file() {
  Dl_info info{};
  return ::dladdr(reinterpret_cast<void*>(&requesting_file), &info) != 0 && info.dli_fname != nullptr
             ? info.dli_fname
             : "?";
}

// How many of the last `count` allocations aoti_cuda's code made: those whose
// requesting frame is in this program, plus any not traced (counted as ours).
std::size_t made_by_program(std::size_t count) {
  const std::string self = program_file();
  std::size_t ours = count > kMaxTraces ? count - kMaxTraces : 0;
  for (std::size_t i = 0; i < count && i < kMaxTraces; ++i) {
    const std::string file = requesting_file(g_traces[i]);
    if (file.empty() || file == self) ++ours;
    if (!g_print_traces) continue;
    std::fprintf(stderr, "-- allocation %zu of %zu: %zu bytes, requested in %s\n", i + 1, count, g_traces[i].bytes,
                 file.empty() ? "(unknown)" : file.c_str());
    std::fflush(stderr);
    ::backtrace_symbols_fd(g_traces[i].frames + 1, g_traces[i].depth - 1, STDERR_FILENO);
  }
  return ours;
}
}  // namespace

void* operator new(std::size_t n) {
  if (t_counting) count_allocation(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// Every other unaligned form, so that each new meets its own delete (the
// aligned forms stay the library's, paired among themselves).
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (t_counting) count_allocation(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

// Counts this thread's operator new calls while alive.
class CountAllocations {
 public:
  CountAllocations() {
    t_count = 0;
    t_counting = true;
  }
  ~CountAllocations() { t_counting = false; }
  std::size_t count() const { return t_count; }
};

struct Allocations {
  std::size_t total = 0;
  std::size_t by_aoti_cuda = 0;  // the rest were asked for by a model library's own code
};

template <class F>
Allocations allocations_of(F&& call) {
  std::size_t total = 0;
  {
    CountAllocations c;
    call();
    total = c.count();
  }
  return {total, made_by_program(total)};
}

}  // namespace

TEST_CASE("counting works: a vector allocates (asked for by this program), an empty scope does not") {
  const Allocations vector = allocations_of([] { std::vector<int> v(100); });
  CHECK(vector.total == 1);
  CHECK(vector.by_aoti_cuda == 1);
  const Allocations nothing = allocations_of([] {});
  CHECK(nothing.total == 0);
  CHECK(nothing.by_aoti_cuda == 0);
}

TEST_CASE("steady-state calls on the CPU: heap allocations per call") {
  AffineProgram prog;
  LoadOptions lo;
  lo.device = Device::cpu();
  Module m(prog.pte, lo);
  Tensor a = Tensor::empty({3, 4}, DType::kFloat32), b = Tensor::empty({3, 4}, DType::kFloat32);
  for (int64_t i = 0; i < 12; ++i) a.data_ptr<float>()[i] = b.data_ptr<float>()[i] = static_cast<float>(i);
  const std::vector<Tensor> in{a, b};
  std::vector<Tensor> out{Tensor::empty({3, 4}, DType::kFloat32), Tensor::empty({3, 4}, DType::kFloat32)};
  for (int i = 0; i < 3; ++i) m.execute_into("forward", in, out);  // warm: slot scratch grown
  const std::size_t into = allocations_of([&] { m.execute_into("forward", in, out); }).total;
  std::vector<Tensor> result;
  const std::size_t plain = allocations_of([&] { result = m.execute("forward", in); }).total;
  std::printf("heap allocations per call (CPU, fake affine model): execute_into %zu, execute %zu\n", into, plain);
  // execute_into: the slot's value table, the shim's handle pool and the chunk
  // pool hold everything a call needs. execute: the result vector, and each
  // result's shape and strides.
  CHECK(into == 0);
  CHECK(plain <= 1 + 2 * out.size());
  CHECK(result.size() == 2);
  CHECK(std::memcmp(result[0].data(), out[0].data(), out[0].nbytes()) == 0);
}

TEST_CASE("shim tensors: a recycled handle with row-major strides left to the shim allocates no more than one "
          "given them") {
  // A null strides pointer asks for row-major strides (what the int4 operator
  // does for its output); they are written into the recycled handle's vector.
  const int64_t sizes[3] = {4, 5, 6};
  const int64_t strides[3] = {30, 6, 1};
  auto make_and_delete = [&](const int64_t* s) {
    AtenTensorHandle h = nullptr;
    REQUIRE(aoti_torch_empty_strided(3, sizes, s, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &h) ==
            AOTI_TORCH_SUCCESS);
    REQUIRE(aoti_torch_delete_tensor_object(h) == AOTI_TORCH_SUCCESS);
  };
  for (int i = 0; i < 3; ++i) make_and_delete(nullptr);  // warm: the thread's handle pool
  const std::size_t given = allocations_of([&] { make_and_delete(strides); }).total;
  const std::size_t derived = allocations_of([&] { make_and_delete(nullptr); }).total;
  MESSAGE("heap allocations of a CPU tensor made and deleted: strides given " << given << ", row-major by the shim "
                                                                              << derived);
  CHECK(derived == given);
}

namespace {

struct CallAllocations {
  Allocations into, plain;
  bool same_outputs = false;
};

// One method of a fixture, device-resident inputs of zeros (valid token ids
// and positions too) at its upper-bound shapes: the allocations of a
// steady-state execute_into and execute, printed.
CallAllocations steady_state_call(const std::string& name, Module& m, const std::string& method) {
  const aoti_cuda::MethodMeta meta = m.method_meta(method);
  std::vector<Tensor> in;
  for (const aoti_cuda::TensorSpec& s : meta.inputs) {
    Tensor t = Tensor::empty(s.sizes, s.dtype);
    std::memset(t.data(), 0, t.nbytes());
    in.push_back(t.to_device());
  }
  aoti_cuda::RunOptions ro;
  ro.outputs = aoti_cuda::OutputLocation::kDevice;
  std::vector<Tensor> out = m.execute(method, in, ro);
  for (Tensor& t : out) t = Tensor::empty(t.shape(), t.dtype(), t.device());
  for (int i = 0; i < 3; ++i) m.execute_into(method, in, out);
  CallAllocations c;
  c.into = allocations_of([&] { m.execute_into(method, in, out); });
  std::vector<Tensor> result;
  c.plain = allocations_of([&] { result = m.execute(method, in, ro); });
  c.same_outputs = result.size() == out.size();
  std::printf("heap allocations per call (GPU, %s.%s): execute_into %zu (%zu by aoti_cuda, the rest inside the "
              "model library), execute %zu (%zu by aoti_cuda)\n",
              name.c_str(), method.c_str(), c.into.total, c.into.by_aoti_cuda, c.plain.total, c.plain.by_aoti_cuda);
  return c;
}

Module fixture_module(const std::string& name) {
  return Module(std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + name + ".pte");
}

// Every method of each fixture: execute_into allocates nothing in aoti_cuda's
// code and never more than execute (which also builds the results).
void check_fixtures(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    CAPTURE(name);
    Module m = fixture_module(name);
    for (const std::string& method : m.method_names()) {
      CAPTURE(method);
      const CallAllocations c = steady_state_call(name, m, method);
      CHECK(c.into.by_aoti_cuda == 0);
      CHECK(c.into.total <= c.plain.total);
      CHECK(c.same_outputs);
    }
  }
}

}  // namespace

// The AOTI container's run allocates a little in its own code (seen on torch
// 2.11: a buffer of std::stable_partition in reclaim_finished_models and one
// in the generated run_impl), which no runtime can avoid: only allocations
// asked for by aoti_cuda's code count against it.
TEST_CASE("steady-state calls on the GPU: aoti_cuda's code allocates nothing per execute_into" * AOTI_CUDA_GPU_CASE) {
  // Triton kernels, cuBLAS GEMMs (mm, addmm), the int4 operator, two methods sharing state (lm).
  check_fixtures({"add", "mlp", "block", "lm", "mlp_cublas", "mlp_int4"});
}

TEST_CASE("steady-state calls on the GPU: every other runnable fixture allocates nothing either" * AOTI_CUDA_GPU_CASE) {
  // fp16_mlp returns a transposed output: the copy into the caller's row-major
  // tensor is a strided-copy kernel (no staging, no vectors, no synchronization).
  // `partial` is left out: it has a non-delegated operator and cannot run here.
  check_fixtures({"bf16_mlp", "fp16_mlp", "dynamic_mlp", "conv", "cnn", "embed", "encdec", "kv_cache", "multi_out",
                  "sdpa_bf16_dynamic"});
}
