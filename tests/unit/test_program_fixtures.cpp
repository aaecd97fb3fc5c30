// Reader tests against the real ExecuTorch 1.2.0 CUDA exports in tests/fixtures
// (and, optionally, /work/shared/fixtures): methods, signatures, blob keys and
// sizes must match each manifest.json, and the embedded .so must be an x86-64
// shared object whose undefined shim/CUDA imports equal imports.txt.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"

namespace fs = std::filesystem;
using aoti_cuda::ExporterGeneration;
using aoti_cuda::Program;

namespace {

std::vector<fs::path> fixture_dirs() {
  std::vector<fs::path> roots{fs::path(AOTI_CUDA_TEST_FIXTURES)};
  if (const char* env = std::getenv("AOTI_CUDA_SHARED_FIXTURES")) {
    roots.emplace_back(env);
  } else {
    const fs::path shared = fs::path(AOTI_CUDA_SOURCE_DIR) / ".." / "shared" / "fixtures";
    if (fs::exists(shared)) roots.push_back(shared);
  }
  std::vector<fs::path> dirs;
  for (const auto& root : roots) {
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::directory_iterator(root)) {
      if (fs::exists(e.path() / "manifest.json")) dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string dtype_of(aoti_cuda::DType t) { return aoti_cuda::dtype_name(static_cast<int>(t)); }

std::set<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::set<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.insert(line);
  }
  return out;
}

}  // namespace

TEST_CASE("program reader: every fixture matches its manifest") {
  const auto dirs = fixture_dirs();
  REQUIRE(dirs.size() >= 10);  // the 10 bundled fixtures at least
  for (const auto& dir : dirs) {
    CAPTURE(dir.string());
    std::ifstream mf(dir / "manifest.json");
    const nlohmann::json manifest = nlohmann::json::parse(mf);
    const fs::path pte = dir / manifest.at("pte").get<std::string>();
    Program program = Program::open(pte.string());
    REQUIRE(program.data_paths().size() == 1);
    CHECK(fs::path(program.data_paths()[0]).filename() == "aoti_cuda_blob.ptd");

    const auto& methods = manifest.at("methods");
    CHECK(program.methods().size() == methods.size());
    std::vector<std::size_t> so_sizes;
    std::set<std::string> imports_union;
    for (const auto& [name, mj] : methods.items()) {
      CAPTURE(name);
      const aoti_cuda::MethodSpec& m = program.method(name);
      if (manifest.value("expect_not_runnable", false)) {
        // Exported with part of the graph outside the delegate: the reader must
        // refuse it and name every kernel operator it found.
        CHECK_FALSE(m.runnable);
        for (const auto& op : manifest.at("kernel_calls")) {
          CHECK(m.not_runnable_reason.find(op.get<std::string>()) != std::string::npos);
        }
      } else {
        CHECK(m.runnable);
        CHECK(m.not_runnable_reason == "");
      }
      REQUIRE(m.inputs.size() == mj.at("inputs").size());
      REQUIRE(m.outputs.size() == mj.at("outputs").size());
      auto check_specs = [&](const std::vector<aoti_cuda::ValueSpec>& specs, const nlohmann::json& js) {
        for (std::size_t i = 0; i < specs.size(); ++i) {
          CAPTURE(i);
          REQUIRE(specs[i].kind == aoti_cuda::ValueKind::kTensor);
          CHECK(dtype_of(specs[i].tensor.dtype) == js[i].at("dtype").get<std::string>());
          const auto shape = js[i].at("shape").get<std::vector<int64_t>>();
          if (specs[i].tensor.dynamic) {
            // The program stores the upper bound; the manifest's example must fit in it.
            REQUIRE(specs[i].tensor.sizes.size() == shape.size());
            for (std::size_t d = 0; d < shape.size(); ++d) CHECK(shape[d] <= specs[i].tensor.sizes[d]);
          } else {
            CHECK(specs[i].tensor.sizes == shape);
          }
          CHECK(specs[i].tensor.dim_order.size() == shape.size());
        }
      };
      check_specs(m.inputs, mj.at("inputs"));
      check_specs(m.outputs, mj.at("outputs"));

      REQUIRE(m.delegates.size() == 1);
      const aoti_cuda::DelegateSpec& d = m.delegates[0];
      CHECK(d.backend_id == "CudaBackend");
      CHECK(d.generation == ExporterGeneration::kMethodKeys);
      CHECK(d.method_name_spec == name);
      CHECK(d.so_key == name + "_so_blob");
      CHECK(d.weights_key == name + "_weights_blob");
      CHECK(d.so_file == pte.string());
      CHECK(fs::path(d.weights_file).filename() == "aoti_cuda_blob.ptd");
      REQUIRE(m.plan.size() == 1);
      CHECK(m.plan[0].kind == aoti_cuda::PlanStep::Kind::kDelegate);
      CHECK(m.plan[0].delegate == 0);
      CHECK(m.plan[0].args == d.args);
      CHECK(d.args.size() >= m.inputs.size() + m.outputs.size());
      so_sizes.push_back(d.so.size);

      // The named-data lookup returns the same bytes.
      auto so = program.named_data(d.so_key);
      REQUIRE(so.has_value());
      CHECK(so->data == d.so.data);

      const aoti_cuda::ElfInfo elf = aoti_cuda::inspect_elf(d.so);
      CHECK(elf.elf_class == 64);
      CHECK(elf.machine == 62);
      CHECK(elf.machine_name == "x86-64");
      CHECK(elf.is_shared_object);
      CHECK(std::find(elf.needed.begin(), elf.needed.end(), "libcuda.so.1") != elf.needed.end());
      CHECK(std::find(elf.defined_symbols.begin(), elf.defined_symbols.end(), "AOTInductorModelContainerRun") !=
            elf.defined_symbols.end());
      std::set<std::string> shim_and_cuda;
      for (const auto& s : elf.undefined_symbols) {
        if (s.rfind("aoti_torch_", 0) == 0 || s.rfind("cu", 0) == 0) shim_and_cuda.insert(s);
      }
      std::set<std::string> expected;
      for (const auto& s : read_lines(dir / "imports.txt")) {
        if (s.rfind("aoti_torch_", 0) == 0 || s.rfind("cu", 0) == 0) expected.insert(s);
      }
      for (const auto& s : shim_and_cuda) CHECK(expected.count(s) == 1);
      imports_union.insert(shim_and_cuda.begin(), shim_and_cuda.end());
    }
    // imports.txt lists the union over all .so files of the program.
    std::set<std::string> expected;
    for (const auto& s : read_lines(dir / "imports.txt")) {
      if (s.rfind("aoti_torch_", 0) == 0 || s.rfind("cu", 0) == 0) expected.insert(s);
    }
    CHECK(expected.size() > 10);
    CHECK(imports_union == expected);
    auto want_sizes = manifest.at("so_sizes").get<std::vector<std::size_t>>();
    std::sort(want_sizes.begin(), want_sizes.end());
    std::sort(so_sizes.begin(), so_sizes.end());
    CHECK(so_sizes == want_sizes);
  }
}

TEST_CASE("program reader: kv_cache delegate args differ from the method input order") {
  Program p = Program::open(std::string(AOTI_CUDA_TEST_FIXTURES) + "/kv_cache/kv_cache.pte");
  const auto& m = p.method("forward");
  std::vector<int32_t> in;
  for (const auto& v : m.inputs) in.push_back(v.value_index);
  CHECK(in == std::vector<int32_t>{0, 1});
  REQUIRE(m.delegates.size() == 1);
  CHECK(m.delegates[0].args == std::vector<int32_t>{1, 0, 2});
  CHECK(m.outputs.at(0).value_index == 2);
  CHECK(m.values.size() == 3);
  CHECK(m.inputs[1].tensor.dtype == aoti_cuda::DType::kInt64);
}

TEST_CASE("program reader: dynamic_mlp marks its batch dimension dynamic") {
  Program p = Program::open(std::string(AOTI_CUDA_TEST_FIXTURES) + "/dynamic_mlp/dynamic_mlp.pte");
  const auto& m = p.method("forward");
  CHECK(m.inputs.at(0).tensor.dynamic);
  CHECK(m.inputs.at(0).tensor.sizes == std::vector<int64_t>{64, 64});
  CHECK(m.outputs.at(0).tensor.dynamic);
}

TEST_CASE("program reader: encdec has two methods with their own .so") {
  Program p = Program::open(std::string(AOTI_CUDA_TEST_FIXTURES) + "/encdec/encdec.pte");
  auto names = p.method_names();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"decode", "encode"});
  CHECK(p.method("encode").delegates.at(0).so.data != p.method("decode").delegates.at(0).so.data);
  try {
    p.method("forward");
    FAIL("expected kNotFound");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
    CHECK(std::string(e.what()).find("\"encode\"") != std::string::npos);
  }
  const auto entries = p.named_data_entries();
  CHECK(entries.size() == 4);
}

TEST_CASE("program reader: missing files and missing data") {
  const std::string dir = AOTI_CUDA_TEST_FIXTURES;
  try {
    Program::open(dir + "/does_not_exist.pte");
    FAIL("expected kNotFound");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
    CHECK(std::string(e.what()).find("does_not_exist.pte") != std::string::npos);
  }
  aoti_cuda::ProgramOptions opts;
  opts.data_files = {dir + "/mlp/nope.ptd"};
  try {
    Program::open(dir + "/mlp/mlp.pte", opts);
    FAIL("expected kNotFound");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kNotFound);
    CHECK(std::string(e.what()).find("nope.ptd") != std::string::npos);
  }
  try {
    Program::open(dir);  // a directory
    FAIL("expected kIo");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kIo);
  }
}
