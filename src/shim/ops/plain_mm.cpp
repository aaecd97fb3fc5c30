// Shim operators: aoti_torch_cuda_int{4,5,6,8}_plain_mm (ExecuTorch 1.3+ quantized decode
// linears; formats in plain_mm.hpp). Validation, output allocation and dispatch here; the
// kernel is in plain_mm.cu.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "aoti_cuda/dtype.hpp"
#include "aoti_cuda/shim.h"
#include "common/kernel_timer.hpp"
#include "shim/allocator.hpp"
#include "shim/error_state.hpp"
#include "shim/ops/plain_mm.hpp"
#include "shim/tensor_object.hpp"

namespace aoti_cuda {
namespace shim {
namespace {

using plainmm::Kind;
using plainmm::Problem;

constexpr int32_t kUInt8 = static_cast<int32_t>(DType::kUInt8);
constexpr int32_t kInt8 = static_cast<int32_t>(DType::kInt8);
constexpr int32_t kFloat16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kBFloat16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kFloat32 = static_cast<int32_t>(DType::kFloat32);
// Keeps every index product of the kernel far from int64 overflow and the grid in range.
constexpr int64_t kMaxExtent = int64_t{1} << 31;

const char* kind_op(Kind kind) {
  switch (kind) {
    case Kind::kInt4Legacy: return "int4_plain_mm (ExecuTorch 1.3 form)";
    case Kind::kInt4: return "int4_plain_mm";
    case Kind::kInt5: return "int5_plain_mm";
    case Kind::kInt6: return "int6_plain_mm";
    case Kind::kInt8: return "int8_plain_mm";
  }
  return "plain_mm";
}

// A weight operand: the given dtype(s), 2-d [rows, cols], contiguous, on `device`.
void expect_operand(const AtenTensorOpaque& t, const char* name, bool byte_codes, int32_t dtype, int64_t rows,
                    int64_t cols) {
  if (byte_codes) {
    expect(t.dtype == kUInt8 || t.dtype == kInt8,
           [&] { return std::string(name) + " must be uint8 or int8, got " + dtype_name(t.dtype); });
  } else {
    expect(t.dtype == dtype,
           [&] { return std::string(name) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype); });
  }
  expect(t.dim() == 2 && t.sizes[0] == rows && t.sizes[1] == cols, [&] {
    return std::string(name) + " must be [" + std::to_string(rows) + ", " + std::to_string(cols) + "], got " +
           format_dims(t.sizes);
  });
  expect(t.is_contiguous(), [&] {
    return std::string(name) + " must be contiguous (sizes " + format_dims(t.sizes) + ", strides " +
           format_dims(t.strides) + ")";
  });
}

// log2(v) when v is a power of two, else -1.
int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1)) != 0) return -1;
  int shift = 0;
  while ((int64_t{1} << shift) != v) ++shift;
  return shift;
}

struct Operands {
  const AtenTensorOpaque* q = nullptr;
  const AtenTensorOpaque* qh = nullptr;
  const AtenTensorOpaque* scale = nullptr;
  const AtenTensorOpaque* scale_step = nullptr;
  const AtenTensorOpaque* zero = nullptr;
  const AtenTensorOpaque* zero_step = nullptr;
};

// Checks every operand against the format of `kind` (plain_mm.hpp) and fills the problem's
// sizes; metadata only, so CPU tensors get the same diagnostics. Devices are checked after.
Problem validate(Kind kind, const AtenTensorOpaque& x, const Operands& o, int64_t group) {
  Problem p;
  p.kind = kind;
  expect(x.dtype == kBFloat16 || x.dtype == kFloat16 || x.dtype == kFloat32,
         [&] { return std::string("self must be bfloat16, float16 or float32, got ") + dtype_name(x.dtype); });
  expect(x.dim() == 2, [&] { return "self must be 2-d [M, K], got " + format_dims(x.sizes); });
  p.x_dtype = x.dtype;
  p.m = x.sizes[0];
  p.k = x.sizes[1];
  expect(x.strides[1] == 1 && (p.m <= 1 || x.strides[0] >= p.k), [&] {
    return "self must have a unit stride along K and rows that do not overlap, got strides " + format_dims(x.strides);
  });
  p.ldx = p.m <= 1 ? p.k : x.strides[0];
  const AtenTensorOpaque& q = *o.q;
  expect(q.dim() == 2, [&] { return "qdata must be 2-d [N, ...], got " + format_dims(q.sizes); });
  p.n = q.sizes[0];
  expect(p.k > 0 && p.k < kMaxExtent && p.n < kMaxExtent && p.m < kMaxExtent, [&] {
    return "K must be positive and M, N, K below 2^31, got M = " + std::to_string(p.m) + ", N = " +
           std::to_string(p.n) + ", K = " + std::to_string(p.k);
  });
  expect(group > 0 && p.k % group == 0, [&] {
    return "group_size must be positive and divide K = " + std::to_string(p.k) + ", got " + std::to_string(group);
  });
  p.group = group;
  const int64_t groups = p.k / group;
  const bool nibbles = kind != Kind::kInt8;
  if (nibbles) expect(p.k % 2 == 0, [&] { return "K must be even, got " + std::to_string(p.k); });
  if (kind == Kind::kInt5 || kind == Kind::kInt6) {
    expect(p.k % 32 == 0, [&] { return "K must be a multiple of 32, got " + std::to_string(p.k); });
  }
  switch (kind) {
    case Kind::kInt4Legacy:
      expect_operand(q, "qdata", true, 0, p.n, p.k / 2);
      expect_operand(*o.scale, "scale", false, kBFloat16, groups, p.n);
      expect_operand(*o.zero, "zero", false, kBFloat16, groups, p.n);
      break;
    case Kind::kInt4:
    case Kind::kInt5: {
      expect(p.k % 256 == 0 && 256 % group == 0, [&] {
        return "K must be a multiple of 256 and group_size divide 256 (per-256 steps), got K = " +
               std::to_string(p.k) + ", group_size = " + std::to_string(group);
      });
      p.supers = p.k / 256;
      expect_operand(q, kind == Kind::kInt4 ? "qdata" : "ql", true, 0, p.n, p.k / 2);
      if (kind == Kind::kInt5) expect_operand(*o.qh, "qh", true, 0, p.n, p.k / 8);
      expect_operand(*o.scale, "scale", true, 0, p.n, groups);
      expect_operand(*o.scale_step, "scale_step", false, kFloat16, p.n, p.supers);
      expect_operand(*o.zero, "zero", true, 0, p.n, groups);
      expect_operand(*o.zero_step, "zero_point_step", false, kFloat16, p.n, p.supers);
      break;
    }
    case Kind::kInt6: {
      expect_operand(q, "ql", true, 0, p.n, p.k / 2);
      expect_operand(*o.qh, "qh", true, 0, p.n, p.k / 4);
      expect_operand(*o.scale, "scale", true, 0, p.n, groups);
      const AtenTensorOpaque& st = *o.scale_step;
      expect(st.dim() == 2 && st.sizes[0] == p.n && st.sizes[1] > 0 && groups % st.sizes[1] == 0, [&] {
        return "steps must be [N, S] with S dividing K/group_size = " + std::to_string(groups) + " (N = " +
               std::to_string(p.n) + "), got " + format_dims(st.sizes);
      });
      p.supers = st.sizes[1];
      expect_operand(st, "steps", false, kFloat16, p.n, p.supers);
      break;
    }
    case Kind::kInt8:
      expect(q.dtype == kInt8, [&] { return std::string("qdata must be int8, got ") + dtype_name(q.dtype); });
      expect_operand(q, "qdata", false, kInt8, p.n, p.k);
      expect_operand(*o.scale, "scale", false, kBFloat16, p.n, groups);
      expect_operand(*o.zero, "zero", false, kInt8, p.n, groups);
      break;
  }
  p.groups = groups;
  p.groups_per_super = p.supers > 0 ? groups / p.supers : 1;
  p.group_shift = log2_exact(p.group);
  p.groups_per_super_shift = log2_exact(p.groups_per_super);
  p.scale_signed = o.scale->dtype == kInt8;
  p.zero_signed = o.zero != nullptr && o.zero->dtype == kInt8;
  return p;
}

int cuda_device_of(const AtenTensorOpaque& t, const char* name) {
  if (!t.storage->is_cuda()) throw_invalid(std::string(name) + " must be a CUDA tensor, got " + t.describe());
  return t.storage->device_index;
}

AtenTensorHandle plain_mm(Kind kind, AtenTensorHandle self, const Operands& o, int64_t group) {
  const AtenTensorOpaque& x = *checked_defined(self, "self");
  Problem p = validate(kind, x, o, group);
  const int device = cuda_device_of(x, "self");
  const AtenTensorOpaque* all[] = {o.q, o.qh, o.scale, o.scale_step, o.zero, o.zero_step};
  const char* names[] = {"qdata", "qh", "scale", "scale_step", "zero", "zero_point_step"};
  for (int i = 0; i < 6; ++i) {
    if (all[i] == nullptr) continue;
    expect(cuda_device_of(*all[i], names[i]) == device, [&] {
      return std::string(names[i]) + " must be on the device of self (" + x.describe() + "), got " +
             all[i]->describe();
    });
  }
  p.x = x.data_ptr();
  p.q = o.q->data_ptr();
  p.qh = o.qh ? o.qh->data_ptr() : nullptr;
  p.scale = o.scale->data_ptr();
  p.scale_step = o.scale_step ? o.scale_step->data_ptr() : nullptr;
  p.zero = o.zero ? o.zero->data_ptr() : nullptr;
  p.zero_step = o.zero_step ? o.zero_step->data_ptr() : nullptr;
  const auto aligned = [](const void* ptr, uintptr_t a) { return reinterpret_cast<uintptr_t>(ptr) % a == 0; };
  p.by8 = p.group % 8 == 0 && aligned(p.q, 4);
  p.by32 = p.group % 32 == 0 && aligned(p.q, 16) &&
           (kind != Kind::kInt5 || aligned(p.qh, 4)) && (kind != Kind::kInt6 || aligned(p.qh, 8));
  const int64_t x_item = static_cast<int64_t>(element_size(p.x_dtype));
  p.x_vec = aligned(p.x, 16) && (p.ldx * x_item) % 16 == 0;

  const int64_t out_sizes[2] = {p.m, p.n};
  HandleGuard out;
  out.handle = new_empty_strided(kind_op(kind), 2, out_sizes, nullptr, p.x_dtype,
                                 static_cast<int32_t>(DeviceType::kCUDA), device, false);
  p.out = out.handle->data_ptr();
  DeviceSwitch on_device(device);
  void* stream = current_stream(device);
  common::KernelTimer::Launch timed(common::KernelTimer::current(), nullptr, kind_op(kind), stream);
  const int err = plainmm::launch(p, stream);
  timed.done(err == 0);
  if (err != 0) throw_cuda_error(err, std::string(kind_op(kind)) + " kernel launch");
  return out.release();
}

// One tensor argument of an entry point: where it goes and its name in the signature.
struct OperandArg {
  const AtenTensorOpaque* Operands::*field;
  AtenTensorHandle handle;
  const char* name;
};

// The body every C entry point shares: ret0 checked and cleared first, each tensor argument
// required to be a defined tensor (named as in the signature), then the multiply. `et13`: the
// ExecuTorch 1.3 form of int4, whose group size of 0 means the caller passed the 1.4 form's null
// `zero` (see the dispatch below).
AOTITorchError plain_mm_entry(const char* fn, Kind kind, AtenTensorHandle self, std::initializer_list<OperandArg> args,
                              int64_t group_size, AtenTensorHandle* ret0, bool et13 = false) {
  return shim_call(fn, [&] {
    AtenTensorHandle& out = out_param(ret0, "ret0");
    out = nullptr;
    if (et13) {
      expect(group_size != 0, [] { return std::string("zero is null (or an ExecuTorch 1.3 call with group_size 0)"); });
    }
    Operands o;
    for (const OperandArg& a : args) o.*a.field = checked_defined(a.handle, a.name);
    out = plain_mm(kind, self, o, group_size);
  });
}

// Below the lowest address Linux maps (vm.mmap_min_addr defaults to 64 KiB), so no tensor
// handle can have it; a group size (at most K) always does.
constexpr uintptr_t kLowestHandleAddress = 65536;

}  // namespace
}  // namespace shim
}  // namespace aoti_cuda

// ExecuTorch 1.3 and 1.4 declare aoti_torch_cuda_int4_plain_mm with two signatures:
//   1.3: (self, qdata, scale, zero, int64_t group_size, AtenTensorHandle* ret0)
//   1.4: (self, qdata, scale, scale_step, zero, zero_point_step, int64_t group_size, ret0)
// The fifth argument tells them apart: a group size (at most K) is below any handle's address.
// On x86-64 the 1.4 form passes its last two arguments on the stack and a 1.3 caller reserves
// no room for them, while a C function may write to its incoming stack arguments (GCC does, to
// spill locals): so the entry point is four instructions of assembly that only look at the fifth
// register and jump to the C implementation of the right form, which then owns exactly the
// arguments its caller passed. aarch64 passes all eight in registers, so C can dispatch there. (endbr64: a landing pad for
// indirect-branch tracking, a no-op elsewhere.)
extern "C" {

__attribute__((visibility("hidden"))) AOTITorchError aoti_cuda_plain_mm_int4_et13(AtenTensorHandle self,
                                                                                  AtenTensorHandle qdata,
                                                                                  AtenTensorHandle scale,
                                                                                  AtenTensorHandle zero,
                                                                                  int64_t group_size,
                                                                                  AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return plain_mm_entry("aoti_torch_cuda_int4_plain_mm", Kind::kInt4Legacy, self,
                        {{&Operands::q, qdata, "qdata"}, {&Operands::scale, scale, "scale"}, {&Operands::zero, zero, "zero"}},
                        group_size, ret0, /*et13=*/true);
}

__attribute__((visibility("hidden"))) AOTITorchError aoti_cuda_plain_mm_int4_et14(
    AtenTensorHandle self, AtenTensorHandle qdata, AtenTensorHandle scale, AtenTensorHandle scale_step,
    AtenTensorHandle zero, AtenTensorHandle zero_point_step, int64_t group_size, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return plain_mm_entry("aoti_torch_cuda_int4_plain_mm", Kind::kInt4, self,
                        {{&Operands::q, qdata, "qdata"},
                         {&Operands::scale, scale, "scale"},
                         {&Operands::scale_step, scale_step, "scale_step"},
                         {&Operands::zero, zero, "zero"},
                         {&Operands::zero_step, zero_point_step, "zero_point_step"}},
                        group_size, ret0);
}

}  // extern "C"

static_assert(aoti_cuda::shim::kLowestHandleAddress == 65536, "the assembly below compares with 65535");
#if defined(__x86_64__)
asm(R"(
  .pushsection .text
  .globl aoti_torch_cuda_int4_plain_mm
  .type aoti_torch_cuda_int4_plain_mm, @function
  .p2align 4
aoti_torch_cuda_int4_plain_mm:
  .cfi_startproc
  endbr64
  cmpq $65535, %r8
  ja 1f
  jmp aoti_cuda_plain_mm_int4_et13
1:
  jmp aoti_cuda_plain_mm_int4_et14
  .cfi_endproc
  .size aoti_torch_cuda_int4_plain_mm, .-aoti_torch_cuda_int4_plain_mm
  .popsection
)");
#elif defined(__aarch64__)
extern "C" AOTITorchError aoti_torch_cuda_int4_plain_mm(AtenTensorHandle self, AtenTensorHandle qdata,
                                                        AtenTensorHandle scale, AtenTensorHandle scale_step,
                                                        AtenTensorHandle zero, AtenTensorHandle zero_point_step,
                                                        int64_t group_size, AtenTensorHandle* ret0) {
  if (reinterpret_cast<uintptr_t>(zero) < aoti_cuda::shim::kLowestHandleAddress) {
    return aoti_cuda_plain_mm_int4_et13(self, qdata, scale, scale_step, static_cast<int64_t>(
                                        reinterpret_cast<uintptr_t>(zero)), reinterpret_cast<AtenTensorHandle*>(zero_point_step));
  }
  return aoti_cuda_plain_mm_int4_et14(self, qdata, scale, scale_step, zero, zero_point_step, group_size, ret0);
}
#else
#error "aoti_torch_cuda_int4_plain_mm: the dispatch between ExecuTorch 1.3 and 1.4 calls is written for x86-64 and aarch64"
#endif

extern "C" {

AOTITorchError aoti_torch_cuda_int5_plain_mm(AtenTensorHandle self, AtenTensorHandle ql, AtenTensorHandle qh,
                                             AtenTensorHandle scale, AtenTensorHandle scale_step,
                                             AtenTensorHandle zero, AtenTensorHandle zero_point_step,
                                             int64_t group_size, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return plain_mm_entry(__func__, Kind::kInt5, self,
                        {{&Operands::q, ql, "ql"},
                         {&Operands::qh, qh, "qh"},
                         {&Operands::scale, scale, "scale"},
                         {&Operands::scale_step, scale_step, "scale_step"},
                         {&Operands::zero, zero, "zero"},
                         {&Operands::zero_step, zero_point_step, "zero_point_step"}},
                        group_size, ret0);
}

AOTITorchError aoti_torch_cuda_int6_plain_mm(AtenTensorHandle self, AtenTensorHandle ql, AtenTensorHandle qh,
                                             AtenTensorHandle scale, AtenTensorHandle steps, int64_t group_size,
                                             AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return plain_mm_entry(__func__, Kind::kInt6, self,
                        {{&Operands::q, ql, "ql"},
                         {&Operands::qh, qh, "qh"},
                         {&Operands::scale, scale, "scale"},
                         {&Operands::scale_step, steps, "steps"}},
                        group_size, ret0);
}

AOTITorchError aoti_torch_cuda_int8_plain_mm(AtenTensorHandle self, AtenTensorHandle qdata, AtenTensorHandle scale,
                                             AtenTensorHandle zero, int64_t group_size, AtenTensorHandle* ret0) {
  using namespace aoti_cuda::shim;
  return plain_mm_entry(__func__, Kind::kInt8, self,
                        {{&Operands::q, qdata, "qdata"}, {&Operands::scale, scale, "scale"}, {&Operands::zero, zero, "zero"}},
                        group_size, ret0);
}

}  // extern "C"
