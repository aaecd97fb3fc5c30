// generate --expect-top: teacher-forced misses told apart into near ties and real misses
// (examples/generate/reference_check.hpp).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "reference_check.hpp"

using reference_check::classify;
using reference_check::parse_top;

TEST_CASE("expect-top: steps and candidates parse; anything else is refused with the step and the piece") {
  const auto top = parse_top("5:12.5,9:12.4375;7:-3,2:-3.25,11:-4");
  REQUIRE(top.size() == 2);
  REQUIRE(top[0].size() == 2);
  CHECK(top[0][1].id == 9);
  CHECK(top[0][1].logit == doctest::Approx(12.4375));
  REQUIRE(top[1].size() == 3);
  CHECK(top[1][0].logit == doctest::Approx(-3.0));
  for (const std::string bad : {"", "5:1;", "5:1,", "5", "5:", ":1", "5:1x", "x5:1", "5:1;;7:2", "5:nan", "5:1,,7:2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_top(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_top("5:1;7:abc"), "--expect-top: step 1: '7:abc' is not id:logit");
}

TEST_CASE("expect-top: a miss is a near tie only within two bf16 steps of eager's own logit") {
  const auto top = parse_top("5:12.5,9:12.4375,3:12.25,4:1");
  // 12.5 - 12.4375 = 0.0625 <= 2^-6 * 12.5 = 0.195: the two are a tie at bf16's precision.
  const auto tie = classify(3, 5, 9, top[0]);
  CHECK(tie.known);
  CHECK(tie.margin == doctest::Approx(0.0625));
  CHECK(tie.near_tie);
  // 12.5 - 1 = 11.5: eager preferred its token clearly, so this is a real miss.
  const auto clear = classify(3, 5, 4, top[0]);
  CHECK(clear.known);
  CHECK_FALSE(clear.near_tie);
  // Small logits: the bound is 2^-6 (the magnitude floor of 1), not 2^-6 * 0.1.
  const auto small = parse_top("1:0.1,2:0.09,3:0.05");
  CHECK(classify(0, 1, 2, small[0]).near_tie);       // 0.01 <= 0.015625
  CHECK_FALSE(classify(0, 1, 3, small[0]).near_tie);  // 0.05 > 0.015625
  // A token outside eager's candidates has no known margin and is never a tie; nor is an expected id missing there.
  const auto outside = classify(7, 5, 42, top[0]);
  CHECK_FALSE(outside.known);
  CHECK_FALSE(outside.near_tie);
  CHECK(outside.step == 7);
  CHECK(outside.got == 42);
  CHECK_FALSE(classify(7, 42, 5, top[0]).near_tie);
}
