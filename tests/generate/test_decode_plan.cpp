// generate --decode-at: the windows planned for chosen cache positions (examples/generate/decode_plan.hpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "decode_plan.hpp"

using decode_plan::plan_decode_windows;
using decode_plan::planned_steps;

TEST_CASE("decode windows: untimed fill up to each position, then the timed steps") {
  // The issue-32 job: 128-token prompt, positions 128, 1024, 4000, 64 steps each, a 4096-position cache.
  const auto plan = plan_decode_windows(128, {128, 1024, 4000}, 64, 4096);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].fill_from == 128);  // right after the prompt: nothing to fill
  CHECK(plan[0].start == 128);
  CHECK(plan[1].fill_from == 192);  // after the first window
  CHECK(plan[1].start == 1024);
  CHECK(plan[2].fill_from == 1088);
  CHECK(plan[2].start == 4000);
  CHECK(plan[2].steps == 64);
  // Step i runs at position 128 + i: the last timed step is at 4063, so 3936 steps in all.
  CHECK(planned_steps(128, plan) == 4063 - 128 + 1);
}

TEST_CASE("decode windows: the last position may end exactly at the cache's end, not past it") {
  CHECK(plan_decode_windows(16, {4032}, 64, 4096).back().start == 4032);
  CHECK_THROWS_AS(plan_decode_windows(16, {4033}, 64, 4096), std::invalid_argument);
  CHECK_NOTHROW(plan_decode_windows(16, {100000}, 64, 0));  // no --max-ctx: not checked here
}

TEST_CASE("decode windows: refused when a position is before the prompt's end or inside the previous window") {
  CHECK_THROWS_AS(plan_decode_windows(128, {64}, 64, 0), std::invalid_argument);
  CHECK_THROWS_AS(plan_decode_windows(128, {1024, 128}, 64, 0), std::invalid_argument);  // descending
  CHECK_THROWS_AS(plan_decode_windows(128, {128, 150}, 64, 0), std::invalid_argument);   // overlapping
  CHECK_NOTHROW(plan_decode_windows(128, {128, 192}, 64, 0));                             // adjacent
  CHECK_THROWS_AS(plan_decode_windows(128, {}, 64, 0), std::invalid_argument);
  CHECK_THROWS_AS(plan_decode_windows(128, {128}, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(plan_decode_windows(0, {128}, 64, 0), std::invalid_argument);
  try {
    plan_decode_windows(128, {128, 150}, 64, 0);
  } catch (const std::invalid_argument& e) {  // the message names the next position that would do
    CHECK(std::string(e.what()).find("192") != std::string::npos);
  }
}
