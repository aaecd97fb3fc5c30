// The CUDA hook binding (src/runtime/cuda_hooks.hpp): the cases that must hold
// in any load order (support/hook_cases.hpp, also run by the load-order test),
// plus what only the SDK's internals show.
#include <dlfcn.h>

#include <set>

#include "format/elf.hpp"
#include "runtime/capture_hooks.hpp"
#include "runtime/cuda_hooks.hpp"
#include "support/hook_cases.hpp"

using namespace aoti_cuda;

TEST_CASE("cuda hooks: the table names each import once, with its reason") {
  std::set<std::string> names;
  for (const common::hooks::HookSpec& h : common::hooks::kHooks) {
    CAPTURE(h.import);
    CHECK(names.insert(h.import).second);
    CHECK(std::strlen(h.why) > 20);
  }
  for (const char* newer : {"cudaMemcpy_ptds", "cudaEventRecord_ptsz", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                            "cuLibraryLoadData", "cuModuleLoadDataEx"}) {
    CAPTURE(newer);
    CHECK(names.count(newer) == 1);
  }
  CHECK(common::hooks::hooked_imports({"cudaMalloc", "cudaMemcpy", "cuLaunchKernel@libcuda", "aoti_torch_warn"}) ==
        std::vector<std::string>{"cuLaunchKernel", "cudaMemcpy"});
}

TEST_CASE("cuda hooks: imports that fetch driver entry points at run time are warned about, with the consequence") {
  const std::vector<std::string> w = common::hooks::bypass_warnings({"cudaMalloc", "cuGetProcAddress_v2"});
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("cuGetProcAddress_v2") != std::string::npos);
  CHECK(w[0].find("not hooked") != std::string::npos);
  CHECK(common::hooks::bypass_warnings({"cudaMalloc", "cudaMemcpy"}).empty());
}

TEST_CASE("cuda hooks: the event-record hook is skipped inside a graph capture scope, forwarded outside") {
  aoti_cuda_test::TempDir dir;
  Module m(aoti_cuda_test::hooks::write_hooked_program(dir.path), aoti_cuda_test::hooks::cpu());
  auto* bound_to = reinterpret_cast<void* (*)(const char*)>(aoti_cuda_test::hooks::loaded_symbol("fake_model_import"));
  REQUIRE((bound_to != nullptr));
  auto* record = reinterpret_cast<int (*)(void*, void*)>(bound_to("cudaEventRecord"));
  REQUIRE((record != nullptr));
  {
    runtime::GraphCaptureScope capture;
    CHECK(record(nullptr, nullptr) == 0);
    CHECK(capture.skipped_records() == 1);
  }
  CHECK(record(nullptr, nullptr) != 0);  // libcudart's own answer for a null event (or no GPU)
}

TEST_CASE("cuda hooks: import slots are read from the relocation tables, and malformed tables are refused") {
  const aoti_cuda_test::Bytes so = aoti_cuda_test::read_file(AOTI_CUDA_FAKE_MODEL_AFFINE_CUDA);
  const ByteView bytes{so.data(), so.size()};
  const auto slots = format::import_slots(bytes, [](const std::string& n) { return n == "cudaEventRecord"; });
  REQUIRE(!slots.empty());  // the call's PLT slot, and the GOT entry of its address
  for (const auto& s : slots) {
    CHECK(s.symbol == "cudaEventRecord");
    CHECK(s.offset > 0);
  }
  CHECK(format::import_slots(bytes, [](const std::string&) { return false; }).empty());
  // Truncated: the section headers are gone.
  const ByteView half{so.data(), so.size() / 2};
  CHECK_THROWS_AS(format::import_slots(half, [](const std::string&) { return true; }), Error);
  // A relocation pointing at a symbol index past .dynsym.
  aoti_cuda_test::Bytes bad = so;
  const auto all = format::import_slots(ByteView{bad.data(), bad.size()}, [](const std::string&) { return true; });
  REQUIRE(!all.empty());
  bool corrupted = false;
  for (std::size_t off = 0; off + 24 <= bad.size() && !corrupted; off += 8) {
    std::uint64_t r_offset = 0;
    std::memcpy(&r_offset, bad.data() + off, 8);
    std::uint32_t type = 0;
    std::memcpy(&type, bad.data() + off + 8, 4);
    if (r_offset != all[0].offset || (type != 6 && type != 7 && type != 1025 && type != 1026)) continue;
    const std::uint32_t huge = 0xfffffff0u;
    std::memcpy(bad.data() + off + 12, &huge, 4);  // r_info's symbol index
    corrupted = true;
  }
  REQUIRE(corrupted);
  try {
    (void)format::import_slots(ByteView{bad.data(), bad.size()}, [](const std::string&) { return true; });
    FAIL("a relocation naming a symbol past .dynsym was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidProgram);
    CHECK(std::string(e.what()).find("relocations") != std::string::npos);
  }
}
