// Configuration: the one environment parser (common/env.hpp), TuningOptions
// resolved and checked (runtime/tuning.cpp), and a Module loaded with them
// end to end on the fake model library.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "aoti_cuda/log.hpp"
#include "aoti_cuda/module.hpp"
#include "common/env.hpp"
#include "runtime/tuning.hpp"
#include "runtime/weight_upload.hpp"
#include "shim/allocator.hpp"
#include "shim/op_settings.hpp"
#include "support/affine_program.hpp"
#include "support/fake_module.hpp"

using aoti_cuda::Error;
using aoti_cuda::ErrorCode;
using aoti_cuda::StagingMemory;
using aoti_cuda::TuningOptions;
using aoti_cuda_test::floats;

namespace {

// Sets (or, with nullptr, unsets) an environment variable for the scope; restores it after.
struct EnvVar {
  std::string name, old;
  bool had = false;
  EnvVar(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) {
      had = true;
      old = v;
    }
    if (value != nullptr) {
      ::setenv(n, value, 1);
    } else {
      ::unsetenv(n);
    }
  }
  ~EnvVar() {
    if (had) {
      ::setenv(name.c_str(), old.c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;
};

// Every tuning variable unset for the scope (the machine running the tests may set some).
struct CleanTuningEnv {
  EnvVar vars[10] = {{"AOTI_CUDA_UPLOAD_THREADS", nullptr},  {"AOTI_CUDA_STAGING", nullptr},
                    {"AOTI_CUDA_PAGE_LOCK_WEIGHTS", nullptr}, {"AOTI_CUDA_BLOCK_CACHE_MIB", nullptr},
                    {"AOTI_CUDA_SMALL_COPY", nullptr},       {"AOTI_CUDA_GEMV_MAX_ROWS", nullptr},
                    {"AOTI_CUDA_INT4_DEQUANT_M", nullptr},   {"AOTI_CUDA_CUBLAS_WORKSPACE_MIB", nullptr},
                    {"AOTI_CUDA_DEPENDENT_LAUNCH", nullptr}, {"AOTI_CUDA_ATTENTION_CLUSTER", nullptr}};
};

// Captures the log for the scope.
struct LogCapture {
  std::vector<std::pair<aoti_cuda::LogLevel, std::string>> lines;
  aoti_cuda::LogHandler previous;
  LogCapture() {
    previous = aoti_cuda::set_log_handler(
        [this](aoti_cuda::LogLevel l, std::string_view m) { lines.emplace_back(l, std::string(m)); });
  }
  ~LogCapture() { aoti_cuda::set_log_handler(previous); }
  bool has(aoti_cuda::LogLevel level, const std::string& part) const {
    for (const auto& [l, m] : lines) {
      if (l == level && m.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

// The Error `f` throws (code kInternal with "nothing thrown" when it throws none).
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kInternal, "nothing thrown");
}

}  // namespace

TEST_CASE("env: parse_integer takes exactly an optional '-' and digits, within the range") {
  using aoti_cuda::parse_integer;
  CHECK(parse_integer("12", 0, 100) == 12);
  CHECK(parse_integer("0", 0, 100) == 0);
  CHECK(parse_integer("-3", -5, 5) == -3);
  CHECK(parse_integer("007", 0, 100) == 7);
  CHECK(parse_integer("9223372036854775807", 0, INT64_MAX) == INT64_MAX);
  CHECK(parse_integer("-9223372036854775808", INT64_MIN, 0) == INT64_MIN);
  for (const char* bad : {"", "-", "abc", "12x", "x12", "+4", " 4", "4 ", "0x10", "4.0", "1e3", "--1", "4-",
                          "9223372036854775808", "-9223372036854775809", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_integer(bad, INT64_MIN, INT64_MAX).has_value());
  }
  CHECK_FALSE(parse_integer("101", 0, 100).has_value());
  CHECK_FALSE(parse_integer("-1", 0, 100).has_value());
  CHECK_FALSE(parse_integer("0", 1, 100).has_value());
}

TEST_CASE("env: parse_bool takes 1/0, true/false, on/off, yes/no in any case, nothing else") {
  using aoti_cuda::parse_bool;
  for (const char* on : {"1", "true", "TRUE", "On", "yes", "YES"}) CHECK(parse_bool(on) == true);
  for (const char* off : {"0", "false", "False", "OFF", "no", "No"}) CHECK(parse_bool(off) == false);
  for (const char* bad : {"", "00", "01", "2", "-1", "y", "n", "enable", "true ", " on", "yes please"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_bool(bad).has_value());
  }
}

TEST_CASE("env: a malformed or out-of-range variable is kInvalidArgument naming it and its value") {
  const char* name = "AOTI_CUDA_TEST_ENV_VALUE";
  {
    const EnvVar unset(name, nullptr);
    CHECK_FALSE(aoti_cuda::env_integer(name, 1, 256).has_value());
    CHECK_FALSE(aoti_cuda::env_bool(name).has_value());
    CHECK_FALSE(aoti_cuda::env_choice(name, {"a", "b"}).has_value());
    CHECK_FALSE(aoti_cuda::env_text(name).has_value());
  }
  {
    const EnvVar empty(name, "");  // empty is unset, for every variable
    CHECK_FALSE(aoti_cuda::env_integer(name, 1, 256).has_value());
    CHECK_FALSE(aoti_cuda::env_text(name).has_value());
  }
  {
    const EnvVar good(name, "16");
    CHECK(aoti_cuda::env_integer(name, 1, 256) == 16);
    CHECK(aoti_cuda::env_text(name) == std::string("16"));
  }
  for (const char* bad : {"abc", "12x", "-1", "0", "257", " 8"}) {
    CAPTURE(bad);
    const EnvVar v(name, bad);
    const Error e = error_of([&] { (void)aoti_cuda::env_integer(name, 1, 256); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find(std::string(name) + "='" + bad + "'") != std::string::npos);
    CHECK(std::string(e.what()).find("an integer from 1 to 256") != std::string::npos);
  }
  {
    const EnvVar v(name, "maybe");
    const Error e = error_of([&] { (void)aoti_cuda::env_bool(name); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("AOTI_CUDA_TEST_ENV_VALUE='maybe'") != std::string::npos);
  }
  {
    const EnvVar v(name, "b");
    CHECK(aoti_cuda::env_choice(name, {"a", "b"}) == 1u);
  }
  {
    const EnvVar v(name, "B");  // choices are exact
    const Error e = error_of([&] { (void)aoti_cuda::env_choice(name, {"a", "b"}); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("'B' is invalid: expected one of a, b") != std::string::npos);
  }
}

TEST_CASE("env: a diagnostic switch with an invalid value stays off and says so once") {
  const char* name = "AOTI_CUDA_TEST_ENV_FLAG";
  const std::vector<std::pair<const char*, bool>> valid = {{nullptr, false}, {"", false},   {"0", false},
                                                           {"1", true},      {"yes", true}, {"OFF", false}};
  for (const auto& [value, on] : valid) {
    CAPTURE((value != nullptr ? value : "(unset)"));
    const EnvVar v(name, value);
    LogCapture log;
    CHECK(aoti_cuda::env_flag(name) == on);
    CHECK(log.lines.empty());
  }
  const EnvVar v(name, "01");
  LogCapture log;
  CHECK_FALSE(aoti_cuda::env_flag(name));
  CHECK_FALSE(aoti_cuda::env_flag(name));
  REQUIRE(log.lines.size() == 1);  // once per variable and value
  CHECK(log.has(aoti_cuda::LogLevel::kWarning, "AOTI_CUDA_TEST_ENV_FLAG='01' is invalid"));
  CHECK(log.has(aoti_cuda::LogLevel::kWarning, "stays off"));
}

TEST_CASE("env: env_integer_or_warn reads an invalid value as unset and logs it") {
  const char* name = "AOTI_CUDA_TEST_ENV_WARN";
  {
    const EnvVar v(name, "3");
    CHECK(aoti_cuda::env_integer_or_warn(name, 0, 5) == 3);
  }
  const EnvVar v(name, "6");
  LogCapture log;
  CHECK_FALSE(aoti_cuda::env_integer_or_warn(name, 0, 5).has_value());
  CHECK(log.has(aoti_cuda::LogLevel::kWarning,
                "AOTI_CUDA_TEST_ENV_WARN='6' is invalid: expected an integer from 0 to 5"));
}

TEST_CASE("tuning: defaults when nothing is set") {
  const CleanTuningEnv clean;
  const TuningOptions r = aoti_cuda::resolve_tuning({});
  CHECK(r.upload_threads == aoti_cuda::runtime::default_upload_threads());
  CHECK(r.staging == StagingMemory::kHugePages);
  CHECK(r.page_lock_weights == false);
  CHECK(r.block_cache_mib == 1024u);
  CHECK(r.small_copy_kernels == true);
  CHECK(r.gemv_max_rows == 1);
  CHECK(r.int4_dequant_min_m == 65);
  CHECK(r.cublas_workspace_mib == 32u);
  CHECK(r.dependent_launch == true);  // measured faster in a decode step (OpSettings)
  CHECK(r.attention_cluster == aoti_cuda::kAttentionClusterAuto);  // by the cache length (decode_attention.hpp)
  // The shims' built-in defaults (outside any Module call) are the same.
  const aoti_cuda::shim::OpSettings from_tuning = aoti_cuda::runtime::op_settings_of(r), builtin;
  CHECK(from_tuning.gemv_max_rows == builtin.gemv_max_rows);
  CHECK(from_tuning.int4_dequant_min_m == builtin.int4_dequant_min_m);
  CHECK(from_tuning.cublas_workspace_bytes == builtin.cublas_workspace_bytes);
  CHECK(from_tuning.dependent_launch == builtin.dependent_launch);
  CHECK(from_tuning.attention_cluster == builtin.attention_cluster);
  CHECK(aoti_cuda::runtime::block_cache_bytes(r) == aoti_cuda::shim::BlockCache::kDefaultCapacity);
}

TEST_CASE("tuning: the variables fill unset fields; a set field wins and the variable is reported") {
  const CleanTuningEnv clean;
  const EnvVar threads("AOTI_CUDA_UPLOAD_THREADS", "5");
  const EnvVar staging("AOTI_CUDA_STAGING", "wc");
  const EnvVar lock("AOTI_CUDA_PAGE_LOCK_WEIGHTS", "on");
  const EnvVar cache("AOTI_CUDA_BLOCK_CACHE_MIB", "0");
  const EnvVar copy("AOTI_CUDA_SMALL_COPY", "dma");
  const EnvVar rows("AOTI_CUDA_GEMV_MAX_ROWS", "8");
  const EnvVar int4("AOTI_CUDA_INT4_DEQUANT_M", "0");
  const EnvVar ws("AOTI_CUDA_CUBLAS_WORKSPACE_MIB", "4096");
  const EnvVar pdl("AOTI_CUDA_DEPENDENT_LAUNCH", "off");  // the default is on: the variable must turn it off
  const EnvVar cluster("AOTI_CUDA_ATTENTION_CLUSTER", "16");
  const TuningOptions r = aoti_cuda::resolve_tuning({});
  CHECK(r.upload_threads == 5);
  CHECK(r.staging == StagingMemory::kWriteCombined);
  CHECK(r.page_lock_weights == true);
  CHECK(r.block_cache_mib == 0u);
  CHECK(r.small_copy_kernels == false);
  CHECK(r.gemv_max_rows == 8);
  CHECK(r.int4_dequant_min_m == 0);
  CHECK(r.cublas_workspace_mib == 4096u);
  CHECK(r.dependent_launch == false);
  CHECK(r.attention_cluster == 16);
  const aoti_cuda::shim::OpSettings ops = aoti_cuda::runtime::op_settings_of(r);
  CHECK(ops.gemv_max_rows == 8);
  CHECK(ops.int4_dequant_min_m == 0);
  CHECK(ops.cublas_workspace_bytes == (std::size_t{4096} << 20));
  CHECK(ops.dependent_launch == false);
  CHECK(ops.attention_cluster == 16);
  const aoti_cuda::runtime::StagedUploadOptions up = aoti_cuda::runtime::upload_options(r);
  CHECK(up.threads == 5);
  CHECK(up.memory == StagingMemory::kWriteCombined);

  TuningOptions set;
  set.upload_threads = 2;
  set.staging = StagingMemory::kHostAlloc;
  set.gemv_max_rows = 8;  // equal to the variable: nothing to report
  set.dependent_launch = true;
  set.attention_cluster = 8;
  LogCapture log;
  const TuningOptions mixed = aoti_cuda::resolve_tuning(set);
  CHECK(mixed.upload_threads == 2);
  CHECK(mixed.staging == StagingMemory::kHostAlloc);
  CHECK(mixed.gemv_max_rows == 8);
  CHECK(mixed.cublas_workspace_mib == 4096u);  // unset: the variable
  CHECK(mixed.dependent_launch == true);
  CHECK(mixed.attention_cluster == 8);
  CHECK(log.has(aoti_cuda::LogLevel::kInfo,
                "AOTI_CUDA_ATTENTION_CLUSTER=16 is not used: LoadOptions::tuning.attention_cluster"));
  CHECK(log.has(aoti_cuda::LogLevel::kInfo,
                "AOTI_CUDA_DEPENDENT_LAUNCH=off is not used: LoadOptions::tuning.dependent_launch"));
  CHECK(log.has(aoti_cuda::LogLevel::kInfo,
                "AOTI_CUDA_UPLOAD_THREADS=5 is not used: LoadOptions::tuning.upload_threads"));
  CHECK(log.has(aoti_cuda::LogLevel::kInfo, "AOTI_CUDA_STAGING=wc is not used: LoadOptions::tuning.staging"));
  CHECK_FALSE(log.has(aoti_cuda::LogLevel::kInfo, "AOTI_CUDA_GEMV_MAX_ROWS"));
}

TEST_CASE("tuning: attention_cluster's auto comes from the variable as 'auto' and from the field as -1") {
  const CleanTuningEnv clean;
  {
    const EnvVar cluster("AOTI_CUDA_ATTENTION_CLUSTER", "0");
    CHECK(aoti_cuda::resolve_tuning({}).attention_cluster == 0);  // the two-kernel form, asked for
    TuningOptions t;
    t.attention_cluster = aoti_cuda::kAttentionClusterAuto;
    LogCapture log;
    CHECK(aoti_cuda::resolve_tuning(t).attention_cluster == aoti_cuda::kAttentionClusterAuto);
    CHECK(log.has(aoti_cuda::LogLevel::kInfo,
                  "AOTI_CUDA_ATTENTION_CLUSTER=0 is not used: LoadOptions::tuning.attention_cluster"));
  }
  const EnvVar cluster("AOTI_CUDA_ATTENTION_CLUSTER", "auto");
  const TuningOptions r = aoti_cuda::resolve_tuning({});
  CHECK(r.attention_cluster == aoti_cuda::kAttentionClusterAuto);
  CHECK(aoti_cuda::runtime::op_settings_of(r).attention_cluster == aoti_cuda::shim::OpSettings::kClusterAuto);
  TuningOptions t;
  t.attention_cluster = 8;
  LogCapture log;
  CHECK(aoti_cuda::resolve_tuning(t).attention_cluster == 8);
  CHECK(log.has(aoti_cuda::LogLevel::kInfo,
                "AOTI_CUDA_ATTENTION_CLUSTER=auto is not used: LoadOptions::tuning.attention_cluster"));
}

TEST_CASE("tuning: every variable's bad values are kInvalidArgument naming the variable and the value") {
  const CleanTuningEnv clean;
  const std::vector<std::pair<const char*, std::vector<const char*>>> cases = {
      {"AOTI_CUDA_UPLOAD_THREADS", {"abc", "12x", "-1", "0", "257", "4.0"}},
      {"AOTI_CUDA_STAGING", {"bogus", "HUGE", "huge "}},
      {"AOTI_CUDA_PAGE_LOCK_WEIGHTS", {"2", "enable"}},
      {"AOTI_CUDA_BLOCK_CACHE_MIB", {"-1", "1048577", "1G"}},
      {"AOTI_CUDA_SMALL_COPY", {"memcpy", "1"}},
      {"AOTI_CUDA_GEMV_MAX_ROWS", {"9", "-1", "one"}},
      {"AOTI_CUDA_INT4_DEQUANT_M", {"-5", "2147483648", "65k"}},
      {"AOTI_CUDA_CUBLAS_WORKSPACE_MIB", {"4097", "-32", "32MiB"}},
      {"AOTI_CUDA_DEPENDENT_LAUNCH", {"2", "pdl"}},
      {"AOTI_CUDA_ATTENTION_CLUSTER", {"4", "32", "on", "-8", "-1", "AUTO"}}};
  for (const auto& [name, values] : cases) {
    for (const char* value : values) {
      CAPTURE(name);
      CAPTURE(value);
      const EnvVar v(name, value);
      const Error e = error_of([] { (void)aoti_cuda::resolve_tuning({}); });
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(e.what()).find(std::string(name) + "='" + value + "' is invalid") != std::string::npos);
    }
  }
  // Checked even when the field is set (the variable is read at every load).
  const EnvVar v("AOTI_CUDA_UPLOAD_THREADS", "12x");
  TuningOptions t;
  t.upload_threads = 4;
  CHECK(error_of([&] { (void)aoti_cuda::resolve_tuning(t); }).code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("tuning: a field out of range is kInvalidArgument naming the field and its value") {
  const CleanTuningEnv clean;
  auto expect_invalid = [](const TuningOptions& t, const std::string& text) {
    const Error e = error_of([&] { (void)aoti_cuda::resolve_tuning(t); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
  };
  TuningOptions t;
  t.upload_threads = 0;
  expect_invalid(t, "LoadOptions::tuning.upload_threads = 0 is invalid: expected an integer from 1 to 256");
  t = {};
  t.upload_threads = -4;
  expect_invalid(t, "LoadOptions::tuning.upload_threads = -4");
  t = {};
  t.block_cache_mib = (std::size_t{1} << 20) + 1;
  expect_invalid(t, "LoadOptions::tuning.block_cache_mib = 1048577");
  t = {};
  t.gemv_max_rows = 9;
  expect_invalid(t, "LoadOptions::tuning.gemv_max_rows = 9 is invalid: expected an integer from 0 to 8");
  t = {};
  t.int4_dequant_min_m = -1;
  expect_invalid(t, "LoadOptions::tuning.int4_dequant_min_m = -1");
  t = {};
  t.cublas_workspace_mib = 4097;
  expect_invalid(t, "LoadOptions::tuning.cublas_workspace_mib = 4097");
  for (int bad : {-8, -2, 1, 4, 12, 32}) {
    t = {};
    t.attention_cluster = bad;
    expect_invalid(t, "LoadOptions::tuning.attention_cluster = " + std::to_string(bad) +
                          " is invalid: expected -1 (kAttentionClusterAuto), 0, 8 or 16");
  }
  t = {};
  t.staging = static_cast<StagingMemory>(7);
  expect_invalid(t, "LoadOptions::tuning.staging = 7 is invalid");
  // The edges of every range are valid.
  t = {};
  t.upload_threads = 256;
  t.block_cache_mib = 0;
  t.gemv_max_rows = 0;
  t.int4_dequant_min_m = 2147483647;
  t.cublas_workspace_mib = 0;
  CHECK_NOTHROW((void)aoti_cuda::resolve_tuning(t));
  CHECK(std::string(aoti_cuda::to_string(StagingMemory::kWriteCombined)) == "wc");
}

TEST_CASE("tuning: the operator shims read the settings of the innermost scope on their thread") {
  using aoti_cuda::shim::op_settings;
  using aoti_cuda::shim::OpSettings;
  using aoti_cuda::shim::OpSettingsScope;
  CHECK(op_settings().gemv_max_rows == OpSettings{}.gemv_max_rows);
  OpSettings a, b;
  a.int4_dequant_min_m = 7;
  b.int4_dequant_min_m = 0;
  {
    const OpSettingsScope outer(&a);
    CHECK(op_settings().int4_dequant_min_m == 7);
    {
      const OpSettingsScope inner(&b);
      CHECK(op_settings().int4_dequant_min_m == 0);
    }
    CHECK(op_settings().int4_dequant_min_m == 7);
    int seen_elsewhere = -1;
    std::thread([&] { seen_elsewhere = static_cast<int>(op_settings().int4_dequant_min_m); }).join();
    CHECK(seen_elsewhere == 65);  // another thread: the defaults
  }
  CHECK(op_settings().int4_dequant_min_m == 65);
}

TEST_CASE("module(fake): LoadOptions::tuning is checked at load and reported by Module::tuning()") {
  const CleanTuningEnv clean;
  aoti_cuda_test::AffineProgram prog;
  aoti_cuda::LoadOptions o;
  o.device = aoti_cuda::Device::cpu();
  o.num_models = 2;
  o.tuning.upload_threads = 3;
  o.tuning.block_cache_mib = 0;
  o.tuning.gemv_max_rows = 4;
  {
    aoti_cuda::Module m(prog.pte, o);
    const TuningOptions t = m.tuning();
    CHECK(t.upload_threads == 3);
    CHECK(t.block_cache_mib == 0u);
    CHECK(t.gemv_max_rows == 4);
    CHECK(t.staging == StagingMemory::kHugePages);  // unset: the default
    CHECK(t.int4_dequant_min_m == 65);
    // Calls run as before (the settings are installed around each).
    const std::vector<float> ones = {1, 1, 1, 1}, zeros = {0, 0, 0, 0};
    aoti_cuda::Tensor x = aoti_cuda::Tensor::empty({1, 4}, aoti_cuda::DType::kFloat32);
    aoti_cuda::Tensor y = aoti_cuda::Tensor::empty({1, 4}, aoti_cuda::DType::kFloat32);
    std::copy(ones.begin(), ones.end(), x.data_ptr<float>());
    std::copy(zeros.begin(), zeros.end(), y.data_ptr<float>());
    const std::vector<aoti_cuda::Tensor> out = m.forward({x, y});
    REQUIRE(out.size() == 2);
    CHECK(floats(out[0]) == aoti_cuda_test::affine_weights());
  }
  {  // The model's operators see the Module's settings: read inside Run, from a warning the model logs there.
    aoti_cuda::Module m(prog.pte, o);
    aoti_cuda::Tensor x = aoti_cuda::Tensor::empty({1, 4}, aoti_cuda::DType::kFloat32);
    aoti_cuda::Tensor y = aoti_cuda::Tensor::empty({1, 4}, aoti_cuda::DType::kFloat32);
    std::fill(x.data_ptr<float>(), x.data_ptr<float>() + 4, 1.0f);
    std::fill(y.data_ptr<float>(), y.data_ptr<float>() + 4, -779.0f);
    int rows_inside = -1;
    const aoti_cuda::LogHandler previous = aoti_cuda::set_log_handler([&](aoti_cuda::LogLevel, std::string_view msg) {
      if (msg.find("b[0] = -779") != std::string_view::npos) rows_inside = aoti_cuda::shim::op_settings().gemv_max_rows;
    });
    (void)m.forward({x, y});
    aoti_cuda::set_log_handler(previous);
    CHECK(rows_inside == 4);
    CHECK(aoti_cuda::shim::op_settings().gemv_max_rows == 1);  // outside the call: the defaults again
  }
  {  // A variable fills what the options leave unset.
    const EnvVar rows("AOTI_CUDA_INT4_DEQUANT_M", "128");
    aoti_cuda::Module m(prog.pte, o);
    CHECK(m.tuning().int4_dequant_min_m == 128);
  }
  {  // A bad field fails the load, naming it.
    aoti_cuda::LoadOptions bad = o;
    bad.tuning.gemv_max_rows = 9;
    const Error e = error_of([&] { aoti_cuda::Module m(prog.pte, bad); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("LoadOptions::tuning.gemv_max_rows = 9") != std::string::npos);
    aoti_cuda::Program p = aoti_cuda::Program::open(prog.pte);
    CHECK(error_of([&] { aoti_cuda::Module m(std::move(p), bad); }).code() == ErrorCode::kInvalidArgument);
  }
  for (const char* value : {"abc", "12x", "-1", "300"}) {  // a bad variable too, naming it and its value
    CAPTURE(value);
    const EnvVar threads("AOTI_CUDA_UPLOAD_THREADS", value);
    aoti_cuda::LoadOptions plain;
    plain.device = aoti_cuda::Device::cpu();
    const Error e = error_of([&] { aoti_cuda::Module m(prog.pte, plain); });
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find(std::string("AOTI_CUDA_UPLOAD_THREADS='") + value + "'") != std::string::npos);
    // Before any file is read: a missing program is not what is reported.
    CHECK(error_of([&] { aoti_cuda::Module m(prog.dir + "/missing.pte", plain); }).code() ==
          ErrorCode::kInvalidArgument);
  }
}
