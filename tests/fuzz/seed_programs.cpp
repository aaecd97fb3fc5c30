#include "seed_programs.hpp"

#include "tiny_elf.hpp"

namespace aoti_cuda_fuzz {

using aoti_cuda::ExporterGeneration;
using namespace aoti_cuda_test;

namespace {

Bytes weights(std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 7);
  return b;
}

// forward(x f32[2,3]) -> f32[2,3], one CudaBackend delegate.
BuiltProgram cuda_program(ExporterGeneration g, bool payload_in_segment, bool with_external = false) {
  PteBuilder b;
  auto blobs = b.add_cuda_blobs(g, "forward", tiny_elf(), g == ExporterGeneration::kSeed ? Bytes{} : weights(24),
                                payload_in_segment);
  MethodDesc m = cuda_method("forward", {f32({2, 3})}, {f32({2, 3})}, blobs);
  if (with_external) {
    TensorDesc w = f32({2, 3});
    w.external_fqn = "model.weight";
    m.values.push_back(ValueDesc::of(w));
    b.add_named_tensor("model.weight", weights(24), w);
  }
  b.add_method(std::move(m));
  return b.build();
}

}  // namespace

BuiltProgram ptd_target_program() { return cuda_program(ExporterGeneration::kMethodKeys, false, true); }

std::vector<std::pair<std::string, Bytes>> pte_seeds() {
  std::vector<std::pair<std::string, Bytes>> out;
  out.emplace_back("seed_generation", cuda_program(ExporterGeneration::kSeed, false).pte);
  out.emplace_back("method_keys", cuda_program(ExporterGeneration::kMethodKeys, false).pte);
  out.emplace_back("hash_keys_segment", cuda_program(ExporterGeneration::kHashKeys, true).pte);
  out.emplace_back("hash_keys_inline", cuda_program(ExporterGeneration::kHashKeys, false).pte);
  out.emplace_back("external_constant", ptd_target_program().pte);
  {
    // Constant segment, a kernel call, a second (non-CUDA) delegate, value kinds.
    PteBuilder b;
    auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, "forward", tiny_elf(), weights(8));
    MethodDesc m = cuda_method("forward", {f32({2})}, {f32({2})}, blobs);
    TensorDesc c = f32({2});
    c.data_buffer_idx = 1;
    m.values.push_back(ValueDesc::of(c));
    m.values.push_back(ValueDesc::integer(3));
    ValueDesc list;
    list.kind = ValueDesc::Kind::kIntList;
    list.items = {0, 1};
    m.values.push_back(list);
    InstrDesc k;
    k.kind = InstrDesc::Kind::kKernel;
    k.args = {0, 2};
    m.instructions.push_back(k);
    m.operators.push_back({"aten::add", "out"});
    DelegateDesc other;
    other.id = "XnnpackBackend";
    other.processed = {1, 2, 3};
    m.delegates.push_back(other);
    b.add_method(std::move(m));
    b.set_constant_segment(weights(136), {0, 128});
    out.emplace_back("mixed", b.build().pte);
  }
  return out;
}

}  // namespace aoti_cuda_fuzz
