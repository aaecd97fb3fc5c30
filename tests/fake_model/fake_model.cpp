// A fake AOTInductor model library for CPU-only tests of the loader and Module.
//
// Built like a real link_libtorch=False model: -fvisibility=hidden, exporting
// only AOTInductor* entry points (the container API + UpdateConstantsFromBlob),
// NOT linked against libaoti_cuda — every aoti_torch_* it calls is left
// undefined and resolved from the global scope when the runtime dlopens it.
// It computes on CPU tensors through those shims, steals its inputs and hands
// out owning output handles, as generated code does.
//
// One source, several libraries (FAKE_MODEL_KIND):
//   1 "affine":  Run(a f32[B,4], b f32[B,4]) -> (y, y)   y = a * w + b, w = 4 floats from the weights blob
//                (constant "w", FQN "affine.w", a Parameter).
//                The same handle fills both output slots (callers must deduplicate).
//                If b[0] == -779 the run warns through aoti_torch_warn (on the
//                calling thread, inside Run) and goes on.
//                If b[0] == -777 the run fails like a real model: input 0 was
//                already stolen (slot nulled), input 1 was not, and a failed
//                shim call (empty_strided with dtype 99) left a message.
//   2 "kv":      Run(pos i64[1], x f32[1,4]) -> (sum f32[4])   cache[pos] = x; returns cache.sum(0).
//                The 4x4 cache (constant "cache", FQN "kv.cache", a Buffer)
//                starts as the weights blob and persists across runs.
//                "kv_wide" is the same with an 8x4 cache (FAKE_KV_ROWS=8).
//   3 "bad import": kind 1 that also imports aoti_torch_fake_op (no shim provides it).
//   "affine_cuda": kind 1 that also imports the CUDA functions the SDK hooks
//                (FAKE_IMPORTS_CUDA); if b[0] == -778 its run prints an error
//                to stderr and fails, as AOTInductor's runtime does.
// Like a real library each exposes its constant table (one constant; its
// ConstantType unless FAKE_NO_CONSTANT_TYPE, as in "affine_untyped") and
// accepts a user-managed replacement (UpdateUserManagedConstantBufferPairs),
// whose alias handle it never frees, as PyTorch 2.11 does not.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "aoti_cuda/shim.h"

#ifndef FAKE_MODEL_KIND
#error "define FAKE_MODEL_KIND"
#endif

#define FAKE_API extern "C" __attribute__((visibility("default")))

#if FAKE_MODEL_KIND == 3
extern "C" AOTITorchError aoti_torch_fake_op(AtenTensorHandle self, AtenTensorHandle* ret);
#endif
#ifdef FAKE_IMPORTS_CUDA
// Like a real model library, "affine_cuda" imports the CUDA functions the SDK
// hooks (runtime/cuda_hooks.hpp) and resolves them when it is loaded: the
// runtime's from the global scope, the driver's weakly (the CPU test machines
// have no libcuda.so.1). fake_model_import() returns what the library's code
// would call for one of them, so tests can see where each import was bound.
#include <cstdio>
extern "C" int cudaEventRecord(void* event, void* stream);
extern "C" int cudaMemcpy(void* dst, const void* src, std::size_t count, int kind);
extern "C" __attribute__((weak)) int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                     unsigned, void*, void**, void**);
extern "C" __attribute__((weak)) int cuModuleLoadData(void** module, const void* image);
#endif
#ifdef FAKE_IMPORTS_MM  // like a program exported with cuBLAS GEMMs (never called here)
extern "C" AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2);
#endif

// A default-visibility template static data member becomes an STB_GNU_UNIQUE
// symbol, like the ~120 a statically linked libstdc++ leaves in real model
// libraries. glibc never unloads a library defining one, unless the loader
// rewrites the binding (see library_loader.hpp).
template <typename T>
struct __attribute__((visibility("default"))) FakeRunCounter {
  static std::atomic<int> value;
};
template <typename T>
std::atomic<int> FakeRunCounter<T>::value{0};
template struct FakeRunCounter<float>;

namespace {

constexpr int64_t kWidth = 4;
#ifdef FAKE_KV_ROWS
constexpr int64_t kRows = FAKE_KV_ROWS;
#else
constexpr int64_t kRows = 4;
#endif
#if FAKE_MODEL_KIND == 2
constexpr std::size_t kNumInputs = 2, kNumOutputs = 1, kWeightFloats = kRows * kWidth;
constexpr const char* kConstantName = "cache";
constexpr const char* kConstantFqn = "kv.cache";
constexpr int32_t kConstantType = 2;  // Buffer
#else
constexpr std::size_t kNumInputs = 2, kNumOutputs = 2, kWeightFloats = kWidth;
constexpr const char* kConstantName = "w";
constexpr const char* kConstantFqn = "affine.w";
#ifdef FAKE_CONSTANT_TYPE_UNKNOWN
constexpr int32_t kConstantType = 0;  // Unknown: neither a parameter nor a buffer of the exported module
#else
constexpr int32_t kConstantType = 1;  // Parameter
#endif
#endif

struct Container {
  std::size_t num_models = 1;
  bool weights_loaded = false;
  std::vector<float> constants;              // the "device" copy of the weights
  AtenTensorHandle constant_handle = nullptr;  // from_blob view over `constants`, like the real runtime
  float* active = nullptr;                   // what runs read and write: constants, or a user-managed buffer
  std::mutex mu;                             // the kv state is shared by all instances
};

// RAII owner for a stolen handle (like generated code's RAIIAtenTensorHandle).
struct Owned {
  AtenTensorHandle h = nullptr;
  explicit Owned(AtenTensorHandle x = nullptr) : h(x) {}
  ~Owned() {
    if (h) aoti_torch_delete_tensor_object(h);
  }
  AtenTensorHandle release() {
    AtenTensorHandle x = h;
    h = nullptr;
    return x;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
};

bool check_f32(AtenTensorHandle t, int64_t rank, int64_t** sizes, float** data) {
  int32_t dtype = -1, dev = -1;
  int64_t dim = -1;
  if (aoti_torch_get_dtype(t, &dtype) || aoti_torch_get_device_type(t, &dev) || aoti_torch_get_dim(t, &dim)) return false;
  if (dtype != aoti_torch_dtype_float32() || dev != aoti_torch_device_type_cpu() || dim != rank) return false;
  void* p = nullptr;
  if (aoti_torch_get_sizes(t, sizes) || aoti_torch_get_data_ptr(t, &p)) return false;
  *data = static_cast<float*>(p);
  return true;
}

#if FAKE_MODEL_KIND != 2
int run_affine(Container* c, AtenTensorHandle* in, AtenTensorHandle* out) {
  // Steal the inputs one at a time, as generated code does.
  Owned a(in[0]);
  in[0] = nullptr;
  int64_t* a_sizes = nullptr;
  float* a_data = nullptr;
  int64_t* b_sizes = nullptr;
  float* b_data = nullptr;
  if (!check_f32(a.h, 2, &a_sizes, &a_data) || !check_f32(in[1], 2, &b_sizes, &b_data)) return 1;
  if (a_sizes[1] != kWidth || b_sizes[0] != a_sizes[0] || b_sizes[1] != kWidth) return 1;
  const int64_t rows = a_sizes[0];
#ifdef FAKE_IMPORTS_CUDA
  if (rows > 0 && b_data[0] == -778.0f) {  // fails the way AOTInductor's runtime does: a message on stderr
    std::fputs("Error: the fake model refuses b[0] = -778\n", stderr);
    return 1;
  }
#endif
  if (rows > 0 && b_data[0] == -779.0f) {  // a warning from inside Run (then the run goes on)
    aoti_torch_warn("fake_run", __FILE__, __LINE__, "the fake model warns about b[0] = -779");
  }
  if (rows > 0 && b_data[0] == -777.0f) {
    AtenTensorHandle bogus = nullptr;
    (void)aoti_torch_empty_strided(2, a_sizes, nullptr, /*dtype=*/99, aoti_torch_device_type_cpu(), 0, &bogus);
    return 1;  // input 1 was never stolen: its slot still holds it
  }
#if FAKE_MODEL_KIND == 3
  if (rows < 0) (void)aoti_torch_fake_op(a.h, nullptr);  // never taken; keeps the import
#endif
#ifdef FAKE_IMPORTS_MM
  if (rows < 0) (void)aoti_torch_cuda_mm_out(a.h, a.h, a.h);  // never taken; keeps the import
#endif
  Owned b(in[1]);
  in[1] = nullptr;
  int64_t sizes[2] = {rows, kWidth};
  int64_t strides[2] = {kWidth, 1};
  AtenTensorHandle y = nullptr;
  if (aoti_torch_empty_strided(2, sizes, strides, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &y)) return 1;
  Owned y_owner(y);
  void* yp = nullptr;
  if (aoti_torch_get_data_ptr(y, &yp)) return 1;
  const float* w = c->active;
  float* yd = static_cast<float*>(yp);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < kWidth; ++k) yd[r * kWidth + k] = a_data[r * kWidth + k] * w[k] + b_data[r * kWidth + k];
  out[0] = y_owner.release();
  out[1] = out[0];  // the same buffer returned twice
  return 0;
}
#else
int run_kv(Container* c, AtenTensorHandle* in, AtenTensorHandle* out) {
  Owned pos(in[0]);
  in[0] = nullptr;
  Owned x(in[1]);
  in[1] = nullptr;
  int32_t dtype = -1;
  void* pp = nullptr;
  if (aoti_torch_get_dtype(pos.h, &dtype) || dtype != aoti_torch_dtype_int64() || aoti_torch_get_data_ptr(pos.h, &pp)) return 1;
  int64_t* x_sizes = nullptr;
  float* x_data = nullptr;
  if (!check_f32(x.h, 2, &x_sizes, &x_data) || x_sizes[0] != 1 || x_sizes[1] != kWidth) return 1;
  const int64_t row = *static_cast<int64_t*>(pp);
  if (row < 0 || row >= kRows) return 1;
  int64_t size = kWidth;
  AtenTensorHandle s = nullptr;
  if (aoti_torch_empty_strided(1, &size, nullptr, aoti_torch_dtype_float32(), aoti_torch_device_type_cpu(), 0, &s)) return 1;
  Owned s_owner(s);
  void* sp = nullptr;
  if (aoti_torch_get_data_ptr(s, &sp)) return 1;
  std::lock_guard<std::mutex> lock(c->mu);
  std::memcpy(&c->active[row * kWidth], x_data, sizeof(float) * kWidth);
  float* sd = static_cast<float*>(sp);
  for (int64_t k = 0; k < kWidth; ++k) {
    sd[k] = 0;
    for (int64_t r = 0; r < kRows; ++r) sd[k] += c->active[r * kWidth + k];
  }
  out[0] = s_owner.release();
  return 0;
}
#endif

}  // namespace

FAKE_API int32_t AOTInductorModelContainerCreateWithDevice(void** container, std::size_t num_models,
                                                           const char* device_str, const char* /*cubin_dir*/) {
  if (container == nullptr || num_models == 0 || device_str == nullptr || std::strcmp(device_str, "cpu") != 0) return 1;
  auto* c = new (std::nothrow) Container();
  if (c == nullptr) return 1;
  c->num_models = num_models;
  *container = c;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerDelete(void* container) {
  auto* c = static_cast<Container*>(container);
  if (c == nullptr) return 1;
  if (c->constant_handle) aoti_torch_delete_tensor_object(c->constant_handle);
  delete c;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetNumInputs(void* container, std::size_t* n) {
  if (container == nullptr || n == nullptr) return 1;
  *n = kNumInputs;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetNumOutputs(void* container, std::size_t* n) {
  if (container == nullptr || n == nullptr) return 1;
  *n = kNumOutputs;
  return 0;
}

// Argument names, as a real library reports those of the exported program.
#if FAKE_MODEL_KIND == 2
const char* const kInputNames[] = {"pos", "x"};
const char* const kOutputNames[] = {"sum"};
#else
const char* const kInputNames[] = {"a", "b"};
const char* const kOutputNames[] = {"y", "y_again"};
// The messages of AOTInductor's generated input check, which say which
// dimensions have a range (aoti_facts.cpp reads them): dim 0 of both inputs
// varies, dim 1 is fixed.
__attribute__((used)) const char kInputChecks[] =
    "input_handles[0]: dim value is too large at 0, \0input_handles[0]: unmatched dim value at 1, \0"
    "input_handles[1]: dim value is too large at 0, \0input_handles[1]: unmatched dim value at 1, ";
#endif

FAKE_API int32_t AOTInductorModelContainerGetInputName(void* container, std::size_t i, const char** name) {
  if (container == nullptr || name == nullptr || i >= kNumInputs) return 1;
  *name = kInputNames[i];
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetOutputName(void* container, std::size_t i, const char** name) {
  if (container == nullptr || name == nullptr || i >= kNumOutputs) return 1;
  *name = kOutputNames[i];
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetConstantsBlobSize(void* container, std::uint64_t* size) {
  if (container == nullptr || size == nullptr) return 1;
  *size = sizeof(float) * kWeightFloats;
  return 0;
}

FAKE_API int32_t AOTInductorModelUpdateConstantsFromBlob(void* container, const std::uint8_t* blob) {
  auto* c = static_cast<Container*>(container);
  if (c == nullptr || blob == nullptr) return 1;
  try {
    c->constants.assign(kWeightFloats, 0.0f);
    std::memcpy(c->constants.data(), blob, sizeof(float) * kWeightFloats);
    if (c->constant_handle) aoti_torch_delete_tensor_object(c->constant_handle);
    c->constant_handle = nullptr;
    int64_t size = static_cast<int64_t>(kWeightFloats);
    int64_t stride = 1;
    if (aoti_torch_create_tensor_from_blob_v2(c->constants.data(), 1, &size, &stride, 0, aoti_torch_dtype_float32(),
                                              aoti_torch_device_type_cpu(), 0, &c->constant_handle,
                                              aoti_torch_layout_strided(), nullptr, 0)) {
      return 1;
    }
    c->weights_loaded = true;
    c->active = c->constants.data();
    return 0;
  } catch (...) {
    return 1;
  }
}

FAKE_API int32_t AOTInductorModelContainerGetNumConstants(void* container, std::size_t* n) {
  if (container == nullptr || n == nullptr) return 1;
  *n = 1;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetConstantName(void* container, std::size_t idx, const char** name) {
  if (container == nullptr || name == nullptr || idx != 0) return 1;
  *name = kConstantName;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetConstantOriginalFQN(void* container, std::size_t idx, const char** fqn) {
  if (container == nullptr || fqn == nullptr || idx != 0) return 1;
  *fqn = kConstantFqn;
  return 0;
}

#ifndef FAKE_NO_CONSTANT_TYPE
FAKE_API int32_t AOTInductorModelContainerGetConstantType(void* container, std::size_t idx, int32_t* type) {
  if (container == nullptr || type == nullptr || idx != 0) return 1;
  *type = kConstantType;
  return 0;
}
#endif

FAKE_API int32_t AOTInductorModelContainerGetConstantFromFolded(void* container, std::size_t idx, bool* folded) {
  if (container == nullptr || folded == nullptr || idx != 0) return 1;
  *folded = false;
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetConstantDtype(void* container, std::size_t idx, int32_t* dtype) {
  if (container == nullptr || dtype == nullptr || idx != 0) return 1;
  *dtype = aoti_torch_dtype_float32();
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerGetConstantDataSize(void* container, std::size_t idx, std::size_t* size) {
  if (container == nullptr || size == nullptr || idx != 0) return 1;
  *size = sizeof(float) * kWeightFloats;
  return 0;
}

struct FakeConstantMapEntry {
  const char* name;
  AtenTensorHandle handle;
};

FAKE_API int32_t AOTInductorModelContainerUpdateUserManagedConstantBufferPairs(void* container,
                                                                              const FakeConstantMapEntry* pairs,
                                                                              std::size_t num_pairs, bool use_inactive,
                                                                              bool /*validate_full_update*/) {
  auto* c = static_cast<Container*>(container);
  if (c == nullptr || (num_pairs > 0 && pairs == nullptr) || use_inactive) return 1;
  for (std::size_t i = 0; i < num_pairs; ++i) {
    if (pairs[i].name == nullptr || std::strcmp(pairs[i].name, kConstantName) != 0) continue;  // unknown names are ignored
    AtenTensorHandle alias = nullptr;  // kept (and leaked) like the real runtime's alias
    void* data = nullptr;
    if (aoti_torch_new_tensor_handle(pairs[i].handle, &alias) || aoti_torch_get_data_ptr(alias, &data)) return 1;
    std::lock_guard<std::mutex> lock(c->mu);
    c->active = static_cast<float*>(data);
    c->weights_loaded = true;  // user-managed constants stand in for the blob, as in the real container
  }
  return 0;
}

FAKE_API int32_t AOTInductorModelContainerRun(void* container, AtenTensorHandle* inputs, std::size_t num_inputs,
                                              AtenTensorHandle* outputs, std::size_t num_outputs, void* /*stream*/,
                                              void* /*proxy_executor*/) {
  auto* c = static_cast<Container*>(container);
  if (c == nullptr || num_inputs != kNumInputs || num_outputs != kNumOutputs || !c->weights_loaded) return 1;
  ++FakeRunCounter<float>::value;
  try {
#if FAKE_MODEL_KIND == 2
    return run_kv(c, inputs, outputs);
#else
    return run_affine(c, inputs, outputs);
#endif
  } catch (...) {
    return 1;
  }
}

#ifdef FAKE_IMPORTS_CUDA
FAKE_API void* fake_model_import(const char* name) {
  if (std::strcmp(name, "cudaEventRecord") == 0) return reinterpret_cast<void*>(&cudaEventRecord);
  if (std::strcmp(name, "cudaMemcpy") == 0) return reinterpret_cast<void*>(&cudaMemcpy);
  if (std::strcmp(name, "cuLaunchKernel") == 0) return reinterpret_cast<void*>(&cuLaunchKernel);
  if (std::strcmp(name, "cuModuleLoadData") == 0) return reinterpret_cast<void*>(&cuModuleLoadData);
  if (std::strcmp(name, "fputs") == 0) return reinterpret_cast<void*>(&std::fputs);
  return nullptr;
}
#endif
