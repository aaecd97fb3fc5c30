// Private runtime pieces: SHA-256, the import check and the GNU_UNIQUE scan of
// the model-library loader.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "aoti_cuda/error.hpp"
#include "aoti_cuda/program.hpp"
#include "runtime/library_loader.hpp"
#include "runtime/sha256.hpp"
#include "support/pte_builder.hpp"

using aoti_cuda::runtime::sha256_hex;

namespace {
std::string hex(const std::string& s) {
  return sha256_hex(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}
}  // namespace

TEST_CASE("sha256: FIPS 180-4 test vectors and block boundaries") {
  CHECK(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55/56/63/64 bytes straddle the padding boundary; all must differ and be stable.
  std::vector<std::string> seen;
  for (std::size_t n : {55u, 56u, 63u, 64u, 65u}) {
    const std::string d = hex(std::string(n, 'x'));
    CHECK(d.size() == 64);
    for (const auto& s : seen) CHECK(s != d);
    seen.push_back(d);
  }
}

TEST_CASE("loader: missing_imports names only shim/cudart symbols this process lacks") {
  aoti_cuda::ElfInfo elf;
  elf.undefined_symbols = {"aoti_torch_empty_strided", "aoti_torch_not_a_real_shim_fn", "cudaMalloc",
                           "cudaNotARealFunction", "cuLaunchKernel", "memcpy", "aoti_cuda_shim_live_handles"};
  const auto missing = aoti_cuda::runtime::missing_imports(elf);
  CHECK(missing == std::vector<std::string>{"aoti_torch_not_a_real_shim_fn", "cudaNotARealFunction"});
}

TEST_CASE("loader: the fixture libraries' GNU_UNIQUE symbols are found for rewriting") {
  auto program = aoti_cuda::Program::open(std::string(AOTI_CUDA_TEST_FIXTURES) + "/add/add.pte");
  const aoti_cuda::ByteView so = program.method("forward").delegates.at(0).so;
  const auto offsets = aoti_cuda::runtime::gnu_unique_symbol_offsets(so);
  CHECK(offsets.size() > 10);
  for (std::size_t off : offsets) {
    REQUIRE(off < so.size);
    CHECK((so.data[off] >> 4) == 10);
  }
  // Garbage and truncated headers give nothing rather than reading out of bounds.
  std::vector<std::uint8_t> junk(200, 0xff);
  CHECK(aoti_cuda::runtime::gnu_unique_symbol_offsets({junk.data(), junk.size()}).empty());
  std::vector<std::uint8_t> head(so.data, so.data + 64);
  CHECK(aoti_cuda::runtime::gnu_unique_symbol_offsets({head.data(), head.size()}).empty());
}

TEST_CASE("loader: non-ELF and wrong-machine bytes are refused before dlopen") {
  const std::vector<std::string> no_pins;
  std::string text = "definitely not an ELF file, just some bytes that are long enough to parse";
  try {
    aoti_cuda::runtime::ModelLibrary::load({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()},
                                           "method 'm' delegate 0", no_pins);
    FAIL("expected an error");
  } catch (const aoti_cuda::Error& e) {
    CHECK((e.code() == aoti_cuda::ErrorCode::kInvalidProgram || e.code() == aoti_cuda::ErrorCode::kLoad));
  }
  // The fake model with e_machine patched to AArch64/x86 (whichever we are not).
  auto so = aoti_cuda_test::read_file(AOTI_CUDA_FAKE_MODEL_AFFINE);
  const std::uint16_t other = so[18] == 62 ? 183 : 62;
  std::memcpy(&so[18], &other, 2);
  try {
    aoti_cuda::runtime::ModelLibrary::load({so.data(), so.size()}, "method 'm' delegate 0", no_pins);
    FAIL("expected an error");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kLoad);
    CHECK(std::string(e.what()).find("method 'm' delegate 0") != std::string::npos);
  }
  // An empty blob.
  try {
    aoti_cuda::runtime::ModelLibrary::load({nullptr, 0}, "x", no_pins);
    FAIL("expected an error");
  } catch (const aoti_cuda::Error& e) {
    CHECK(e.code() == aoti_cuda::ErrorCode::kInvalidProgram);
  }
}

TEST_CASE("loader: loads the fake library from a memfd and binds the entry points") {
  auto so = aoti_cuda_test::read_file(AOTI_CUDA_FAKE_MODEL_AFFINE);
  auto lib = aoti_cuda::runtime::ModelLibrary::load({so.data(), so.size()}, "fake", {});
  const auto& api = lib->api();
  CHECK(bool(api.create_with_device));
  CHECK(bool(api.run));
  CHECK(bool(api.update_constants_from_blob));
  CHECK(bool(api.get_input_name));        // optional, present
  CHECK(bool(api.get_constant_type));     // optional, present (the constant table, with types)
  CHECK_FALSE(bool(api.get_last_error));  // optional and absent (AOTInductorGetLastError is newer than 2.11)
  CHECK(lib->sha256().empty());  // no pin: not hashed (it costs ~4 ms/MB)
  auto pinned = aoti_cuda::runtime::ModelLibrary::load({so.data(), so.size()}, "fake", {sha256_hex(so.data(), so.size())});
  CHECK(pinned->sha256() == sha256_hex(so.data(), so.size()));
  aoti_cuda::runtime::ContainerHandle c = nullptr;
  REQUIRE(api.create_with_device(&c, 1, "cpu", nullptr) == 0);
  std::size_t n = 0;
  CHECK(api.get_num_inputs(c, &n) == 0);
  CHECK(n == 2);
  CHECK(api.destroy(c) == 0);
}

#include <dlfcn.h>

#include "runtime/cuda_hooks.hpp"

TEST_CASE("driver modules: the SDK exports no driver function, and its module-load hook fails cleanly without a driver") {
  // Model libraries reach the hook through their own import slots
  // (runtime/cuda_hooks.hpp); the process's global name stays the driver's.
  void* global = dlsym(RTLD_DEFAULT, "cuModuleLoadData");
  void* shim = dlsym(RTLD_DEFAULT, "aoti_torch_empty_strided");
  REQUIRE(shim != nullptr);
  Dl_info shim_info{};
  REQUIRE(dladdr(shim, &shim_info) != 0);
  if (global != nullptr) {
    Dl_info info{};
    REQUIRE(dladdr(global, &info) != 0);
    CHECK(std::string(info.dli_fname) != std::string(shim_info.dli_fname));
  }
  using Fn = int (*)(void**, const void*);
  auto* hook = reinterpret_cast<Fn>(aoti_cuda::runtime::hook_function("cuModuleLoadData"));
  REQUIRE((hook != nullptr));
  void* module = nullptr;
  CHECK(hook(&module, "not an image") != 0);  // no driver here (or, with one, an invalid image): an error code, no crash
}
