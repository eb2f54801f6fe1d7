#include "fabric/placement.h"

#include <gtest/gtest.h>

namespace revis::fabric {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Placement, NoCandidateWhenNoneIsIdleAndCapable) {
  EXPECT_FALSE(choose_node({}).has_value());
  const Clock::time_point t = Clock::now();
  EXPECT_FALSE(choose_node({{true, false, true, t}, {false, true, true, t}}).has_value())
      << "busy, or idle but without the tier";
}

TEST(Placement, PrefersLoadedModelThenLongestIdle) {
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point t1 = t0 + std::chrono::seconds(1), t2 = t0 + std::chrono::seconds(2);
  // Idle longest (t0) but model not loaded, against a loaded one.
  EXPECT_EQ(choose_node({{true, true, false, t0}, {true, true, true, t2}}), 1u);
  // All loaded: the one idle since the earliest time.
  EXPECT_EQ(choose_node({{true, true, true, t2}, {true, true, true, t0}, {true, true, true, t1}}), 1u);
  // None loaded: still the longest idle.
  EXPECT_EQ(choose_node({{true, true, false, t1}, {true, true, false, t2}, {true, true, false, t0}}), 2u);
  // A busy node idle "since" long ago does not count.
  EXPECT_EQ(choose_node({{true, false, true, t0}, {true, true, false, t2}}), 1u);
}

}  // namespace
}  // namespace revis::fabric
