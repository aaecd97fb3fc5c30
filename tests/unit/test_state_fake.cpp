// Weights and state across methods on the CPU, with the fake model
// libraries: identical read-only bytes deduplicated, nothing else merged by
// default, explicit state sharing and its errors, sessions.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/shim.h"
#include "runtime/constant_sharing.hpp"
#include "runtime/weights_io.hpp"
#include "shim/tensor_object.hpp"
#include "support/fake_module.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::Device;
using aoti_cuda::DType;
using aoti_cuda::ErrorCode;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::LoadOptions;
using aoti_cuda::Module;
using aoti_cuda::Program;
using aoti_cuda::RunOptions;
using aoti_cuda::Session;
using aoti_cuda::StateSharing;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

std::vector<float> iota16(float base) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// One affine method: (a f32[2,4], b f32[2,4]) -> (y, y), y = a * w + b.
void add_affine(PteBuilder& b, const std::string& name, const std::vector<float>& w,
                const char* so = AOTI_CUDA_FAKE_MODEL_AFFINE) {
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, name, read_file(so), float_bytes(w));
  b.add_method(cuda_method(name, {f32({2, 4}), f32({2, 4})}, {f32({2, 4}), f32({2, 4})}, blobs));
}

// One kv method: (x f32[1,4], pos i64[1]) -> column sums of the cache after cache[pos] = x.
void add_kv(PteBuilder& b, const std::string& name, const std::vector<float>& init, const char* so = AOTI_CUDA_FAKE_MODEL_KV) {
  auto blobs = b.add_cuda_blobs(ExporterGeneration::kMethodKeys, name, read_file(so), float_bytes(init));
  b.add_method(fake_kv_method(name, blobs));
}

LoadOptions share_all() {
  LoadOptions o;
  o.share_state = StateSharing::all();
  return o;
}

Module load(const BuiltProgram& built, LoadOptions o = {}) {
  return load_on_cpu(built, std::move(o), "state_test.pte");
}

// y of the affine method for a = 1, b = 0 (so y = w, twice).
std::vector<float> affine_w(Module& m, const std::string& method) {
  std::vector<float> ones(8, 1.0f), zeros(8, 0.0f);
  return floats(m.execute(method, {host_floats({2, 4}, ones), host_floats({2, 4}, zeros)}).at(0));
}

// Writes row `row` = x with `method`, returns the column sums.
std::vector<float> write_row(Module& m, const std::string& method, int64_t row, float x, Session* s = nullptr) {
  RunOptions ro;
  ro.session = s;
  return floats(m.execute(method, {host_floats({1, 4}, {x, x, x, x}), host_position(row)}, ro).at(0));
}

// Column sums of a 4x4 cache `init` with rows replaced.
std::vector<float> sums(std::vector<float> cache, const std::vector<std::pair<int, float>>& rows) {
  for (const auto& r : rows)
    for (int k = 0; k < 4; ++k) cache[r.first * 4 + k] = r.second;
  std::vector<float> s(4, 0.0f);
  for (int i = 0; i < 16; ++i) s[i % 4] += cache[i];
  return s;
}

const std::vector<float> kW = {0.5f, 1.0f, 2.0f, -1.0f};

}  // namespace

TEST_CASE("state(fake): blob offsets, unpadded and 64-byte padded") {
  std::uint64_t total = 0;
  CHECK(aoti_cuda::runtime::blob_offsets({16384, 256, 864, 256}, false, &total) ==
        std::vector<std::uint64_t>{0, 16384, 16640, 17504});
  CHECK(total == 17760);
  CHECK(aoti_cuda::runtime::blob_offsets({10, 64, 65}, true, &total) == std::vector<std::uint64_t>{0, 64, 128});
  CHECK(total == 256);
  std::vector<std::uint8_t> a(100 << 20, 7), b = a;
  CHECK(aoti_cuda::runtime::bytes_equal(a.data(), b.data(), a.size()));  // the multi-threaded path
  b[(100 << 20) - 1] = 8;
  CHECK_FALSE(aoti_cuda::runtime::bytes_equal(a.data(), b.data(), a.size()));
  CHECK_FALSE(aoti_cuda::runtime::is_read_only_file_mapping({a.data(), a.size()}));  // heap memory is never released
}

TEST_CASE("state(fake): read-only constants are marked as memory no kernel writes; state is not") {
  namespace rt = aoti_cuda::runtime;
  namespace shim = aoti_cuda::shim;
  using Type = rt::ConstantType;
  std::vector<float> bytes(6 * 4);
  std::vector<AtenTensorHandle> handles;
  auto handle = [&](int i) {
    auto storage = shim::borrow_storage(bytes.data() + 4 * i, 16, aoti_cuda::DeviceType::kCPU, 0);
    handles.push_back(shim::make_handle(storage, {4}, {1}, 0, 6));
    return handles.back();
  };
  const AtenTensorHandle param = handle(0), constant = handle(1), buffer = handle(2), unknown = handle(3),
                         both = handle(4), unlisted = handle(5);
  auto delegate = [](std::vector<Type> types, std::vector<AtenTensorHandle> in_use, bool known) {
    auto d = std::make_unique<rt::Delegate>();
    for (Type t : types) {
      rt::ConstantEntry e;
      e.type = t;
      d->constants.push_back(e);
    }
    d->in_use = std::move(in_use);
    d->constants_known = known;
    return d;
  };
  // `both` is a parameter of the first method and a buffer of the second: some kernel may write it. Unknown is how
  // Inductor reports the weights ExecuTorch's lowering hands it (ConstantEntry::read_only).
  const auto first = delegate({Type::kParameter, Type::kTensorConstant, Type::kBuffer, Type::kUnknown, Type::kParameter},
                              {param, constant, buffer, unknown, both}, true);
  const auto second = delegate({Type::kBuffer, Type::kParameter}, {both, param}, true);
  const auto unreadable = delegate({Type::kParameter}, {unlisted}, false);  // its table could not be read
  CHECK(rt::mark_program_constants({first.get(), second.get(), unreadable.get()}) == 3);
  auto marked = [](AtenTensorHandle h) { return shim::is_program_constant(*shim::checked_defined(h, "h")); };
  CHECK(marked(param));
  CHECK(marked(constant));
  CHECK(marked(unknown));
  CHECK_FALSE(marked(buffer));
  CHECK_FALSE(marked(both));
  CHECK_FALSE(marked(unlisted));
  // A view shares its storage, and so the mark.
  AtenTensorHandle view = nullptr;
  REQUIRE(aoti_torch__reinterpret_tensor(param, 1, std::vector<int64_t>{2}.data(), std::vector<int64_t>{1}.data(), 2,
                                         &view) == AOTI_TORCH_SUCCESS);
  CHECK(marked(view));
  handles.push_back(view);
  for (AtenTensorHandle h : handles) CHECK(aoti_torch_delete_tensor_object(h) == AOTI_TORCH_SUCCESS);
}

TEST_CASE("state(fake): identical read-only bytes are deduplicated; the blob is not uploaded") {
  PteBuilder b;
  add_affine(b, "first", kW);
  add_affine(b, "second", kW);
  const BuiltProgram built = b.build();
  Module m = load(built);
  const aoti_cuda::LoadStats st = m.load_stats();
  CHECK(st.deduplicated_constants == 1);
  CHECK(st.deduplicated_bytes == 16);
  CHECK(st.weight_bytes == 16);
  CHECK(st.shared_state_constants == 0);
  CHECK(st.read_only_constants == 1);  // one copy, both methods' weight: marked as memory no kernel writes
  CHECK(affine_w(m, "first") == std::vector<float>{0.5f, 1, 2, -1, 0.5f, 1, 2, -1});
  CHECK(affine_w(m, "second") == affine_w(m, "first"));
  CHECK(m.state_bytes() == 0);

  LoadOptions off;
  off.deduplicate_constants = false;
  Module separate = load(built, off);
  CHECK(separate.load_stats().deduplicated_bytes == 0);
  CHECK(separate.load_stats().weight_bytes == 32);
  CHECK(separate.load_stats().read_only_constants == 2);
}

TEST_CASE("state(fake): equal FQN, dtype and size but different bytes: each method keeps its own (two instances)") {
  PteBuilder b;
  add_affine(b, "first", kW);
  add_affine(b, "second", {3.0f, 4.0f, 5.0f, 6.0f});
  const BuiltProgram built = b.build();
  Module m = load(built);
  CHECK(m.load_stats().deduplicated_bytes == 0);
  CHECK(m.load_stats().deduplicated_constants == 0);
  CHECK(affine_w(m, "first") == std::vector<float>{0.5f, 1, 2, -1, 0.5f, 1, 2, -1});
  CHECK(affine_w(m, "second") == std::vector<float>{3, 4, 5, 6, 3, 4, 5, 6});
}

TEST_CASE("state(fake): constants the library reports as Unknown are read-only: identical bytes are merged") {
  PteBuilder b;
  add_affine(b, "first", kW, AOTI_CUDA_FAKE_MODEL_AFFINE_UNKNOWN);
  add_affine(b, "second", kW, AOTI_CUDA_FAKE_MODEL_AFFINE_UNKNOWN);
  add_affine(b, "third", {3, 4, 5, 6}, AOTI_CUDA_FAKE_MODEL_AFFINE_UNKNOWN);  // same FQN, other bytes
  Module m = load(b.build());
  CHECK(m.load_stats().deduplicated_bytes == 16);
  CHECK(m.load_stats().deduplicated_constants == 1);
  CHECK(m.load_stats().weight_bytes == 32);  // first and third uploaded
  CHECK(m.load_stats().read_only_constants == 2);  // both copies: Unknown is how ExecuTorch's weights are reported
  CHECK(affine_w(m, "second") == affine_w(m, "first"));
  CHECK(affine_w(m, "third") == std::vector<float>{3, 4, 5, 6, 3, 4, 5, 6});
  CHECK(m.state_bytes() == 0);  // not state: sessions do not copy them
}

TEST_CASE("state(fake): constants whose type the library does not report are never merged, even with identical bytes") {
  PteBuilder b;
  add_affine(b, "first", kW, AOTI_CUDA_FAKE_MODEL_AFFINE_UNTYPED);
  add_affine(b, "second", kW, AOTI_CUDA_FAKE_MODEL_AFFINE_UNTYPED);
  Module m = load(b.build());
  CHECK(m.load_stats().deduplicated_bytes == 0);
  CHECK(m.load_stats().weight_bytes == 32);
  CHECK(affine_w(m, "second") == affine_w(m, "first"));
  CHECK(m.state_bytes() == 128);  // an unreported type counts as state: two 16-byte constants in 64-byte chunks
}

TEST_CASE("state(fake): buffers are not shared by default, even with identical initial bytes") {
  PteBuilder b;
  add_kv(b, "write", iota16(0));
  add_kv(b, "read", iota16(0));
  Module m = load(b.build());
  CHECK(m.load_stats().deduplicated_bytes == 0);
  CHECK(m.load_stats().shared_state_constants == 0);
  CHECK(m.load_stats().read_only_constants == 0);  // caches are written: never marked
  CHECK(m.state_bytes() == 128);  // two private 64-byte caches
  CHECK(write_row(m, "write", 2, 1000) == sums(iota16(0), {{2, 1000}}));
  CHECK(write_row(m, "read", 0, 7) == sums(iota16(0), {{0, 7}}));  // does not see row 2
}

TEST_CASE("state(fake): buffers shared on request (all buffers, or by FQN): one cache, the first method's bytes") {
  PteBuilder b;
  add_kv(b, "write", iota16(0));
  add_kv(b, "read", iota16(100));
  const BuiltProgram built = b.build();
  const int64_t handles = aoti_cuda_shim_live_handles();
  for (int by_name = 0; by_name < 2; ++by_name) {
    CAPTURE(by_name);
    LoadOptions o;
    if (by_name) o.share_state.fqns = {"kv.cache"};
    else o.share_state = StateSharing::all();
    {
      Module m = load(built, o);
      CHECK(m.load_stats().shared_state_constants == 1);
      CHECK(m.load_stats().deduplicated_bytes == 64);  // 'read' adopted 'write''s cache: its blob is not uploaded
      CHECK(m.state_bytes() == 64);
      write_row(m, "write", 2, 1000);
      CHECK(write_row(m, "read", 0, 7) == sums(iota16(0), {{2, 1000}, {0, 7}}));
    }
    CHECK(aoti_cuda_shim_live_handles() == handles);  // the aliases died with the Module
  }
}

TEST_CASE("state(fake): share_state errors name the FQN") {
  PteBuilder b;
  add_kv(b, "narrow", iota16(0));
  add_kv(b, "wide", std::vector<float>(32, 1.0f), AOTI_CUDA_FAKE_MODEL_KV_WIDE);
  const BuiltProgram built = b.build();
  LoadOptions o;
  o.share_state.fqns = {"kv.nope"};
  aoti_cuda::Error e = expect_error([&] { load(built, o); });
  CHECK(e.code() == ErrorCode::kNotFound);
  CHECK(std::string(e.what()).find("'kv.nope'") != std::string::npos);
  CHECK(std::string(e.what()).find("'kv.cache'") != std::string::npos);  // what there is
  const std::string listed = e.what();  // both methods hold 'kv.cache': named once
  CHECK(listed.find("'kv.cache'") == listed.rfind("'kv.cache'"));
  o.share_state.fqns = {"kv.cache"};
  e = expect_error([&] { load(built, o); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(e.what()).find("'kv.cache'") != std::string::npos);
  CHECK(std::string(e.what()).find("128 bytes") != std::string::npos);
  // all_buffers leaves buffers that differ private.
  Module m = load(built, share_all());
  CHECK(m.load_stats().shared_state_constants == 0);
  CHECK(m.state_bytes() == 64 + 128);
}

TEST_CASE("state(fake): sessions are isolated, reset to the initial bytes, and report their bytes") {
  PteBuilder b;
  add_kv(b, "write", iota16(0));
  add_kv(b, "read", iota16(100));
  add_affine(b, "forward", kW);  // stateless
  const BuiltProgram built = b.build();
  Module m = load(built, share_all());
  Session s1 = m.create_session();
  Session s2 = m.create_session();
  CHECK(s1.state_bytes() == 64);
  CHECK(m.state_bytes() == 64);
  const std::vector<float> init = iota16(0);
  CHECK(write_row(m, "write", 0, 10, &s1) == sums(init, {{0, 10}}));
  CHECK(write_row(m, "write", 1, 20, &s2) == sums(init, {{1, 20}}));          // s1's row is invisible
  CHECK(write_row(m, "write", 2, 30) == sums(init, {{2, 30}}));               // the Module's own state
  CHECK(write_row(m, "read", 3, 11, &s1) == sums(init, {{0, 10}, {3, 11}}));  // shared across methods, per session
  CHECK(write_row(m, "read", 3, 21, &s2) == sums(init, {{1, 20}, {3, 21}}));
  CHECK(affine_w(m, "forward").size() == 8);  // stateless methods ignore sessions
  s1.reset();
  CHECK(write_row(m, "write", 1, 12, &s1) == sums(init, {{1, 12}}));
  s2.reset();  // not resident: its stored copy is reset
  CHECK(write_row(m, "write", 0, 22, &s2) == sums(init, {{0, 22}}));
  CHECK(write_row(m, "read", 3, 31) == sums(init, {{2, 30}, {3, 31}}));  // the default state survived it all

  // A moved session keeps its state; a destroyed resident session leaves the others intact.
  Session moved = std::move(s1);
  CHECK(write_row(m, "write", 2, 13, &moved) == sums(init, {{1, 12}, {2, 13}}));
  { Session gone = std::move(moved); }
  CHECK(write_row(m, "write", 3, 23, &s2) == sums(init, {{0, 22}, {3, 23}}));
  RunOptions ro;
  ro.session = &s1;  // moved-from
  CHECK(expect_error([&] { m.execute("write", {host_floats({1, 4}, {1, 1, 1, 1}), host_position(0)}, ro); }).code() ==
        ErrorCode::kInvalidArgument);
  Module other = load(built, share_all());
  ro.session = &s2;
  const aoti_cuda::Error e =
      expect_error([&] { other.execute("write", {host_floats({1, 4}, {1, 1, 1, 1}), host_position(0)}, ro); });
  CHECK(e.code() == ErrorCode::kInvalidArgument);
  CHECK(std::string(e.what()).find("another Module") != std::string::npos);
  CHECK(expect_error([&] { (void)s1.state_bytes(); }).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("state(fake): Module::reset_state puts the default state back and leaves sessions alone") {
  PteBuilder b;
  add_kv(b, "write", iota16(0));
  add_affine(b, "forward", kW);  // stateless
  const BuiltProgram built = b.build();
  Module m = load(built);
  const std::vector<float> init = iota16(0);
  CHECK(write_row(m, "write", 0, 10) == sums(init, {{0, 10}}));
  m.reset_state();  // resident, before any session exists
  CHECK(write_row(m, "write", 1, 20) == sums(init, {{1, 20}}));
  Session s = m.create_session();
  CHECK(write_row(m, "write", 2, 30, &s) == sums(init, {{2, 30}}));
  m.reset_state();  // not resident: its stored copy is reset, the session's live copy untouched
  CHECK(write_row(m, "write", 3, 40, &s) == sums(init, {{2, 30}, {3, 40}}));
  CHECK(write_row(m, "write", 0, 50) == sums(init, {{0, 50}}));
  PteBuilder only_affine;
  add_affine(only_affine, "forward", kW);
  const BuiltProgram affine = only_affine.build();
  Module stateless = load(affine);
  stateless.reset_state();  // no state: nothing to do
  CHECK(stateless.state_bytes() == 0);
  CHECK(affine_w(stateless, "forward").size() == 8);
}

TEST_CASE("state(fake): concurrent calls with different sessions are serialized and stay isolated") {
  PteBuilder b;
  add_kv(b, "write", iota16(0));
  const BuiltProgram built = b.build();
  LoadOptions o;
  o.num_models = 2;  // two calls could run at once if the state did not serialize them
  Module m = load(built, o);
  Session sessions[2] = {m.create_session(), m.create_session()};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const float x = static_cast<float>(1000 * (t + 1) + i);
        // Each thread owns row t of its session's cache; the other rows keep their initial bytes.
        if (write_row(m, "write", t, x, &sessions[t]) != sums(iota16(0), {{t, x}})) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
}
