// The SDK's log handler (aoti_cuda/log.hpp): routing, levels, restoring the
// default, and that shim messages go through it.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "aoti_cuda/log.hpp"
#include "aoti_cuda/shim.h"

namespace {

struct Captured {
  std::vector<std::pair<aoti_cuda::LogLevel, std::string>> lines;
};

// Installs a capturing handler for the scope; restores the previous one.
struct CaptureScope {
  Captured c;
  aoti_cuda::LogHandler prev;
  CaptureScope() {
    prev = aoti_cuda::set_log_handler(
        [this](aoti_cuda::LogLevel l, std::string_view m) { c.lines.emplace_back(l, std::string(m)); });
  }
  ~CaptureScope() {
    aoti_cuda::set_log_handler(prev);
    aoti_cuda::set_log_level(aoti_cuda::LogLevel::kDebug);
  }
};

}  // namespace

TEST_CASE("log: a model library's warning reaches the application's handler") {
  CaptureScope scope;
  aoti_torch_warn("fn", "file.cpp", 7, "odd shape");
  REQUIRE(scope.c.lines.size() == 1);
  CHECK(scope.c.lines[0].first == aoti_cuda::LogLevel::kWarning);
  CHECK(scope.c.lines[0].second == "odd shape (fn at file.cpp:7)");
}

TEST_CASE("log: levels below set_log_level are dropped") {
  CaptureScope scope;
  aoti_cuda::set_log_level(aoti_cuda::LogLevel::kError);
  aoti_cuda::log(aoti_cuda::LogLevel::kWarning, "dropped");
  aoti_cuda::log(aoti_cuda::LogLevel::kError, "kept");
  REQUIRE(scope.c.lines.size() == 1);
  CHECK(scope.c.lines[0].second == "kept");
  CHECK(std::string(aoti_cuda::to_string(aoti_cuda::LogLevel::kError)) == "error");
}

TEST_CASE("log: set_log_handler returns the previous handler; empty restores the default") {
  int first = 0, second = 0;
  aoti_cuda::LogHandler prev = aoti_cuda::set_log_handler([&](aoti_cuda::LogLevel, std::string_view) { ++first; });
  CHECK_FALSE(prev);  // the default is reported as empty
  aoti_cuda::LogHandler mine = aoti_cuda::set_log_handler([&](aoti_cuda::LogLevel, std::string_view) { ++second; });
  REQUIRE(mine);
  aoti_cuda::log(aoti_cuda::LogLevel::kInfo, "x");
  mine(aoti_cuda::LogLevel::kInfo, "y");  // the returned handler is the first one
  CHECK(first == 1);
  CHECK(second == 1);
  // A handler that throws or replaces itself does not break logging.
  aoti_cuda::set_log_handler([](aoti_cuda::LogLevel, std::string_view) {
    aoti_cuda::set_log_handler({});
    throw 1;
  });
  CHECK_NOTHROW(aoti_cuda::log(aoti_cuda::LogLevel::kError, "z"));
  CHECK_FALSE(aoti_cuda::set_log_handler({}));  // it restored the default
}
