// Module on the CPU with ExecuTorch 1.5's per-FQN weights: the fake model
// libraries (tests/fake_model) packed by the builder in the 1.5 layout
// (ETCUDAFQN3 metadata, one stored tensor per constant, one store for every
// method), their constants bound as user-managed buffers
// (runtime/fqn_weights.hpp), shared or kept apart as LoadOptions say.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "support/fake_module.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Program;
using aoti_cuda::RunOptions;
using aoti_cuda::Session;
using aoti_cuda::StateSharing;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

const std::vector<float> kW = {0.5f, 1.0f, 2.0f, -1.0f};

// The fake affine library's one constant ("w", FQN "affine.w", float32[4])
// stored the 1.5 way: `padding` floats before it in its storage.
FqnWeightDesc affine_w(const std::vector<float>& w = kW, int padding = 0) {
  FqnWeightDesc d;
  d.fqn = "affine.w";
  std::vector<float> storage(static_cast<std::size_t>(padding), 9.0f);
  storage.insert(storage.end(), w.begin(), w.end());
  d.storage = float_bytes(storage);
  d.storage_offset = padding;
  d.sizes = {4};
  return d;
}

// The fake kv library's buffer ("cache", FQN "kv.cache", float32[4,4]).
FqnWeightDesc kv_cache(const std::vector<float>& init) {
  FqnWeightDesc d;
  d.fqn = "kv.cache";
  d.storage = float_bytes(init);
  d.sizes = {4, 4};
  return d;
}

void add_affine(PteBuilder& b, const std::string& name, const FqnWeightDesc& w) {
  auto blobs = b.add_fqn_weights(name, read_file(AOTI_CUDA_FAKE_MODEL_AFFINE), {w});
  b.add_method(cuda_method(name, {f32({2, 4}), f32({2, 4})}, {f32({2, 4}), f32({2, 4})}, blobs));
}

// (x f32[1,4], pos i64[1]) -> column sums of the cache after cache[pos] = x.
void add_kv(PteBuilder& b, const std::string& name, const FqnWeightDesc& cache) {
  auto blobs = b.add_fqn_weights(name, read_file(AOTI_CUDA_FAKE_MODEL_KV), {cache});
  b.add_method(fake_kv_method(name, blobs));
}

Module load(const BuiltProgram& built, LoadOptions o = {}) { return load_on_cpu(built, std::move(o), "fqn_test.pte"); }

// y = a * w + b with a = 1, b = 0: the weights the method sees, twice.
std::vector<float> seen_w(Module& m, const std::string& method) {
  const std::vector<float> ones(8, 1.0f), zeros(8, 0.0f);
  return floats(m.execute(method, {host_floats({2, 4}, ones), host_floats({2, 4}, zeros)}).at(0));
}

std::vector<float> twice(const std::vector<float>& v) {
  std::vector<float> out = v;
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<float> write_row(Module& m, const std::string& method, int64_t row, float x, Session* s = nullptr) {
  RunOptions ro;
  ro.session = s;
  return floats(m.execute(method, {host_floats({1, 4}, {x, x, x, x}), host_position(row)}, ro).at(0));
}

// Column sums of the 4x4 cache `init` with rows replaced.
std::vector<float> sums(std::vector<float> cache, const std::vector<std::pair<int, float>>& rows) {
  for (const auto& r : rows)
    for (int k = 0; k < 4; ++k) cache[r.first * 4 + k] = r.second;
  std::vector<float> s(4, 0.0f);
  for (int i = 0; i < 16; ++i) s[i % 4] += cache[i];
  return s;
}

std::vector<float> iota16(float base) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("module(fqn): per-FQN weights run, viewed from their storage offset; nothing leaks") {
  const int64_t handles_before = aoti_cuda_shim_live_handles();
  {
    PteBuilder b;
    add_affine(b, "forward", affine_w(kW, /*padding=*/3));
    Module m = load(b.build());
    CHECK(seen_w(m, "forward") == twice(kW));
    const auto out =
        m.forward({host_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), host_floats({2, 4}, {1, 1, 1, 1, 0, 0, 0, 0})});
    CHECK(floats(out.at(0)) == std::vector<float>{1.5f, 3, 7, -3, 2.5f, 6, 14, -8});
    const aoti_cuda::LoadStats st = m.load_stats();
    CHECK(st.weight_bytes == 7 * sizeof(float));  // the whole storage, padding included
    CHECK(st.deduplicated_constants == 0);
  }
  CHECK(aoti_cuda_shim_live_handles() == handles_before);
}

TEST_CASE("module(fqn): a constant is matched by its name when its FQN is not in the metadata") {
  PteBuilder b;
  FqnWeightDesc w = affine_w();
  w.fqn = "w";  // the library's constant name; its FQN is "affine.w"
  add_affine(b, "forward", w);
  Module m = load(b.build());
  CHECK(seen_w(m, "forward") == twice(kW));
}

TEST_CASE("module(fqn): one store: methods share a read-only storage unless deduplication is off") {
  PteBuilder b;
  add_affine(b, "first", affine_w());
  add_affine(b, "second", affine_w());  // same key: the builder stores it once, as ExecuTorch does
  const BuiltProgram built = b.build();
  {
    Module m = load(built);
    const aoti_cuda::LoadStats st = m.load_stats();
    CHECK(st.weight_bytes == 16);
    CHECK(st.deduplicated_constants == 1);
    CHECK(st.deduplicated_bytes == 16);
    CHECK(st.read_only_constants == 2);
    CHECK(seen_w(m, "first") == twice(kW));
    CHECK(seen_w(m, "second") == twice(kW));
  }
  LoadOptions o;
  o.deduplicate_constants = false;
  Module m = load(built, o);
  CHECK(m.load_stats().weight_bytes == 32);
  CHECK(m.load_stats().deduplicated_constants == 0);
  CHECK(seen_w(m, "second") == twice(kW));
}

TEST_CASE("module(fqn): buffers stay per method by default, are shared on request, and reset to the stored bytes") {
  const std::vector<float> init = iota16(1.0f);
  PteBuilder b;
  add_kv(b, "one", kv_cache(init));
  add_kv(b, "two", kv_cache(init));
  const BuiltProgram built = b.build();
  SUBCASE("apart") {
    Module m = load(built);
    CHECK(m.load_stats().deduplicated_constants == 0);
    CHECK(m.load_stats().read_only_constants == 0);
    CHECK(write_row(m, "one", 0, 100.0f) == sums(init, {{0, 100.0f}}));
    CHECK(write_row(m, "two", 1, 50.0f) == sums(init, {{1, 50.0f}}));  // its own cache: row 0 as stored
    CHECK(m.state_bytes() == 2 * 64);
  }
  SUBCASE("shared") {
    LoadOptions o;
    o.share_state = StateSharing::all();
    Module m = load(built, o);
    CHECK(m.load_stats().shared_state_constants == 1);
    CHECK(write_row(m, "one", 0, 100.0f) == sums(init, {{0, 100.0f}}));
    CHECK(write_row(m, "two", 1, 50.0f) == sums(init, {{0, 100.0f}, {1, 50.0f}}));
    CHECK(m.state_bytes() == 64);
  }
  SUBCASE("named, and sessions start from the stored bytes") {
    LoadOptions o;
    o.share_state.fqns = {"kv.cache"};
    Module m = load(built, o);
    Session s = m.create_session();
    CHECK(write_row(m, "one", 2, 7.0f, &s) == sums(init, {{2, 7.0f}}));
    CHECK(write_row(m, "two", 3, 8.0f) == sums(init, {{3, 8.0f}}));  // the Module's own state
    CHECK(write_row(m, "two", 0, 1.0f, &s) == sums(init, {{2, 7.0f}, {0, 1.0f}}));
    s.reset();
    CHECK(write_row(m, "one", 1, 2.0f, &s) == sums(init, {{1, 2.0f}}));
    m.reset_state();
    CHECK(write_row(m, "two", 1, 2.0f) == sums(init, {{1, 2.0f}}));
  }
}

TEST_CASE("module(fqn): stored tensors that do not fit the library fail the load by name") {
  auto refused = [](const FqnWeightDesc& w) {
    PteBuilder b;
    add_affine(b, "forward", w);
    const BuiltProgram built = b.build();
    return expect_error([&] { load(built); });
  };
  SUBCASE("no entry for the constant") {
    FqnWeightDesc w = affine_w();
    w.fqn = "other.w";
    const Error e = refused(w);
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    CHECK(contains(e.what(), "constant 'w' (FQN 'affine.w') has no entry"));
    CHECK(contains(e.what(), "'other.w'"));
  }
  SUBCASE("another dtype") {
    FqnWeightDesc w = affine_w();
    w.dtype = 3;  // int32, 16 bytes too
    const Error e = refused(w);
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    CHECK(contains(e.what(), "is float32 but its stored tensor 'cuda_fqn_weight:cuda:affine.w' is int32"));
  }
  SUBCASE("a storage larger than the library's constant") {
    FqnWeightDesc w = affine_w(std::vector<float>(32, 1.0f));
    w.sizes = {32};
    const Error e = refused(w);
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    CHECK(contains(e.what(), "holds 16 bytes but its stored tensor"));
  }
}

TEST_CASE("module(fqn): a CPU constant of a CUDA program and a CUDA one both live on the host of a CPU Module") {
  for (int device_type : {0, 1}) {
    CAPTURE(device_type);
    PteBuilder b;
    FqnWeightDesc w = affine_w();
    w.device_type = device_type;
    add_affine(b, "forward", w);
    Module m = load(b.build());
    CHECK(seen_w(m, "forward") == twice(kW));
  }
}

TEST_CASE("module(fqn): two partitions of one method, each with its metadata, share the stored weights") {
  // forward(a, b): y1 = a * w + b by partition 0, then y2 = y1 * w + b by partition 1.
  PteBuilder b;
  const Bytes so = read_file(AOTI_CUDA_FAKE_MODEL_AFFINE);
  auto p0 = b.add_fqn_weights("forward", so, {affine_w()});
  Bytes so1 = so;
  so1.push_back(0);  // another partition, another .so key (trailing bytes do not change the ELF)
  auto p1 = b.add_fqn_weights("forward", so1, {affine_w()});
  CHECK(p0.so_key != p1.so_key);
  MethodDesc m;
  m.name = "forward";
  for (int i = 0; i < 6; ++i) m.values.push_back(ValueDesc::of(f32({2, 4})));
  m.inputs = {0, 1};
  m.outputs = {4, 5};
  m.delegates = {cuda_delegate(p0), cuda_delegate(p1)};
  m.instructions = {InstrDesc{InstrDesc::Kind::kDelegate, 0, 0, {0, 1, 2, 3}},
                    InstrDesc{InstrDesc::Kind::kDelegate, 1, 0, {2, 1, 4, 5}}};
  b.add_method(m);
  const BuiltProgram built = b.build();
  const Program program = Program::from_memory({built.pte.data(), built.pte.size()},
                                               {{built.ptd.data(), built.ptd.size()}}, "two.pte");
  const auto& ds = program.method("forward").delegates;
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].fqn_weights.at(0).storage.data == ds[1].fqn_weights.at(0).storage.data);
  Module mod = load(built);
  CHECK(mod.load_stats().deduplicated_constants == 1);
  CHECK(mod.load_stats().weight_bytes == 16);
  const auto out =
      mod.forward({host_floats({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), host_floats({2, 4}, std::vector<float>(8, 1.0f))});
  std::vector<float> want(8);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int i = 0; i < 8; ++i) want[i] = (a[i] * kW[i % 4] + 1.0f) * kW[i % 4] + 1.0f;
  CHECK(floats(out.at(0)) == want);
}
