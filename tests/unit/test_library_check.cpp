// check_library and the ELF readers behind it (symbol versions, recorded
// weights size, integrity) on the real fixture libraries and damaged copies.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <gnu/libc-version.h>
#include <string>
#include <vector>

#include "aoti_cuda/library_check.hpp"
#include "aoti_cuda/program.hpp"
#include "format/aoti_facts.hpp"
#include "runtime/library_loader.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

namespace {

std::string fixture(const std::string& name) {
  return std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name + "/" + name + ".pte";
}

// The bytes of the first delegate's library of `name`'s method `method`.
std::vector<std::uint8_t> so_bytes(const std::string& name, const std::string& method = "forward") {
  const aoti_cuda::Program p = aoti_cuda::Program::open(fixture(name));
  const aoti_cuda::ByteView so = p.method(method).delegates.at(0).so;
  return std::vector<std::uint8_t>(so.data, so.data + so.size);
}

aoti_cuda::ByteView view(const std::vector<std::uint8_t>& b) { return {b.data(), b.size()}; }

const aoti_cuda::LibraryCheck& check_named(const aoti_cuda::LibraryReport& r, const std::string& name) {
  auto it = std::find_if(r.checks.begin(), r.checks.end(), [&](const aoti_cuda::LibraryCheck& c) { return c.name == name; });
  REQUIRE(it != r.checks.end());
  return *it;
}

bool glibc_at_least(int major, int minor) {
  int ma = 0, mi = 0;
  std::sscanf(gnu_get_libc_version(), "%d.%d", &ma, &mi);
  return ma > major || (ma == major && mi >= minor);
}

}  // namespace

TEST_CASE("elf_version_needs lists the glibc versions a fixture library needs") {
  const auto so = so_bytes("mlp");
  const std::vector<aoti_cuda::VersionNeed> needs = aoti_cuda::elf_version_needs(view(so));
  auto has = [&](const char* file, const char* version) {
    return std::any_of(needs.begin(), needs.end(),
                       [&](const aoti_cuda::VersionNeed& v) { return v.file == file && v.version == version; });
  };
  CHECK(has("libc.so.6", "GLIBC_2.38"));
  CHECK(has("libc.so.6", "GLIBC_2.2.5"));
  CHECK(has("libgcc_s.so.1", "GCC_3.0"));
  CHECK(needs.size() == 17);
}

TEST_CASE("elf_external_weights_size is the size of the fixture's weights blob") {
  for (const char* name : {"mlp", "conv", "cnn", "block", "embed", "kv_cache"}) {
    CAPTURE(name);
    const aoti_cuda::Program p = aoti_cuda::Program::open(fixture(name));
    const aoti_cuda::DelegateSpec& d = p.method("forward").delegates.at(0);
    const auto size = aoti_cuda::elf_external_weights_size(d.so);
    REQUIRE(size.has_value());
    CHECK(*size == d.weights.size);
  }
  const std::vector<std::uint8_t> junk(256, 0);
  CHECK_FALSE(aoti_cuda::elf_external_weights_size(view(junk)).has_value());
}

TEST_CASE("elf_integrity_problems: every fixture library is intact") {
  for (const char* name : {"mlp", "conv", "cnn", "block", "embed", "kv_cache", "partial", "add", "multi_out"}) {
    CAPTURE(name);
    CHECK(aoti_cuda::elf_integrity_problems(view(so_bytes(name))).empty());
  }
}

TEST_CASE("elf_integrity_problems finds a zeroed page in code, tables and unwind data") {
  const auto good = so_bytes("mlp");
  // File offsets inside .text, .dynsym, .dynstr, .rela.dyn, .eh_frame of the mlp fixture's library.
  for (std::size_t off : {std::size_t{0xa0000}, std::size_t{0xb000}, std::size_t{0x30000}, std::size_t{0x75000},
                          std::size_t{0x1b0000}}) {
    CAPTURE(off);
    std::vector<std::uint8_t> bad = good;
    std::memset(bad.data() + off, 0, 4096);
    CHECK_FALSE(aoti_cuda::elf_integrity_problems(view(bad)).empty());
    const aoti_cuda::LibraryReport r = aoti_cuda::check_library(view(bad));
    CHECK(check_named(r, "integrity").status == aoti_cuda::CheckStatus::kFail);
    CHECK_FALSE(r.runnable());
  }
}

TEST_CASE("check_library: symbol versions against this machine's glibc") {
  const aoti_cuda::LibraryReport r = aoti_cuda::check_library(view(so_bytes("mlp")));
  const aoti_cuda::LibraryCheck& v = check_named(r, "symbol_versions");
  if (glibc_at_least(2, 38)) {
    CHECK(v.status == aoti_cuda::CheckStatus::kPass);
  } else {
    CHECK(v.status == aoti_cuda::CheckStatus::kFail);
    CHECK(v.detail.find("GLIBC_2.38 from libc.so.6") != std::string::npos);
    CHECK(v.detail.find(std::string("this machine has glibc ") + gnu_get_libc_version()) != std::string::npos);
    CHECK_FALSE(r.runnable());
  }
  CHECK(check_named(r, "elf").status == aoti_cuda::CheckStatus::kPass);
  CHECK(check_named(r, "imports").status == aoti_cuda::CheckStatus::kPass);
  CHECK(r.op_shims.empty());
}

TEST_CASE("check_library: GPU architecture and weights size") {
  const aoti_cuda::Program p = aoti_cuda::Program::open(fixture("mlp"));
  const aoti_cuda::DelegateSpec& d = p.method("forward").delegates.at(0);
  aoti_cuda::LibraryCheckOptions o;
  o.no_gpu_reason = "no GPU (test)";
  aoti_cuda::LibraryReport r = aoti_cuda::check_library(d.so, o);
  CHECK(check_named(r, "gpu_architecture").status == aoti_cuda::CheckStatus::kNotChecked);
  CHECK(check_named(r, "gpu_architecture").detail.find("no GPU (test)") != std::string::npos);
  CHECK(check_named(r, "weights").status == aoti_cuda::CheckStatus::kNotChecked);

  o.gpu_sms = {80};  // the fixtures carry sm_90 SASS and compute_90 PTX only
  o.has_weights = true;
  o.weights = d.weights;
  o.weights_label = "w";
  r = aoti_cuda::check_library(d.so, o);
  CHECK(check_named(r, "gpu_architecture").status == aoti_cuda::CheckStatus::kFail);
  CHECK(check_named(r, "weights").status == aoti_cuda::CheckStatus::kPass);
  o.gpu_sms = {90};
  o.weights.size -= 64;  // another export's blob
  r = aoti_cuda::check_library(d.so, o);
  CHECK(check_named(r, "gpu_architecture").status == aoti_cuda::CheckStatus::kPass);
  CHECK(check_named(r, "weights").status == aoti_cuda::CheckStatus::kFail);
  CHECK(check_named(r, "weights").detail.find("compiled for a 38440-byte weights blob; w has 38376 bytes") !=
        std::string::npos);
}

TEST_CASE("check_library lists operator shims and whether this build provides them") {
  std::vector<std::uint8_t> so = so_bytes("mlp");
  // Rename the import "aoti_torch_warn" (in .dynstr) to the same-length
  // operator-shim name "aoti_torch_cpu_", which no build provides.
  const char from[] = "aoti_torch_warn", to[] = "aoti_torch_cpu_";
  auto it = std::search(so.begin(), so.end(), from, from + sizeof from);  // with the NUL
  REQUIRE(it != so.end());
  std::copy(to, to + sizeof to, it);
  const aoti_cuda::LibraryReport r = aoti_cuda::check_library(view(so));
  REQUIRE(r.op_shims.size() == 1);
  CHECK(r.op_shims[0].name == "aoti_torch_cpu_");
  CHECK_FALSE(r.op_shims[0].provided);
  CHECK(check_named(r, "imports").status == aoti_cuda::CheckStatus::kFail);
  CHECK(check_named(r, "imports").detail.find("aoti_torch_cpu_") != std::string::npos);
}

TEST_CASE("check_library marks aoti_cuda's own operator shims (a program that needs them runs on aoti_cuda only)") {
  CHECK(aoti_cuda::is_aoti_cuda_own_shim("aoti_torch_cuda_aoti_cuda_decode_attention"));
  CHECK_FALSE(aoti_cuda::is_aoti_cuda_own_shim("aoti_torch_cuda_int4_plain_mm"));  // ExecuTorch's custom op
  CHECK_FALSE(aoti_cuda::is_aoti_cuda_own_shim("aoti_torch_cuda__scaled_dot_product_flash_attention"));  // PyTorch's
  CHECK_FALSE(aoti_cuda::is_aoti_cuda_own_shim("aoti_torch_cpu_aoti_cuda_decode_attention"));  // not a CUDA shim
  std::vector<std::uint8_t> so = so_bytes("mlp");
  // Rename the longest aoti_torch_* import (in .dynstr) to a same-length name with the prefix of aoti_cuda's shims.
  std::string from;
  for (const std::string& s : aoti_cuda::inspect_elf(view(so)).undefined_symbols) {
    if (s.rfind("aoti_torch_", 0) == 0 && s.size() > from.size()) from = s;
  }
  const std::string prefix = "aoti_torch_cuda_aoti_cuda_";
  REQUIRE(from.size() > prefix.size());
  const std::string to = prefix + std::string(from.size() - prefix.size(), 'x');
  auto it = std::search(so.begin(), so.end(), from.c_str(), from.c_str() + from.size() + 1);  // with the NUL
  REQUIRE(it != so.end());
  std::copy(to.begin(), to.end(), it);
  const aoti_cuda::LibraryReport r = aoti_cuda::check_library(view(so));
  const auto own = std::find_if(r.op_shims.begin(), r.op_shims.end(),
                                [&](const aoti_cuda::OpShimImport& s) { return s.name == to; });
  REQUIRE(own != r.op_shims.end());
  CHECK(own->aoti_cuda_only);
  CHECK_FALSE(own->provided);  // no build has this made-up name
  for (const aoti_cuda::OpShimImport& s : r.op_shims) CHECK(s.aoti_cuda_only == (s.name == to));
}

TEST_CASE("check_library: a library whose GEMMs run on cuBLAS is checked for cuBLAS") {
  // Sets AOTI_CUDA_CUBLAS for the cases, then restores what was there.
  const char* before = std::getenv("AOTI_CUDA_CUBLAS");
  const std::string saved = before != nullptr ? before : "";
  const std::vector<std::uint8_t> so = so_bytes("mlp_cublas");
  REQUIRE(setenv("AOTI_CUDA_CUBLAS", "/proc/self/exe", 1) == 0);  // any regular file stands in for cuBLAS here
  const aoti_cuda::LibraryCheck found = check_named(aoti_cuda::check_library(view(so)), "cublas");
  CHECK(found.status == aoti_cuda::CheckStatus::kPass);
  CHECK(found.detail.find("aoti_torch_cuda_addmm_out") != std::string::npos);
  REQUIRE(setenv("AOTI_CUDA_CUBLAS", "/nonexistent/libcublas.so", 1) == 0);
  const aoti_cuda::LibraryCheck missing = check_named(aoti_cuda::check_library(view(so)), "cublas");
  CHECK(missing.status == aoti_cuda::CheckStatus::kFail);
  CHECK(missing.detail.find("/nonexistent/libcublas.so") != std::string::npos);
  REQUIRE(unsetenv("AOTI_CUDA_CUBLAS") == 0);
  const aoti_cuda::LibraryCheck searched = check_named(aoti_cuda::check_library(view(so)), "cublas");
  CHECK(searched.detail.find("libcublas.so") != std::string::npos);  // where it was found, or that it was not
  MESSAGE("cublas check here: " << aoti_cuda::to_string(searched.status) << ": " << searched.detail);
  // A library without extern GEMMs gets no such check.
  const aoti_cuda::LibraryReport plain = aoti_cuda::check_library(view(so_bytes("mlp")));
  CHECK(std::none_of(plain.checks.begin(), plain.checks.end(),
                     [](const aoti_cuda::LibraryCheck& c) { return c.name == "cublas"; }));
  if (!saved.empty()) REQUIRE(setenv("AOTI_CUDA_CUBLAS", saved.c_str(), 1) == 0);
}

TEST_CASE("aoti_dynamic_input_dims reads which dimensions a fixture library lets vary") {
  auto dims_of = [](const char* name) {
    const auto so = so_bytes(name);
    return aoti_cuda::format::aoti_dynamic_input_dims(view(so));
  };
  CHECK(dims_of("dynamic_mlp") == std::map<int, std::vector<int>>{{0, {0}}});  // batch, exported as Dim('batch')
  CHECK(dims_of("sdpa_bf16_dynamic") == std::map<int, std::vector<int>>{{0, {2}}, {1, {2}}, {2, {2}}});  // sequence
  CHECK(dims_of("mlp").empty());  // static: only "unmatched dim value" checks
}

TEST_CASE("loading refuses a library built against a newer glibc before dlopen, naming the version") {
  const auto so = so_bytes("mlp");
  if (glibc_at_least(2, 38)) {
    CHECK(aoti_cuda::check_symbol_versions(view(so)).status == aoti_cuda::CheckStatus::kPass);
    return;  // this machine can load it: nothing to refuse
  }
  const aoti_cuda::Error e =
      aoti_cuda_test::expect_error([&] { aoti_cuda::runtime::ModelLibrary::load(view(so), "mlp forward", {}); });
  CHECK(e.code() == aoti_cuda::ErrorCode::kLoad);
  CHECK(std::string(e.what()).find("needs GLIBC_2.38 from libc.so.6; this machine has glibc") != std::string::npos);
  const aoti_cuda_test::Bytes fake = aoti_cuda_test::read_file(AOTI_CUDA_FAKE_MODEL_AFFINE);  // built here: needs met
  CHECK(aoti_cuda::check_symbol_versions({fake.data(), fake.size()}).status == aoti_cuda::CheckStatus::kPass);
}
