// A corpus of broken .pte/.ptd files, generated from a real fixture and from
// synthesized programs. Every file must be rejected with the expected error
// code AND message substrings (which check failed, which field) — never a
// crash, hang or an unrelated error.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "aoti_cuda_schema/flat_tensor_generated.h"
#include "aoti_cuda_schema/program_generated.h"
#include "support/pte_builder.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::ErrorCode;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::Program;
using namespace aoti_cuda_test;
namespace et = executorch_flatbuffer;
namespace ft = flat_tensor_flatbuffer;

namespace {

struct BrokenCase {
  std::string name;
  Bytes pte;
  std::vector<Bytes> ptds;
  ErrorCode code = ErrorCode::kInvalidProgram;
  std::vector<std::string> expect;  // every substring must appear in what()
};

ByteView view(const Bytes& b) { return ByteView{b.data(), b.size()}; }

const Bytes kSo = to_bytes("\x7f" "ELF-fake-shared-object-bytes");
const Bytes kWeights = to_bytes("0123456789abcdef0123456789abcdef");

/// A valid 1.2-style program: one method, .so in the .pte, weights in the .ptd.
BuiltProgram base_program(const std::function<void(MethodDesc&)>& tweak = {}) {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  MethodDesc m = cuda_method("forward", {f32({2, 3})}, {f32({2, 3})}, blobs);
  if (tweak) tweak(m);
  b.add_method(m);
  return b.build();
}

BrokenCase method_case(const std::string& name, const std::function<void(MethodDesc&)>& tweak,
                       std::vector<std::string> expect) {
  BuiltProgram p = base_program(tweak);
  return BrokenCase{name, p.pte, {p.ptd}, ErrorCode::kInvalidProgram, std::move(expect)};
}

BrokenCase tensor_case(const std::string& name, const std::function<void(TensorDesc&)>& tweak,
                       std::vector<std::string> expect) {
  return method_case(name, [&](MethodDesc& m) { tweak(m.values[0].tensor); }, std::move(expect));
}

// Address of a scalar/offset field of a table inside `buf` (for in-place patches).
std::size_t field_offset(const Bytes& buf, const void* table, flatbuffers::voffset_t vt) {
  const auto* t = reinterpret_cast<const flatbuffers::Table*>(table);
  const std::uint8_t* p = t->GetAddressOf(vt);
  REQUIRE(p != nullptr);
  return static_cast<std::size_t>(p - buf.data());
}
std::size_t object_offset(const Bytes& buf, const void* p) {
  return static_cast<std::size_t>(static_cast<const std::uint8_t*>(p) - buf.data());
}

void run_case(const BrokenCase& c) {
  CAPTURE(c.name);
  std::vector<ByteView> data;
  for (const auto& d : c.ptds) data.push_back(view(d));
  try {
    Program p = Program::from_memory(view(c.pte), data, "broken.pte");
    FAIL_CHECK("accepted a broken file: " << c.name);
  } catch (const aoti_cuda::Error& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(e.code() == c.code);
    for (const auto& s : c.expect) CHECK_MESSAGE(msg.find(s) != std::string::npos, "missing \"" << s << "\"");
  }
}

}  // namespace

TEST_CASE("corpus: container headers of a real fixture (.pte and .ptd)") {
  const std::string dir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/add/";
  const Bytes pte = read_file(dir + "add.pte");
  const Bytes ptd = read_file(dir + "aoti_cuda_blob.ptd");
  const std::uint64_t F = pte.size();
  const std::uint64_t program_size = get_u64(pte, 16);
  const std::uint64_t base = get_u64(pte, 24);
  REQUIRE(base > program_size);
  std::vector<BrokenCase> cases;

  // Truncation at every header boundary and at random points.
  auto expect_for_pte_len = [&](std::uint64_t n) -> std::vector<std::string> {
    if (n < 64) return {"P1 (minimum size)", std::to_string(n) + " bytes"};
    if (n < program_size) return {"P4 (extended header)", "program_size", "truncated"};
    return {"P5 (segment base)"};
  };
  std::vector<std::uint64_t> cuts = {0, 1, 4, 7, 8, 11, 12, 15, 16, 23, 24, 31, 32, 39, 40, 63, 64, 65,
                                     program_size - 1, program_size, program_size + 1, base - 1, base, base + 1, F - 1};
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 25; ++i) cuts.push_back(rng() % F);
  for (std::uint64_t n : cuts) {
    cases.push_back({"pte truncated to " + std::to_string(n), Bytes(pte.begin(), pte.begin() + n), {ptd},
                     ErrorCode::kInvalidProgram, expect_for_pte_len(n)});
  }
  const std::uint64_t fb_end = get_u64(ptd, 16) + get_u64(ptd, 24);
  for (std::uint64_t n : std::vector<std::uint64_t>{0, 10, 47, 63, 64, fb_end - 1, fb_end, ptd.size() - 1}) {
    std::vector<std::string> expect;
    if (n < 64) expect = {"D1 (minimum size)"};
    else if (n < fb_end) expect = {"D2 (header extents)", "flatbuffer end"};
    else expect = {"D2 (header extents)", "segment data"};
    cases.push_back({"ptd truncated to " + std::to_string(n), pte, {Bytes(ptd.begin(), ptd.begin() + n)},
                     ErrorCode::kInvalidProgram, expect});
  }

  auto patched_pte = [&](const std::string& name, const std::function<void(Bytes&)>& patch,
                         std::vector<std::string> expect) {
    Bytes b = pte;
    patch(b);
    cases.push_back({name, b, {ptd}, ErrorCode::kInvalidProgram, std::move(expect)});
  };
  auto patched_ptd = [&](const std::string& name, const std::function<void(Bytes&)>& patch,
                         std::vector<std::string> expect) {
    Bytes b = ptd;
    patch(b);
    cases.push_back({name, pte, {b}, ErrorCode::kInvalidProgram, std::move(expect)});
  };
  // Identifiers and magics.
  patched_pte("ET13", [](Bytes& b) { b[7] = '3'; }, {"P2 (file identifier)", "incompatible program version", "ET13"});
  patched_pte("not ET", [](Bytes& b) { std::memcpy(&b[4], "XN01", 4); }, {"P2 (file identifier)", "not an ExecuTorch program"});
  patched_pte("eh01", [](Bytes& b) { b[11] = '1'; }, {"P3 (extended header version)", "eh01"});
  patched_pte("no eh magic: segments unreachable", [](Bytes& b) { std::memcpy(&b[8], "zz00", 4); }, {"S7 (segment bounds)", "no segment area"});
  patched_ptd("FT02", [](Bytes& b) { b[7] = '2'; }, {"D1 (file identifier)", "FT02"});
  patched_ptd("FH02", [](Bytes& b) { b[11] = '2'; }, {"D1 (header magic)", "FH02"});
  patched_ptd("ptd given a .pte", [&](Bytes& b) { b = pte; }, {"D1 (file identifier)", "ET12"});
  // Extended header fields.
  patched_pte("hlen 16", [](Bytes& b) { put_u32(b, 12, 16); }, {"P4 (extended header)", "header_length 16", "< 24"});
  patched_pte("hlen 28", [](Bytes& b) { put_u32(b, 12, 28); }, {"P4 (extended header)", "header_length 28"});
  patched_pte("hlen huge", [](Bytes& b) { put_u32(b, 12, 0xfffffff0u); }, {"P4 (extended header)", "smaller than the header"});
  patched_pte("program_size past EOF", [&](Bytes& b) { put_u64(b, 16, F + 1); }, {"P4 (extended header)", "past the end"});
  patched_pte("program_size 2^63", [](Bytes& b) { put_u64(b, 16, 1ULL << 63); }, {"P4 (extended header)", "program_size"});
  patched_pte("program_size 8", [](Bytes& b) { put_u64(b, 16, 8); }, {"P4 (extended header)", "smaller than the header"});
  patched_pte("program_size cuts the flatbuffer", [&](Bytes& b) { put_u64(b, 16, 200); }, {"P8 (flatbuffer verification)"});
  patched_pte("segment base overflow", [](Bytes& b) { put_u64(b, 24, ~0ULL - 15); }, {"P5 (segment base)"});
  patched_pte("segment base + size overflow", [&](Bytes& b) { put_u64(b, 24, F); put_u64(b, 32, ~0ULL); }, {"P5 (segment base)", "overflows"});
  patched_pte("segment base inside flatbuffer", [](Bytes& b) { put_u64(b, 24, 100); }, {"P5 (segment base)", "overlaps the flatbuffer"});
  patched_pte("segment base past EOF", [&](Bytes& b) { put_u64(b, 24, F + 128); }, {"P5 (segment base)", "past the end"});
  patched_pte("segment data size past EOF", [&](Bytes& b) { put_u64(b, 32, F); }, {"P5 (segment base)", "past the end"});
  patched_pte("segment size without base", [](Bytes& b) { put_u64(b, 24, 0); }, {"P5 (segment base)", "segment_base_offset is 0"});
  patched_pte("segment data size too small for the .so", [](Bytes& b) { put_u64(b, 32, 16); }, {"S7 (segment bounds)", "segment_data_size 16"});
  patched_pte("root offset 0", [](Bytes& b) { put_u32(b, 0, 0); }, {"P9 (root offset)", "into the file header"});
  patched_pte("root offset inside header", [](Bytes& b) { put_u32(b, 0, 12); }, {"P9 (root offset)", "into the file header"});
  patched_pte("root offset huge", [](Bytes& b) { put_u32(b, 0, 0xfffffff0u); }, {"P9 (root offset)", "past the flatbuffer"});
  patched_pte("root vtable offset garbage", [](Bytes& b) {
    const std::uint32_t root = get_u32(b, 0);
    put_u32(b, root, 0x7fffffff);
  }, {"P8 (flatbuffer verification)"});
  patched_ptd("hlen 39", [](Bytes& b) { put_u32(b, 12, 39); }, {"D1 (header length)", "39"});
  patched_ptd("flatbuffer_offset < hlen", [](Bytes& b) { put_u64(b, 16, 8); }, {"D2 (header extents)", "flatbuffer_offset 8"});
  patched_ptd("flatbuffer size overflow", [](Bytes& b) { put_u64(b, 24, ~0ULL - 8); }, {"D2 (header extents)", "overflows"});
  patched_ptd("flatbuffer past EOF", [&](Bytes& b) { put_u64(b, 24, ptd.size()); }, {"D2 (header extents)", "past the end"});
  patched_ptd("ptd segment base overlaps", [](Bytes& b) { put_u64(b, 32, 64); }, {"D2 (header extents)", "overlaps the flatbuffer"});
  patched_ptd("ptd segment size overflow", [](Bytes& b) { put_u64(b, 40, ~0ULL); }, {"D2 (header extents)", "overflows"});
  patched_ptd("ptd segment size past EOF", [&](Bytes& b) { put_u64(b, 40, ptd.size()); }, {"D2 (header extents)", "past the end"});
  patched_ptd("ptd segment data past EOF by one", [](Bytes& b) { put_u64(b, 40, get_u64(b, 40) + 1); }, {"D2 (header extents)", "past the end"});
  patched_ptd("ptd root offset 0", [](Bytes& b) { put_u32(b, 0, 0); }, {"D4 (root offset)"});
  patched_ptd("ptd root offset past end", [](Bytes& b) { put_u32(b, 0, 0x7ffffff0); }, {"D4 (root offset)", "past the flatbuffer"});
  patched_ptd("ptd root vtable garbage", [](Bytes& b) { put_u32(b, get_u32(b, 0), 0x7fffffff); }, {"D3 (flatbuffer verification)"});
  // Empty files.
  cases.push_back({"empty pte", {}, {ptd}, ErrorCode::kInvalidProgram, {"P1 (minimum size)", "0 bytes"}});
  cases.push_back({"empty ptd", pte, {Bytes{}}, ErrorCode::kInvalidProgram, {"D1 (minimum size)", "0 bytes"}});
  // Duplicate data file: every key appears twice.
  cases.push_back({"same .ptd twice", pte, {ptd, ptd}, ErrorCode::kInvalidProgram,
                   {"M1 (unique named data keys)", "forward_weights_blob", "also in"}});

  for (const auto& c : cases) run_case(c);
  CHECK(cases.size() >= 90);
  MESSAGE("fixture-derived broken files: " << cases.size());
}

TEST_CASE("corpus: oversized inputs are rejected before any large read") {
  // The checks must fail on header values alone: the claimed size is never touched.
  Bytes head = base_program().pte;
  head.resize(64);
  put_u64(head, 16, 0x80000000ULL);  // program_size 2^31
  put_u64(head, 24, 0);
  put_u64(head, 32, 0);
  try {
    Program::from_memory(ByteView{head.data(), 0x90000000ULL}, {}, "huge.pte");
    FAIL("accepted");
  } catch (const aoti_cuda::Error& e) {
    CHECK(std::string(e.what()).find("2^31-1") != std::string::npos);
  }
}

TEST_CASE("corpus: synthesized programs with semantic errors") {
  std::vector<BrokenCase> cases;
  // S1
  {
    PteBuilder b;
    b.omit_execution_plan();
    auto p = b.build();
    cases.push_back({"no execution_plan", p.pte, {}, ErrorCode::kInvalidProgram, {"S1 (execution plan)", "missing"}});
  }
  {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, blobs));
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, blobs));
    auto p = b.build();
    cases.push_back({"duplicate method", p.pte, {p.ptd}, ErrorCode::kInvalidProgram, {"S1 (method names)", "\"forward\" appears more than once"}});
  }
  cases.push_back(method_case("no name", [](MethodDesc& m) { m.omit_name = true; }, {"S1 (method names)", "name is missing"}));
  cases.push_back(method_case("empty name", [](MethodDesc& m) { m.name = ""; }, {"S1 (method names)", "missing or empty"}));
  // S2 plan fields
  cases.push_back(method_case("no values", [](MethodDesc& m) { m.omit_values = true; }, {"S2 (plan fields)", "values is missing"}));
  cases.push_back(method_case("no inputs", [](MethodDesc& m) { m.omit_inputs = true; }, {"S2 (plan fields)", "inputs is missing"}));
  cases.push_back(method_case("no outputs", [](MethodDesc& m) { m.omit_outputs = true; }, {"S2 (plan fields)", "outputs is missing"}));
  cases.push_back(method_case("no chains", [](MethodDesc& m) { m.omit_chains = true; }, {"S2 (plan fields)", "chains is missing"}));
  cases.push_back(method_case("empty chains", [](MethodDesc& m) { m.empty_chains = true; }, {"S2 (plan fields)", "chains is empty"}));
  cases.push_back(method_case("no instructions", [](MethodDesc& m) { m.omit_instructions = true; }, {"S2 (plan fields)", "instructions is missing"}));
  cases.push_back(method_case("no delegates", [](MethodDesc& m) { m.omit_delegates = true; }, {"S2 (plan fields)", "delegates is missing"}));
  cases.push_back(method_case("no buffer sizes", [](MethodDesc& m) { m.omit_non_const_buffer_sizes = true; }, {"S2 (plan fields)", "non_const_buffer_sizes is missing"}));
  cases.push_back(method_case("negative buffer size", [](MethodDesc& m) { m.non_const_buffer_sizes = {0, -64}; }, {"S2 (plan fields)", "-64 is negative"}));
  // S2 indices
  cases.push_back(method_case("input index past values", [](MethodDesc& m) { m.inputs = {5}; }, {"S2 (value index)", "inputs[0] = 5", "2 values"}));
  cases.push_back(method_case("negative input index", [](MethodDesc& m) { m.inputs = {-1}; }, {"S2 (value index)", "inputs[0] = -1"}));
  cases.push_back(method_case("output index past values", [](MethodDesc& m) { m.outputs = {0, 2}; }, {"S2 (value index)", "outputs[1] = 2"}));
  cases.push_back(method_case("delegate arg past values", [](MethodDesc& m) { m.instructions[0].args = {0, 99}; }, {"S2 (value index)", "DelegateCall.args = 99"}));
  cases.push_back(method_case("delegate call without args", [](MethodDesc& m) { m.instructions[0].omit_args = true; }, {"S2 (instruction)", "DelegateCall.args is missing"}));
  cases.push_back(method_case("delegate index past delegates", [](MethodDesc& m) { m.instructions[0].index = 3; }, {"S2 (instruction)", "delegate_index 3", "1 delegates"}));
  cases.push_back(method_case("negative delegate index", [](MethodDesc& m) { m.instructions[0].index = -1; }, {"S2 (instruction)", "delegate_index -1"}));
  cases.push_back(method_case("op index past operators", [](MethodDesc& m) {
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kKernel, 2, 0, {0, 1}});
  }, {"S2 (instruction)", "op_index 2", "0 operators"}));
  cases.push_back(method_case("kernel arg past values", [](MethodDesc& m) {
    m.operators = {{"aten::add", "out"}};
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kKernel, 0, 0, {0, 7}});
  }, {"S2 (value index)", "KernelCall.args = 7"}));
  cases.push_back(method_case("move from past values", [](MethodDesc& m) {
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kMove, 9, 0, {}});
  }, {"S2 (value index)", "MoveCall.move_from = 9"}));
  cases.push_back(method_case("move to negative", [](MethodDesc& m) {
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kMove, 0, -4, {}});
  }, {"S2 (value index)", "MoveCall.move_to = -4"}));
  cases.push_back(method_case("jump destination past chain", [](MethodDesc& m) {
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kJumpFalse, 0, 10, {}});
  }, {"S2 (instruction)", "destination_instruction 10"}));
  cases.push_back(method_case("free past values", [](MethodDesc& m) {
    m.instructions.push_back(InstrDesc{InstrDesc::Kind::kFree, 12, 0, {}});
  }, {"S2 (value index)", "FreeCall.value_index = 12"}));
  cases.push_back(method_case("instruction tag NONE", [](MethodDesc& m) { m.instructions[0].raw_tag = 0; }, {"S2 (instruction)", "(NONE)"}));
  cases.push_back(method_case("instruction tag unknown", [](MethodDesc& m) { m.instructions[0].raw_tag = 77; }, {"S2 (instruction)", "union tag 77 (unknown)"}));
  cases.push_back(method_case("instruction tag says MoveCall, payload is DelegateCall", [](MethodDesc& m) {
    m.instructions[0].raw_tag = 3;
  }, {"S2 (value index)", "MoveCall.move_to"}));
  cases.push_back(method_case("chain input past values", [](MethodDesc& m) {
    m.instructions[0].args = {0, 1};
    m.values.push_back(ValueDesc::of(f32({1})));
    m.inputs = {0};
    m.outputs = {1, 2};
    m.values[2].kind = ValueDesc::Kind::kTensorList;
    m.values[2].items = {0, 5};
  }, {"S2 (value index)", "TensorList item"}));
  cases.push_back(method_case("optional tensor list item -2", [](MethodDesc& m) {
    ValueDesc v;
    v.kind = ValueDesc::Kind::kOptionalTensorList;
    v.items = {-1, -2};
    m.values.push_back(v);
  }, {"S2 (value index)", "OptionalTensorList item", "= -2"}));
  // S3 value tags
  cases.push_back(method_case("value tag NONE", [](MethodDesc& m) { m.values[1].raw_tag = 0; }, {"S3 (value type)", "values[1]", "(NONE)"}));
  cases.push_back(method_case("value tag 200", [](MethodDesc& m) { m.values[0].raw_tag = 200; }, {"S3 (value type)", "union tag 200 (unknown)"}));
  cases.push_back(method_case("value tag 12", [](MethodDesc& m) { m.values[0].raw_tag = 12; }, {"S3 (value type)", "union tag 12"}));
  cases.push_back(method_case("value tag without payload", [](MethodDesc& m) { m.values[0].omit_payload = true; }, {"S3 (value type)", "has no value"}));
  cases.push_back(method_case("value tag Tensor, payload Int", [](MethodDesc& m) {
    m.values[0] = ValueDesc::integer(3);
    m.values[0].raw_tag = 5;
  }, {"S4 (tensor)", "sizes is missing"}));
  // S4 tensors
  cases.push_back(tensor_case("dtype 99", [](TensorDesc& t) { t.dtype = 99; }, {"S4 (tensor)", "scalar_type 99"}));
  cases.push_back(tensor_case("dtype -1", [](TensorDesc& t) { t.dtype = -1; }, {"S4 (tensor)", "scalar_type -1"}));
  cases.push_back(tensor_case("dtype 30", [](TensorDesc& t) { t.dtype = 30; }, {"S4 (tensor)", "scalar_type 30"}));
  cases.push_back(tensor_case("rank 17", [](TensorDesc& t) { t.sizes.assign(17, 1); }, {"S4 (tensor)", "rank 17 exceeds"}));
  cases.push_back(tensor_case("negative size", [](TensorDesc& t) { t.sizes = {2, -3}; }, {"S4 (tensor)", "size[1] = -3 is negative"}));
  cases.push_back(tensor_case("missing sizes", [](TensorDesc& t) { t.omit_sizes = true; }, {"S4 (tensor)", "sizes is missing"}));
  cases.push_back(tensor_case("missing dim_order", [](TensorDesc& t) { t.omit_dim_order = true; }, {"S4 (tensor)", "dim_order is missing"}));
  cases.push_back(tensor_case("dim_order repeats", [](TensorDesc& t) { t.dim_order = {0, 0}; }, {"S4 (tensor)", "not a permutation"}));
  cases.push_back(tensor_case("dim_order out of range", [](TensorDesc& t) { t.dim_order = {0, 5}; }, {"S4 (tensor)", "entry 1 = 5"}));
  cases.push_back(tensor_case("dim_order too short", [](TensorDesc& t) { t.dim_order = {0}; }, {"S4 (tensor)", "dim_order has 1 entries but rank is 2"}));
  cases.push_back(tensor_case("nbytes overflow", [](TensorDesc& t) {
    t.dtype = 7;
    t.sizes = {0x7fffffff, 0x7fffffff, 0x7fffffff};
  }, {"S4 (tensor)", "nbytes overflows"}));
  cases.push_back(tensor_case("storage offset", [](TensorDesc& t) { t.storage_offset = 4; }, {"S4 (tensor)", "storage_offset 4"}));
  cases.push_back(tensor_case("dynamic unbound", [](TensorDesc& t) { t.shape_dynamism = 2; }, {"S4 (tensor)", "DYNAMIC_UNBOUND"}));
  cases.push_back(tensor_case("dynamism 9", [](TensorDesc& t) { t.shape_dynamism = 9; }, {"S4 (tensor)", "shape_dynamism 9"}));
  cases.push_back(tensor_case("memory id 0", [](TensorDesc& t) { t.allocation = std::make_pair(0u, 0ull); }, {"S4 (tensor)", "memory_id 0"}));
  cases.push_back(tensor_case("memory id past buffers", [](TensorDesc& t) { t.allocation = std::make_pair(3u, 0ull); }, {"S4 (tensor)", "memory_id 3"}));
  cases.push_back(method_case("planned tensor past its buffer", [](MethodDesc& m) {
    m.non_const_buffer_sizes = {0, 16};
    m.values[0].tensor.allocation = std::make_pair(1u, 8ull);
  }, {"S4 (tensor)", "exceeds buffer 1 of 16 bytes"}));
  cases.push_back(method_case("planned offset overflow", [](MethodDesc& m) {
    m.non_const_buffer_sizes = {0, 16};
    m.values[0].tensor.allocation = std::make_pair(1u, ~0ull);
  }, {"S4 (tensor)", "exceeds buffer"}));
  // S5/S6 initial data
  cases.push_back(tensor_case("constant without constant data", [](TensorDesc& t) { t.data_buffer_idx = 3; },
                              {"S5 (constants)", "data_buffer_idx 3"}));
  cases.push_back(method_case("mutable data without segments", [](MethodDesc& m) {
    m.non_const_buffer_sizes = {0, 64};
    m.values[0].tensor.data_buffer_idx = 2;
    m.values[0].tensor.allocation = std::make_pair(1u, 0ull);
  }, {"S6 (mutable data)", "mutable_data_segments[0]"}));
  for (int variant = 0; variant < 2; ++variant) {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    b.set_constant_segment(Bytes(64, 1), {0, 0, variant == 0 ? 56u : 0u});
    MethodDesc m = cuda_method("forward", {f32({2, 3})}, {f32({2, 3})}, blobs);
    m.values.push_back(ValueDesc::of(f32({4})));  // 16 bytes of constant data
    m.values.back().tensor.data_buffer_idx = variant == 0 ? 2 : 5;
    b.add_method(m);
    auto p = b.build();
    cases.push_back({"constant data past its segment / index", p.pte, {p.ptd}, ErrorCode::kInvalidProgram,
                     {"S5 (constants)", variant == 0 ? "exceeds its constant segment of 64 bytes" : "data_buffer_idx 5 is out of range"}});
  }
  // S8 delegates
  cases.push_back(method_case("empty backend id", [](MethodDesc& m) { m.delegates[0].id = ""; }, {"S8 (delegate)", "id is missing or empty"}));
  cases.push_back(method_case("no processed", [](MethodDesc& m) { m.delegates[0].omit_processed = true; }, {"S8 (delegate)", "processed is missing"}));
  cases.push_back(method_case("processed location 5", [](MethodDesc& m) { m.delegates[0].raw_location = 5; }, {"S8 (delegate)", "processed.location 5"}));
  cases.push_back(method_case("inline index past data", [](MethodDesc& m) { m.delegates[0].raw_index = 4; }, {"S8 (delegate)", "INLINE processed index 4"}));
  cases.push_back(method_case("segment index past segments", [](MethodDesc& m) {
    m.delegates[0].raw_location = 1;
    m.delegates[0].raw_index = 40;
  }, {"S8 (delegate)", "SEGMENT processed index 40"}));
  cases.push_back(method_case("payload without newline", [](MethodDesc& m) {
    m.delegates[0].processed = to_bytes("forward_so_blob");
    m.delegates[0].processed_in_segment = true;
  }, {"CUDA delegate payload", "no newline", "malformed"}));
  cases.push_back(method_case("payload with empty so key", [](MethodDesc& m) {
    m.delegates[0].processed = to_bytes("\nforward_weights_blob");
  }, {"CUDA delegate payload", "empty"}));
  // S9 / M1 named data
  {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    b.add_named_data("forward_so_blob", kSo, PteBuilder::Where::kPte);
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, blobs));
    auto p = b.build();
    cases.push_back({"duplicate key in the .pte", p.pte, {p.ptd}, ErrorCode::kInvalidProgram,
                     {"M1 (unique named data keys)", "\"forward_so_blob\"", "twice in this file"}});
  }
  {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    b.add_named_data("forward_so_blob", kSo, PteBuilder::Where::kPtd);
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, blobs));
    auto p = b.build();
    cases.push_back({"key in both .pte and .ptd", p.pte, {p.ptd}, ErrorCode::kInvalidProgram,
                     {"M1 (unique named data keys)", "\"forward_so_blob\"", "also in broken.pte"}});
  }
  {
    PteBuilder b;
    b.add_named_data("", kSo, PteBuilder::Where::kPte);
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, {}));
    auto p = b.build();
    cases.push_back({"empty key", p.pte, {}, ErrorCode::kInvalidProgram, {"S9 (named data)", "key is empty"}});
  }
  {
    PteBuilder b;
    b.add_named_data(std::string("a\0b", 3), kSo, PteBuilder::Where::kPtd);
    b.add_method(cuda_method("forward", {f32({2})}, {f32({2})}, {}));
    auto p = b.build();
    cases.push_back({"key with NUL", p.pte, {p.ptd}, ErrorCode::kInvalidProgram, {"D5 (named data)", "NUL"}});
  }
  // S7: segment entries past the segment area (patched in place).
  {
    BuiltProgram p = base_program();
    Bytes pte = p.pte;
    const auto* prog = et::GetProgram(pte.data());
    const auto* seg = prog->segments()->Get(0);
    put_u64(pte, field_offset(pte, seg, et::DataSegment::VT_SIZE), 1ULL << 40);
    cases.push_back({"pte segment size past EOF", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"S7 (segment bounds)", "segments[0]"}});
    pte = p.pte;
    put_u64(pte, field_offset(pte, seg, et::DataSegment::VT_OFFSET), ~0ULL - 4);
    cases.push_back({"pte segment offset overflow", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"S7 (segment bounds)", "overflows"}});
    pte = p.pte;
    const auto* nd = prog->named_data()->Get(0);
    put_u32(pte, field_offset(pte, nd, et::NamedData::VT_SEGMENT_INDEX), 9);
    cases.push_back({"pte named data segment index", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"S9 (named data)", "segment_index 9"}});
    pte = p.pte;
    const auto* plans = prog->execution_plan();
    put_u32(pte, object_offset(pte, plans) , 0x00ffffff);  // vector length
    cases.push_back({"execution_plan length huge", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"P8 (flatbuffer verification)"}});
    pte = p.pte;
    const auto* key = nd->key();
    put_u32(pte, object_offset(pte, key), 0x7ffffff0);  // string length
    cases.push_back({"named data key length huge", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"P8 (flatbuffer verification)"}});
    pte = p.pte;
    pte[object_offset(pte, key) + 4 + key->size()] = 'x';  // string terminator
    cases.push_back({"string without terminator", pte, {p.ptd}, ErrorCode::kInvalidProgram, {"P8 (flatbuffer verification)"}});

    Bytes ptd = p.ptd;
    const auto* flat = ft::GetFlatTensor(ptd.data());
    const auto* fseg = flat->segments()->Get(0);
    put_u64(ptd, field_offset(ptd, fseg, ft::DataSegment::VT_SIZE), 1ULL << 33);
    cases.push_back({"ptd segment size past EOF", p.pte, {ptd}, ErrorCode::kInvalidProgram, {"S7 (segment bounds)", "named_data[0]"}});
    ptd = p.ptd;
    put_u32(ptd, field_offset(ptd, flat->named_data()->Get(0), ft::NamedData::VT_SEGMENT_INDEX), 3);
    cases.push_back({"ptd segment index", p.pte, {ptd}, ErrorCode::kInvalidProgram, {"D5 (named data)", "segment_index 3"}});
    ptd = p.ptd;
    put_u32(ptd, field_offset(ptd, flat, ft::FlatTensor::VT_VERSION), 7);
    cases.push_back({"ptd version 7", p.pte, {ptd}, ErrorCode::kInvalidProgram, {"D4 (version)", "7"}});
  }
  // D4/D5 on hand-built FlatTensors.
  auto ptd_case = [&](const std::string& name, const std::function<Bytes()>& make, std::vector<std::string> expect) {
    BuiltProgram p = base_program();
    cases.push_back({name, p.pte, {p.ptd, make()}, ErrorCode::kInvalidProgram, std::move(expect)});
  };
  auto layout_ptd = [](int dtype, std::vector<int32_t> sizes, std::vector<uint8_t> dim_order, std::size_t data_size,
                       bool omit_dims = false) {
    flatbuffers::FlatBufferBuilder fb;
    auto layout = ft::CreateTensorLayoutDirect(fb, static_cast<et::ScalarType>(dtype), &sizes, omit_dims ? nullptr : &dim_order);
    std::vector<flatbuffers::Offset<ft::DataSegment>> segs{ft::CreateDataSegment(fb, 0, data_size)};
    std::vector<flatbuffers::Offset<ft::NamedData>> nd{ft::CreateNamedDataDirect(fb, "linear.weight", 0, layout)};
    fb.Finish(ft::CreateFlatTensorDirect(fb, 0, &segs, &nd), ft::FlatTensorIdentifier());
    return pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {Bytes(data_size, 1)});
  };
  ptd_case("layout dtype 77", [&] { return layout_ptd(77, {2}, {0}, 8); }, {"D5 (tensor layout)", "scalar_type 77"});
  ptd_case("layout rank mismatch", [&] { return layout_ptd(6, {2, 2}, {0}, 16); }, {"D5 (tensor layout)", "dim_order has 1 entries but rank is 2"});
  ptd_case("layout missing dim_order", [&] { return layout_ptd(6, {2}, {}, 8, true); }, {"D5 (tensor layout)", "dim_order is missing"});
  ptd_case("layout negative size", [&] { return layout_ptd(6, {-2}, {0}, 8); }, {"D5 (tensor layout)", "negative"});
  ptd_case("layout bigger than segment", [&] { return layout_ptd(6, {4, 4}, {0, 1}, 8); }, {"D5 (tensor layout)", "needs 64 bytes but the segment holds 8"});
  ptd_case("layout rank 20", [&] { return layout_ptd(6, std::vector<int32_t>(20, 1), std::vector<uint8_t>(20, 0), 8); }, {"D5 (tensor layout)", "rank 20"});
  ptd_case("no segments", [] {
    flatbuffers::FlatBufferBuilder fb;
    std::vector<flatbuffers::Offset<ft::NamedData>> nd;
    fb.Finish(ft::CreateFlatTensorDirect(fb, 0, nullptr, &nd), ft::FlatTensorIdentifier());
    return pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {});
  }, {"D4 (required fields)", "segments is missing"});
  ptd_case("no named_data", [] {
    flatbuffers::FlatBufferBuilder fb;
    std::vector<flatbuffers::Offset<ft::DataSegment>> segs;
    fb.Finish(ft::CreateFlatTensorDirect(fb, 0, &segs, nullptr), ft::FlatTensorIdentifier());
    return pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {});
  }, {"D4 (required fields)", "named_data is missing"});
  ptd_case("named data without key", [] {
    flatbuffers::FlatBufferBuilder fb;
    std::vector<flatbuffers::Offset<ft::DataSegment>> segs{ft::CreateDataSegment(fb, 0, 4)};
    std::vector<flatbuffers::Offset<ft::NamedData>> nd{ft::CreateNamedData(fb, 0, 0)};
    fb.Finish(ft::CreateFlatTensorDirect(fb, 0, &segs, &nd), ft::FlatTensorIdentifier());
    return pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {Bytes(4, 0)});
  }, {"D5 (named data)", "key is missing"});
  ptd_case("FlatTensor v0.6 layout (scalar where an offset is expected)", [] {
    // Old FT01 schema: slot 6 held tensor_alignment (a scalar), not the segments vector.
    flatbuffers::FlatBufferBuilder fb;
    fb.ForceDefaults(true);
    const auto start = fb.StartTable();
    fb.AddElement<uint32_t>(4, 0, 0);
    fb.AddElement<uint32_t>(6, 0x7fff0000u, 0);
    fb.Finish(flatbuffers::Offset<ft::FlatTensor>(fb.EndTable(start)), ft::FlatTensorIdentifier());
    return pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {});
  }, {"D3 (flatbuffer verification)"});

  for (const auto& c : cases) run_case(c);
  CHECK(cases.size() >= 60);
  MESSAGE("synthesized broken files: " << cases.size());
}
