// The reader on ExecuTorch 1.5's per-FQN weights (ExporterGeneration::kFqnWeights):
// files written by ExecuTorch 1.5.1's own exporter (tests/data/et15, made by
// tools/export/et15_layout.py), programs the builder writes in the same
// layout, and hostile variants of the ETCUDAFQN3 metadata and its storages
// (checks W1-W7 of docs/format-checks.md).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "aoti_cuda/program.hpp"
#include "aoti_cuda_schema/flat_tensor_generated.h"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::DType;
using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::FqnWeightSpec;
using aoti_cuda::Program;
using namespace aoti_cuda_test;

namespace {

const std::string kEt15Dir = std::string(AOTI_CUDA_SOURCE_DIR) + "/tests/data/et15/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<float> floats_of(ByteView b) {
  std::vector<float> v(b.size / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), b.data, v.size() * sizeof(float));
  return v;
}

FqnWeightDesc weight(const std::string& fqn, const std::vector<float>& values, std::vector<std::int64_t> sizes) {
  FqnWeightDesc w;
  w.fqn = fqn;
  w.storage = float_bytes(values);
  w.sizes = std::move(sizes);
  return w;
}

// A one-method program whose delegate carries `entries` (and `metadata` as the
// payload instead of their encoding, when given).
BuiltProgram fqn_program(const std::vector<FqnWeightDesc>& entries, const Bytes* metadata = nullptr,
                         bool in_segment = true) {
  PteBuilder b;
  CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("not really a .so"), entries, in_segment);
  if (metadata != nullptr) blobs.processed = *metadata;
  b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
  return b.build();
}

Program open_built(const BuiltProgram& p, bool require_data = true) {
  std::vector<ByteView> data;
  if (p.has_ptd) data.push_back(ByteView{p.ptd.data(), p.ptd.size()});
  return Program::from_memory(ByteView{p.pte.data(), p.pte.size()}, data, "fqn.pte", require_data);
}

// The error opening `p` gives: kInvalidProgram naming `check`.
void expect_invalid(const BuiltProgram& p, const std::string& check, const std::string& detail = "") {
  const Error e = expect_error([&] { open_built(p); });
  CHECK(e.code() == ErrorCode::kInvalidProgram);
  CHECK_MESSAGE(contains(e.what(), check), e.what());
  if (!detail.empty()) CHECK_MESSAGE(contains(e.what(), detail), e.what());
}

const std::vector<FqnWeightDesc>& sample_entries() {
  static const std::vector<FqnWeightDesc> entries = [] {
    std::vector<FqnWeightDesc> v;
    v.push_back(weight("lin.weight", {1, 2, 3, 4, 5, 6}, {2, 3}));
    FqnWeightDesc t = weight("table", {0, 1, 2, 3, 4, 5, 6, 7}, {3, 2});  // a transposed view with an offset
    t.strides = {1, 3};
    t.storage_offset = 2;
    v.push_back(t);
    FqnWeightDesc c = weight("scale", {0.5f}, {});
    c.device_type = 0;  // a constant the library keeps on the host
    v.push_back(c);
    return v;
  }();
  return entries;
}

}  // namespace

TEST_CASE("program(et15): the files of ExecuTorch 1.5.1's exporter, every field against what it encoded") {
  for (const char* name : {"shared", "single"}) {
    CAPTURE(name);
    const std::string dir = kEt15Dir + name + "/";
    const nlohmann::json layout = read_json(dir + "layout.json");
    CHECK(layout["generator"]["executorch"].get<std::string>().rfind("1.5.1", 0) == 0);
    const Program p = Program::open(dir + "model.pte");
    REQUIRE(p.data_paths().size() == 1);
    std::vector<std::string> methods;
    for (const auto& m : p.methods()) methods.push_back(m.name);
    CHECK(methods == layout["methods"].get<std::vector<std::string>>());

    std::size_t next = 0;  // the collector encodes in method order, one delegate per method here
    for (const auto& m : p.methods()) {
      CAPTURE(m.name);
      CHECK(m.runnable);
      REQUIRE(m.delegates.size() == 1);
      const aoti_cuda::DelegateSpec& d = m.delegates[0];
      REQUIRE(next < layout["delegates"].size());
      const nlohmann::json& want = layout["delegates"][next++];
      CHECK(d.generation == ExporterGeneration::kFqnWeights);
      CHECK(d.fqn_format == "ETCUDAFQN3");
      CHECK(d.method_name_spec == m.name);
      CHECK(d.so_key == want["so_key"].get<std::string>());
      CHECK(d.so_file == dir + "model.pte");
      REQUIRE(d.so.size > 4);
      CHECK(std::memcmp(d.so.data, "\x7f" "ELF", 4) == 0);
      CHECK(d.weights_key.empty());
      CHECK(d.weights.empty());
      CHECK(d.weights_file.empty());
      REQUIRE(d.fqn_weights.size() == want["entries"].size());
      for (std::size_t i = 0; i < d.fqn_weights.size(); ++i) {
        const FqnWeightSpec& w = d.fqn_weights[i];
        const nlohmann::json& e = want["entries"][i];
        CAPTURE(w.fqn);
        CHECK(w.fqn == e["fqn"].get<std::string>());
        CHECK(w.storage_key == e["storage_key"].get<std::string>());
        CHECK(w.storage_nbytes == e["storage_nbytes"].get<std::uint64_t>());
        CHECK(static_cast<int>(w.dtype) == e["dtype"].get<int>());
        CHECK(w.device_type == e["device_type"].get<int>());
        CHECK(w.storage_offset == e["storage_offset"].get<std::int64_t>());
        CHECK(w.sizes == e["sizes"].get<std::vector<std::int64_t>>());
        CHECK(w.strides == e["strides"].get<std::vector<std::int64_t>>());
        CHECK(w.storage.size == w.storage_nbytes);
        CHECK(w.storage_file == dir + "aoti_cuda_blob.ptd");
        CHECK(p.named_data(w.storage_key)->data == w.storage.data);
      }
    }
    CHECK(next == layout["delegates"].size());
  }
}

TEST_CASE("program(et15): the stored bytes are the module's, one store for both methods") {
  const Program p = Program::open(kEt15Dir + "shared/model.pte");
  const auto& fw = p.method("forward").delegates.at(0);
  const auto& st = p.method("step").delegates.at(0);
  auto find = [](const aoti_cuda::DelegateSpec& d, const std::string& fqn) -> const FqnWeightSpec& {
    for (const FqnWeightSpec& w : d.fqn_weights) {
      if (w.fqn == fqn) return w;
    }
    FAIL("no constant " << fqn);
    return d.fqn_weights.front();
  };
  // Values of tools/export/et15_layout.py's model.
  std::vector<float> lin(12);
  for (int i = 0; i < 12; ++i) lin[i] = static_cast<float>(i) / 8;
  CHECK(floats_of(find(fw, "m.lin.weight").storage) == lin);
  CHECK(floats_of(find(fw, "m.lin.bias").storage) == std::vector<float>{0.5f, -1.0f, 2.0f});
  const FqnWeightSpec& tail = find(fw, "m.tail");  // arange(8)[2:]: the whole storage, viewed from element 2
  CHECK(floats_of(tail.storage) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(tail.storage_offset == 2);
  CHECK(tail.sizes == std::vector<std::int64_t>{6});
  const FqnWeightSpec& scale = find(fw, "m.scale");
  CHECK(scale.dtype == DType::kBFloat16);
  const std::uint8_t bf16[6] = {0x80, 0x3f, 0x00, 0x40, 0x00, 0x3f};  // 1.0, 2.0, 0.5
  REQUIRE(scale.storage.size == 6);
  CHECK(std::memcmp(scale.storage.data, bf16, 6) == 0);
  CHECK(floats_of(find(st, "m.cache").storage) == std::vector<float>(6, 0.0f));
  // The tensor constant is stored under its partition's .so key (its name restarts per library).
  const FqnWeightSpec& c = find(fw, "_tensor_constant0");
  CHECK(c.storage_key == "cuda_fqn_weight:cuda:" + fw.so_key + ":_tensor_constant0");
  CHECK(floats_of(c.storage) == std::vector<float>{1.0f, 0.0f, -1.0f});
  // Both methods read one stored copy of every module constant.
  for (const char* fqn : {"m.lin.weight", "m.lin.bias", "m.scale", "m.table", "m.tail", "m.cache"}) {
    CAPTURE(fqn);
    CHECK(find(fw, fqn).storage.data == find(st, fqn).storage.data);
  }
  CHECK(std::none_of(st.fqn_weights.begin(), st.fqn_weights.end(),
                     [](const FqnWeightSpec& w) { return w.fqn == "_tensor_constant0"; }));
  CHECK(std::string(aoti_cuda::to_string(ExporterGeneration::kFqnWeights)).find("1.5") != std::string::npos);
}

TEST_CASE("program(et15): the builder encodes the metadata byte for byte as ExecuTorch 1.5.1 does") {
  // Re-encode what the reader found in ExecuTorch's file: the same bytes must be in
  // the file's delegate payload, so programs the builder writes have the real layout.
  for (const char* name : {"shared", "single"}) {
    CAPTURE(name);
    const std::string dir = kEt15Dir + name + "/";
    const Bytes pte = read_file(dir + "model.pte");
    const Program p = Program::open(dir + "model.pte");
    for (const auto& m : p.methods()) {
      const aoti_cuda::DelegateSpec& d = m.delegates.at(0);
      std::vector<FqnWeightDesc> entries;
      for (const FqnWeightSpec& w : d.fqn_weights) {
        FqnWeightDesc e;
        e.fqn = w.fqn;
        e.storage_key = w.storage_key;
        e.storage_nbytes = w.storage_nbytes;
        e.dtype = static_cast<int>(w.dtype);
        e.device_type = w.device_type;
        e.storage_offset = w.storage_offset;
        e.sizes = w.sizes;
        e.strides = w.strides;
        entries.push_back(e);
      }
      const Bytes meta = encode_fqn_metadata(d.so_key, entries);
      CHECK(std::search(pte.begin(), pte.end(), meta.begin(), meta.end()) != pte.end());
    }
  }
}

TEST_CASE("program(et15): a builder program in the 1.5 layout reads back every field") {
  for (bool in_segment : {true, false}) {
    CAPTURE(in_segment);
    const BuiltProgram built = fqn_program(sample_entries(), nullptr, in_segment);
    const Program p = open_built(built);
    const auto& d = p.method("forward").delegates.at(0);
    CHECK(p.method("forward").runnable);
    CHECK(d.generation == ExporterGeneration::kFqnWeights);
    REQUIRE(d.fqn_weights.size() == 3);
    const FqnWeightSpec& t = d.fqn_weights[1];
    CHECK(t.fqn == "table");
    CHECK(t.storage_key == "cuda_fqn_weight:cuda:table");
    CHECK(t.strides == std::vector<std::int64_t>{1, 3});
    CHECK(t.storage_offset == 2);
    CHECK(t.sizes == std::vector<std::int64_t>{3, 2});
    CHECK(floats_of(t.storage) == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
    const FqnWeightSpec& s = d.fqn_weights[2];
    CHECK(s.device_type == 0);
    CHECK(s.storage_key == "cuda_fqn_weight:cpu:scale");
    CHECK(s.sizes.empty());
    CHECK(d.fqn_weights[0].strides == std::vector<std::int64_t>{3, 1});
  }
}

TEST_CASE("program(et15): missing storages are kNotFound, or a not-runnable reason for inspection") {
  BuiltProgram built = fqn_program(sample_entries());
  // Point the metadata at a key no file has.
  std::vector<FqnWeightDesc> entries = sample_entries();
  entries[0].storage_key = "cuda_fqn_weight:cuda:nowhere";
  const BuiltProgram missing = [&] {
    PteBuilder b;
    CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"), sample_entries());
    blobs.processed = encode_fqn_metadata(blobs.so_key, entries);
    b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
    return b.build();
  }();
  const Error e = expect_error([&] { open_built(missing); });
  CHECK(e.code() == ErrorCode::kNotFound);
  CHECK(contains(e.what(), "cuda_fqn_weight:cuda:nowhere"));
  const Program p = open_built(missing, /*require_data=*/false);
  CHECK_FALSE(p.method("forward").runnable);
  CHECK(contains(p.method("forward").not_runnable_reason, "cuda_fqn_weight:cuda:nowhere"));
  // Without the .ptd, every storage is missing.
  const Program no_ptd =
      Program::from_memory(ByteView{built.pte.data(), built.pte.size()}, {}, "fqn.pte", /*require_data=*/false);
  CHECK(contains(no_ptd.method("forward").not_runnable_reason, "3 weight storage(s)"));
}

TEST_CASE("program(et15): a later metadata version is reported, not misread") {
  PteBuilder b;
  CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"), sample_entries());
  blobs.processed = encode_fqn_metadata(blobs.so_key, sample_entries(), "ETCUDAFQN4");
  b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
  const Program p = open_built(b.build());
  const auto& m = p.method("forward");
  CHECK_FALSE(m.runnable);
  CHECK(contains(m.not_runnable_reason, "\"ETCUDAFQN4\""));
  CHECK(m.delegates.at(0).generation == ExporterGeneration::kFqnWeights);
  CHECK(m.delegates.at(0).fqn_format == "ETCUDAFQN4");
  CHECK(m.delegates.at(0).fqn_weights.empty());
}

TEST_CASE("program(et15): truncated metadata fails at every length, naming the check") {
  const Bytes meta = encode_fqn_metadata("k_so_blob", sample_entries());
  for (std::size_t n = 1; n < meta.size(); ++n) {
    CAPTURE(n);
    const Bytes cut(meta.begin(), meta.begin() + static_cast<std::ptrdiff_t>(n));
    const Error e = expect_error([&] { open_built(fqn_program(sample_entries(), &cut)); });
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    // Below the 9-byte prefix the payload is not metadata at all (nor a 1.4 key pair).
    if (n >= 10) CHECK_MESSAGE(contains(e.what(), "ETCUDAFQN3 metadata"), e.what());
    if (n >= 10) CHECK_MESSAGE(contains(e.what(), "truncated"), e.what());
  }
  Bytes longer = meta;
  longer.push_back(0);
  expect_invalid(fqn_program(sample_entries(), &longer), "W3 (FQN weight metadata end)", "1 bytes follow the last entry");
}

TEST_CASE("program(et15): hostile metadata fields name their check") {
  const std::vector<FqnWeightDesc> base = sample_entries();
  auto with = [&](auto&& edit) {
    std::vector<FqnWeightDesc> e = base;
    edit(e);
    return e;
  };
  auto check = [&](const std::vector<FqnWeightDesc>& entries, const std::string& id, const std::string& detail) {
    PteBuilder b;
    CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"), base);  // the stored bytes stay valid
    blobs.processed = encode_fqn_metadata(blobs.so_key, entries);
    b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
    expect_invalid(b.build(), id, detail);
  };
  SUBCASE("magic") {
    Bytes meta = encode_fqn_metadata("k", base);
    meta[9] = '3';
    meta[0] = 'X';  // no longer metadata: read as a 1.4 "<so>\n<weights>" payload, whose keys are not there
    const Error e = expect_error([&] { open_built(fqn_program(base, &meta)); });
    CHECK((e.code() == ErrorCode::kInvalidProgram || e.code() == ErrorCode::kNotFound));
  }
  SUBCASE("entry count past the end") {
    Bytes meta = encode_fqn_metadata("k", base);
    put_u32(meta, 10 + 4 + 1, 0x7fffffff);
    expect_invalid(fqn_program(base, &meta), "W1 (FQN weight metadata header)", "entry count 2147483647");
  }
  SUBCASE("so key length past the end") {
    Bytes meta = encode_fqn_metadata("k", base);
    put_u32(meta, 10, 0xffffff00u);
    expect_invalid(fqn_program(base, &meta), "W1 (FQN weight metadata header)", "truncated");
  }
  SUBCASE("empty so key") {
    const Bytes meta = encode_fqn_metadata("", base);
    expect_invalid(fqn_program(base, &meta), "W1 (FQN weight metadata header)", ".so key at byte 10 is empty");
  }
  SUBCASE("fqn length past the end") {
    Bytes meta = encode_fqn_metadata("k", base);
    put_u32(meta, 10 + 4 + 1 + 4, 0x10000);
    expect_invalid(fqn_program(base, &meta), "W2 (FQN weight entry)", "entry 0 fqn");
  }
  SUBCASE("empty fqn") {
    check(with([](auto& e) { e[1].fqn = "", e[1].storage_key = "cuda_fqn_weight:cuda:table"; }), "W2", "is empty");
  }
  SUBCASE("NUL in a fqn") {
    check(with([](auto& e) {
            e[0].fqn = std::string("lin\0w", 5);
            e[0].storage_key = "cuda_fqn_weight:cuda:lin.weight";
          }),
          "W2", "NUL");
  }
  SUBCASE("two entries for one fqn") {
    check(with([](auto& e) { e[1].fqn = "lin.weight"; e[1].storage_key = "cuda_fqn_weight:cuda:table"; }), "W2",
          "both describe fqn \"lin.weight\"");
  }
  SUBCASE("two constants on one storage") {
    check(with([](auto& e) {
            e[1].storage_key = "cuda_fqn_weight:cuda:lin.weight";
            e[1].storage_offset = 0;
            e[1].strides = {};
          }),
          "W2", "name the same storage");
  }
  SUBCASE("rank over 64") { check(with([](auto& e) { e[0].sizes.assign(65, 1); }), "W2", "ndim 65"); }
  SUBCASE("unknown dtype") { check(with([](auto& e) { e[0].dtype = 99; }), "W4 (FQN weight dtype / device)", "dtype 99"); }
  SUBCASE("unknown device") { check(with([](auto& e) { e[0].device_type = 2; }), "W4", "device_type 2"); }
  SUBCASE("key of the other device") {
    check(with([](auto& e) { e[2].storage_key = "cuda_fqn_weight:cuda:scale"; }), "W4", "does not start with");
  }
  SUBCASE("key without the prefix") { check(with([](auto& e) { e[0].storage_key = "lin.weight"; }), "W4", ""); }
  SUBCASE("negative size") { check(with([](auto& e) { e[0].sizes = {-2, 3}; }), "W5 (FQN weight view)", "size[0] = -2"); }
  SUBCASE("negative stride") { check(with([](auto& e) { e[1].strides = {1, -3}; }), "W5", "stride[1] = -3"); }
  SUBCASE("negative offset") { check(with([](auto& e) { e[1].storage_offset = -1; }), "W5", "storage_offset -1"); }
  SUBCASE("view past the storage") {
    check(with([](auto& e) { e[1].storage_offset = 3; }), "W5", "reads 36 bytes but the storage has 32");
  }
  SUBCASE("dtype wider than the storage allows") {
    check(with([](auto& e) { e[0].dtype = 7; }), "W5", "reads 48 bytes but the storage has 24");  // float64
  }
  SUBCASE("stride overflow") {
    check(with([](auto& e) { e[1].strides = {1, std::int64_t{1} << 62}; }), "W5", "overflow");
  }
  SUBCASE("metadata size differs from the stored bytes") {
    // The view still fits the claimed size; the stored storage is 24 bytes.
    check(with([](auto& e) { e[0].storage_nbytes = 16; e[0].sizes = {2, 2}; }), "W6 (FQN weight storage)",
          "holds 24 bytes but the metadata says 16");
  }
  SUBCASE("an empty view reads nothing") {
    PteBuilder b;
    std::vector<FqnWeightDesc> e = with([](auto& x) { x[0].sizes = {0, 3}; x[0].storage_offset = 1000; });
    CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"), e);
    b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
    CHECK(open_built(b.build()).method("forward").runnable);
  }
}

TEST_CASE("program(et15): one store across methods: sizes and dtypes agree, bytes never partly overlap") {
  SUBCASE("the same key with another dtype in another method") {
    PteBuilder b;
    FqnWeightDesc w = weight("shared", {1, 2}, {2});
    CudaBlobs one = b.add_fqn_weights("one", to_bytes("so-1"), {w});
    w.dtype = 3;  // int32: same bytes, another reading
    CudaBlobs two = b.add_fqn_weights("two", to_bytes("so-2"), {w});
    b.add_method(cuda_method("one", {f32({2})}, {f32({2})}, one));
    b.add_method(cuda_method("two", {f32({2})}, {f32({2})}, two));
    expect_invalid(b.build(), "W7 (FQN weight store across methods)", "float32 in method \"one\"");
  }
  SUBCASE("identical stored buffers under two keys are fine (ExecuTorch stores equal bytes once)") {
    PteBuilder b;
    b.dedupe_ptd_buffers();
    CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"),
                                        {weight("k_cache", std::vector<float>(8, 0.0f), {8}),
                                         weight("v_cache", std::vector<float>(8, 0.0f), {8})});
    b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
    const Program p = open_built(b.build());
    const auto& w = p.method("forward").delegates.at(0).fqn_weights;
    CHECK(w.at(0).storage.data == w.at(1).storage.data);
  }
  SUBCASE("partly overlapping storages") {
    // The .pte of a delegate with two 64-byte storages, and a .ptd whose two
    // entries are the bytes [0, 64) and [32, 96) of one segment.
    PteBuilder b;
    CudaBlobs blobs = b.add_fqn_weights("forward", to_bytes("so"),
                                        {weight("a", std::vector<float>(16, 1.0f), {16}),
                                         weight("b", std::vector<float>(16, 2.0f), {16})});
    b.add_method(cuda_method("forward", {f32({2, 4})}, {f32({2, 4})}, blobs));
    const BuiltProgram built = b.build();
    flatbuffers::FlatBufferBuilder fb;
    std::vector<flatbuffers::Offset<flat_tensor_flatbuffer::DataSegment>> segs = {
        flat_tensor_flatbuffer::CreateDataSegment(fb, 0, 64), flat_tensor_flatbuffer::CreateDataSegment(fb, 32, 64)};
    std::vector<flatbuffers::Offset<flat_tensor_flatbuffer::NamedData>> named = {
        flat_tensor_flatbuffer::CreateNamedDataDirect(fb, "cuda_fqn_weight:cuda:a", 0),
        flat_tensor_flatbuffer::CreateNamedDataDirect(fb, "cuda_fqn_weight:cuda:b", 1)};
    fb.Finish(flat_tensor_flatbuffer::CreateFlatTensorDirect(fb, 0, &segs, &named),
              flat_tensor_flatbuffer::FlatTensorIdentifier());
    const Bytes ptd = pack_ptd(fb.GetBufferPointer(), fb.GetSize(), {Bytes(128, 0)});
    const Error e = expect_error([&] {
      Program::from_memory(ByteView{built.pte.data(), built.pte.size()}, {ByteView{ptd.data(), ptd.size()}}, "x.pte");
    });
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    CHECK_MESSAGE(contains(e.what(), "W6 (FQN weight storage)"), e.what());
    CHECK_MESSAGE(contains(e.what(), "partly overlap"), e.what());
  }
}

TEST_CASE("program(et15): random damage to the metadata never crashes the reader") {
  const Bytes meta = encode_fqn_metadata("0123_so_blob", sample_entries());
  std::mt19937 rng(1234);
  int opened = 0, refused = 0;
  for (int i = 0; i < 1500; ++i) {
    Bytes m = meta;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<std::uint8_t>(rng());
    try {
      const Program p = open_built(fqn_program(sample_entries(), &m), /*require_data=*/false);
      ++opened;
    } catch (const Error& e) {
      CHECK_MESSAGE((e.code() == ErrorCode::kInvalidProgram || e.code() == ErrorCode::kNotFound), e.what());
      ++refused;
    }
  }
  CHECK(refused > 0);
  MESSAGE("random metadata damage: " << opened << " opened, " << refused << " refused");
}
