// The reader on synthesized programs of every CUDA exporter generation, other
// backends, kernel ops and plan shapes (tests/support/pte_builder).
#include <doctest/doctest.h>

#include <string>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "support/pte_builder.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::Program;
using namespace aoti_cuda_test;

namespace {

ByteView view(const Bytes& b) { return ByteView{b.data(), b.size()}; }

Program open_built(const BuiltProgram& p, bool require_data = true) {
  std::vector<ByteView> data;
  if (p.has_ptd) data.push_back(view(p.ptd));
  return Program::from_memory(view(p.pte), data, "synth.pte", require_data);
}

std::string bytes_str(ByteView v) { return std::string(reinterpret_cast<const char*>(v.data), v.size); }

const Bytes kSo = to_bytes("\x7f" "ELF-not-really-a-library");
const Bytes kWeights = to_bytes("weights-weights-weights");

}  // namespace

TEST_CASE("builder: 1.1-1.3 method keys") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  b.add_method(cuda_method("forward", {f32({2, 3}), i64({4})}, {f32({2, 3})}, blobs));
  BuiltProgram built = b.build();
  REQUIRE(built.has_ptd);
  Program p = open_built(built);
  const auto& m = p.method("forward");
  CHECK(m.runnable);
  REQUIRE(m.delegates.size() == 1);
  const auto& d = m.delegates[0];
  CHECK(d.generation == ExporterGeneration::kMethodKeys);
  CHECK(d.so_key == "forward_so_blob");
  CHECK(d.weights_key == "forward_weights_blob");
  CHECK(bytes_str(d.so) == bytes_str(view(kSo)));
  CHECK(bytes_str(d.weights) == bytes_str(view(kWeights)));
  CHECK(d.so_file == "synth.pte");
  CHECK(d.weights_file == "synth.pte.ptd[0]");
  CHECK(d.args == std::vector<int32_t>{0, 1, 2});
  CHECK(m.inputs.at(1).tensor.dtype == aoti_cuda::DType::kInt64);
  CHECK(m.inputs.at(0).tensor.sizes == std::vector<int64_t>{2, 3});
  CHECK(m.inputs.at(0).tensor.dim_order == std::vector<uint8_t>{0, 1});
  // Segments are 128-aligned relative to the 128-aligned segment base.
  CHECK(pte_segment_base(built.pte) % 128 == 0);
  CHECK((d.so.data - built.pte.data()) % 128 == 0);
}

TEST_CASE("builder: seed generation (so_blob in the .ptd, no weights)") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kSeed, "forward", kSo, {});
  b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
  BuiltProgram keep = b.build();  // from_memory borrows the bytes
  Program p = open_built(keep);
  const auto& d = p.method("forward").delegates.at(0);
  CHECK(d.generation == ExporterGeneration::kSeed);
  CHECK(d.so_key == "so_blob");
  CHECK(d.weights_key.empty());
  CHECK(d.weights.empty());
  CHECK(d.so_file == "synth.pte.ptd[0]");
  CHECK(d.method_name_spec.empty());
  CHECK(p.method("forward").runnable);
}

TEST_CASE("builder: 1.4+ hash keys, payload in a SEGMENT and INLINE") {
  for (bool in_segment : {true, false}) {
    CAPTURE(in_segment);
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kHashKeys, "forward", kSo, kWeights, in_segment);
    b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
    BuiltProgram keep = b.build();  // from_memory borrows the bytes
    Program p = open_built(keep);
    const auto& d = p.method("forward").delegates.at(0);
    CHECK(d.generation == ExporterGeneration::kHashKeys);
    CHECK(d.so_key == blobs.so_key);
    CHECK(d.so_key.size() == 64 + 8);
    CHECK(d.weights_key == blobs.weights_key);
    CHECK(bytes_str(d.so) == bytes_str(view(kSo)));
    CHECK(bytes_str(d.weights) == bytes_str(view(kWeights)));
    CHECK(d.method_name_spec == "forward");
  }
}

TEST_CASE("builder: two CUDA partitions in one method with et_copy kernels") {
  PteBuilder b;
  auto b1 = b.add_cuda_blobs(ExporterGeneration::kHashKeys, "forward", to_bytes("so-one"), to_bytes("w1"));
  auto b2 = b.add_cuda_blobs(ExporterGeneration::kHashKeys, "forward", to_bytes("so-two"), to_bytes("w2"));
  MethodDesc m;
  m.name = "forward";
  // v0 host in, v1 device in, v2 device mid, v3 device out, v4 host out
  for (int i = 0; i < 5; ++i) m.values.push_back(ValueDesc::of(f32({8})));
  m.inputs = {0};
  m.outputs = {4};
  m.operators = {{"et_copy::_h2d_copy", "out"}, {"et_copy::_d2h_copy.out", ""}};
  m.delegates = {cuda_delegate(b1), cuda_delegate(b2)};
  InstrDesc h2d{InstrDesc::Kind::kKernel, 0, 0, {0, 1, 1}};
  InstrDesc call1{InstrDesc::Kind::kDelegate, 0, 0, {1, 2}};
  InstrDesc call2{InstrDesc::Kind::kDelegate, 1, 0, {2, 3}};
  InstrDesc d2h{InstrDesc::Kind::kKernel, 1, 0, {3, 4}};
  m.instructions = {h2d, call1, call2, d2h};
  b.add_method(m);
  BuiltProgram keep = b.build();  // from_memory borrows the bytes
  Program p = open_built(keep);
  const auto& ms = p.method("forward");
  CHECK(ms.runnable);
  CHECK(ms.not_runnable_reason == "");
  REQUIRE(ms.plan.size() == 4);
  CHECK(ms.plan[0].kind == aoti_cuda::PlanStep::Kind::kHostToDevice);
  CHECK(ms.plan[0].args == std::vector<int32_t>{0, 1});
  CHECK(ms.plan[1].kind == aoti_cuda::PlanStep::Kind::kDelegate);
  CHECK(ms.plan[1].delegate == 0);
  CHECK(ms.plan[2].delegate == 1);
  CHECK(ms.plan[3].kind == aoti_cuda::PlanStep::Kind::kDeviceToHost);
  CHECK(ms.plan[3].args == std::vector<int32_t>{3, 4});
  REQUIRE(ms.delegates.size() == 2);
  CHECK(bytes_str(ms.delegates[0].so) == "so-one");
  CHECK(bytes_str(ms.delegates[1].so) == "so-two");
  CHECK(bytes_str(ms.delegates[1].weights) == "w2");
  CHECK(ms.delegates[1].args == std::vector<int32_t>{2, 3});
}

TEST_CASE("builder: a MoveCall is part of the plan") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  MethodDesc m = cuda_method("forward", {f32({4})}, {f32({4})}, blobs);
  m.values.push_back(ValueDesc::of(f32({4})));
  m.instructions.push_back(InstrDesc{InstrDesc::Kind::kMove, 1, 2, {}});
  m.outputs = {2};
  b.add_method(m);
  BuiltProgram keep = b.build();  // from_memory borrows the bytes
  Program p = open_built(keep);
  const auto& ms = p.method("forward");
  CHECK(ms.runnable);
  REQUIRE(ms.plan.size() == 2);
  CHECK(ms.plan[1].kind == aoti_cuda::PlanStep::Kind::kMove);
  CHECK(ms.plan[1].args == std::vector<int32_t>{1, 2});
}

TEST_CASE("builder: other backends, kernel ops, control flow and constant methods are not runnable") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  MethodDesc xnn = cuda_method("xnn", {f32({4})}, {f32({4})}, blobs);
  xnn.delegates[0].id = "XnnpackBackend";
  b.add_method(xnn);
  MethodDesc kernel = cuda_method("forward", {f32({4})}, {f32({4})}, blobs);
  kernel.operators = {{"aten::add", "out"}, {"aten::mul.out", ""}};
  kernel.instructions.push_back(InstrDesc{InstrDesc::Kind::kKernel, 0, 0, {0, 1, 1}});
  kernel.instructions.push_back(InstrDesc{InstrDesc::Kind::kKernel, 1, 0, {0, 1, 1}});
  b.add_method(kernel);
  MethodDesc jump = cuda_method("jump", {f32({4})}, {f32({4})}, blobs);
  jump.instructions.push_back(InstrDesc{InstrDesc::Kind::kJumpFalse, 0, 0, {}});
  b.add_method(jump);
  MethodDesc freec = cuda_method("freeing", {f32({4})}, {f32({4})}, blobs);
  freec.instructions.push_back(InstrDesc{InstrDesc::Kind::kFree, 0, 0, {}});
  b.add_method(freec);
  MethodDesc constant;
  constant.name = "get_max_seq_len";
  constant.values = {ValueDesc::integer(128)};
  constant.outputs = {0};
  b.add_method(constant);
  BuiltProgram keep = b.build();  // from_memory borrows the bytes
  Program p = open_built(keep);

  const auto& x = p.method("xnn");
  CHECK_FALSE(x.runnable);
  CHECK(x.not_runnable_reason.find("XnnpackBackend") != std::string::npos);
  CHECK(x.delegates.empty());
  const auto& k = p.method("forward");
  CHECK_FALSE(k.runnable);
  CHECK(k.not_runnable_reason.find("aten::add.out") != std::string::npos);
  CHECK(k.not_runnable_reason.find("aten::mul.out") != std::string::npos);
  CHECK(k.delegates.size() == 1);
  CHECK(p.method("jump").not_runnable_reason.find("JumpFalseCall") != std::string::npos);
  CHECK(p.method("freeing").not_runnable_reason.find("FreeCall") != std::string::npos);
  const auto& c = p.method("get_max_seq_len");
  CHECK_FALSE(c.runnable);
  CHECK(c.not_runnable_reason.find("constant method") != std::string::npos);
  CHECK(c.outputs.at(0).kind == aoti_cuda::ValueKind::kInt);
}

TEST_CASE("builder: missing blobs") {
  SUBCASE("method keys without any .ptd: kNotFound naming aoti_cuda_blob.ptd and the keys") {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
    BuiltProgram built = b.build();
    try {
      Program::from_memory(view(built.pte), {}, "nodata.pte");
      FAIL("expected kNotFound");
    } catch (const aoti_cuda::Error& e) {
      CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
      const std::string msg = e.what();
      CHECK(msg.find("aoti_cuda_blob.ptd") != std::string::npos);
      CHECK(msg.find("forward_weights_blob") != std::string::npos);
      // The .so is in the .pte: only the key the missing .ptd should hold is named.
      CHECK(msg.find("it should hold the key \"forward_weights_blob\"") != std::string::npos);
      CHECK(msg.find("forward_so_blob") == std::string::npos);
    }
    Program p = Program::from_memory(view(built.pte), {}, "nodata.pte", /*require_data=*/false);
    CHECK_FALSE(p.method("forward").runnable);
    CHECK(p.method("forward").not_runnable_reason.find("forward_weights_blob") != std::string::npos);
  }
  SUBCASE(".ptd present without the weights key: weights stay empty, still runnable") {
    PteBuilder b;
    b.add_named_data("forward_so_blob", kSo, PteBuilder::Where::kPte);
    b.add_named_data("unrelated", to_bytes("x"), PteBuilder::Where::kPtd);
    CudaBlobs blobs;
    blobs.method_name = "forward";
    b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
    BuiltProgram keep = b.build();  // from_memory borrows the bytes
    Program p = open_built(keep);
    const auto& d = p.method("forward").delegates.at(0);
    CHECK(p.method("forward").runnable);
    CHECK(d.weights.empty());
    CHECK(d.weights_file.empty());
    CHECK(d.weights_key == "forward_weights_blob");
  }
  SUBCASE("missing .so key") {
    PteBuilder b;
    b.add_named_data("forward_weights_blob", kWeights, PteBuilder::Where::kPtd);
    CudaBlobs blobs;
    blobs.method_name = "forward";
    b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
    BuiltProgram built = b.build();
    try {
      open_built(built);
      FAIL("expected kNotFound");
    } catch (const aoti_cuda::Error& e) {
      CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
      CHECK(std::string(e.what()).find("\"forward_so_blob\"") != std::string::npos);
    }
    Program p = open_built(built, false);
    CHECK_FALSE(p.method("forward").runnable);
    CHECK(p.method("forward").not_runnable_reason.find("forward_so_blob") != std::string::npos);
  }
  SUBCASE("method_name spec differs from the method name") {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "my_model", kSo, kWeights);
    b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
    BuiltProgram keep = b.build();  // from_memory borrows the bytes
    Program p = open_built(keep);
    CHECK(p.method("forward").delegates.at(0).so_key == "my_model_so_blob");
    CHECK(p.method("forward").delegates.at(0).method_name_spec == "my_model");
  }
}

TEST_CASE("builder: named data lookup across files") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
  b.add_named_data("extra", to_bytes("abc"), PteBuilder::Where::kPtd);
  BuiltProgram keep = b.build();  // from_memory borrows the bytes
  Program p = open_built(keep);
  auto e = p.named_data("extra");
  REQUIRE(e.has_value());
  CHECK(bytes_str(*e) == "abc");
  CHECK_FALSE(p.named_data("missing").has_value());
  CHECK(p.named_data_entries().size() == 3);
}

TEST_CASE("builder: a misaligned from_memory buffer is copied, not rejected") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  b.add_method(cuda_method("forward", {f32({4})}, {f32({4})}, blobs));
  BuiltProgram built = b.build();
  Bytes shifted(built.pte.size() + 1);
  std::copy(built.pte.begin(), built.pte.end(), shifted.begin() + 1);
  Program p = Program::from_memory(ByteView{shifted.data() + 1, built.pte.size()}, {view(built.ptd)}, "shifted.pte");
  CHECK(p.method("forward").runnable);
  CHECK(bytes_str(p.method("forward").delegates.at(0).so) == bytes_str(view(kSo)));
}

TEST_CASE("builder: constants in the constant segment are accepted when in bounds") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  b.set_constant_segment(Bytes(64, 1), {0, 0, 48});
  MethodDesc m = cuda_method("forward", {f32({2})}, {f32({2})}, blobs);
  m.values.push_back(ValueDesc::of(f32({4})));
  m.values.back().tensor.data_buffer_idx = 2;  // [48, 64): exactly fits
  b.add_method(m);
  BuiltProgram keep = b.build();
  Program p = open_built(keep);
  CHECK(p.method("forward").values.size() == 3);
  CHECK(p.method("forward").runnable);
}

TEST_CASE("builder: a Null value without a payload table is accepted") {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
  MethodDesc m = cuda_method("forward", {f32({2})}, {f32({2})}, blobs);
  ValueDesc none;
  none.kind = ValueDesc::Kind::kNull;
  none.omit_payload = true;
  m.values.push_back(none);
  b.add_method(m);
  BuiltProgram keep = b.build();
  Program p = open_built(keep);
  CHECK(p.method("forward").values.at(2).kind == aoti_cuda::ValueKind::kNone);
}

TEST_CASE("builder: external constants (M2)") {
  auto make = [](const TensorDesc& layout, bool with_entry) {
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", kSo, kWeights);
    MethodDesc m = cuda_method("forward", {f32({2})}, {f32({2})}, blobs);
    TensorDesc w = f32({2, 3});
    w.external_fqn = "linear.weight";
    m.values.push_back(ValueDesc::of(w));
    b.add_method(m);
    if (with_entry) b.add_named_tensor("linear.weight", Bytes(24, 0), layout);
    return b.build();
  };
  SUBCASE("matching layout: valid, but not runnable here") {
    BuiltProgram keep = make(f32({2, 3}), true);
    Program p = open_built(keep);
    CHECK_FALSE(p.method("forward").runnable);
    CHECK(p.method("forward").not_runnable_reason.find("external constant") != std::string::npos);
    CHECK(p.method("forward").not_runnable_reason.find("linear.weight") != std::string::npos);
  }
  SUBCASE("layout differs") {
    BuiltProgram keep = make(f32({3, 2}), true);
    try {
      open_built(keep);
      FAIL("accepted");
    } catch (const aoti_cuda::Error& e) {
      CHECK(e.code() == aoti_cuda::ErrorCode::kInvalidProgram);
      CHECK(std::string(e.what()).find("M2 (external constant)") != std::string::npos);
    }
  }
  SUBCASE("no entry") {
    BuiltProgram keep = make(f32({2, 3}), false);
    try {
      open_built(keep);
      FAIL("accepted");
    } catch (const aoti_cuda::Error& e) {
      CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
      CHECK(std::string(e.what()).find("\"linear.weight\" that no .ptd data file provides") != std::string::npos);
    }
    Program p = open_built(keep, false);
    CHECK_FALSE(p.method("forward").runnable);
  }
}
