#include "fabric/placement.h"

#include <gtest/gtest.h>

namespace revis::fabric {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Placement, NoCandidateWhenNoneIsIdleAndCapable) {
  EXPECT_FALSE(choose_node({}).has_value());
  const Clock::time_point t = Clock::now();
  EXPECT_FALSE(choose_node({{true, 0, true, t}, {false, 1, true, t}}).has_value())
      << "busy, or idle but without the tier";
}

TEST(Placement, PrefersLoadedModelThenLongestIdle) {
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point t1 = t0 + std::chrono::seconds(1), t2 = t0 + std::chrono::seconds(2);
  // Idle longest (t0) but model not loaded, against a loaded one.
  EXPECT_EQ(choose_node({{true, 1, false, t0}, {true, 1, true, t2}}), 1u);
  // All loaded: the one idle since the earliest time.
  EXPECT_EQ(choose_node({{true, 1, true, t2}, {true, 1, true, t0}, {true, 1, true, t1}}), 1u);
  // None loaded: still the longest idle.
  EXPECT_EQ(choose_node({{true, 1, false, t1}, {true, 1, false, t2}, {true, 1, false, t0}}), 2u);
  // A busy node idle "since" long ago does not count.
  EXPECT_EQ(choose_node({{true, 0, true, t0}, {true, 1, false, t2}}), 1u);
}

Candidate idle_node(bool loaded, Clock::time_point since, int cached_tokens) {
  return {.capable = true, .free_slots = 1, .loaded = loaded, .idle_since = since, .cached_tokens = cached_tokens};
}

TEST(Placement, PrefersTheLongestCachedPrefixBeforeTheOtherTieBreaks) {
  const Clock::time_point t0 = Clock::now(), t1 = t0 + std::chrono::seconds(1);
  // Recently busy and without its model loaded, but holding 128 prompt tokens.
  EXPECT_EQ(choose_node({idle_node(true, t0, 0), idle_node(false, t1, 128)}), 1u);
  // Longest match wins.
  EXPECT_EQ(choose_node({idle_node(true, t0, 64), idle_node(true, t1, 192), idle_node(true, t0, 128)}), 1u);
  // Equal matches fall back to loaded, then idle longest.
  EXPECT_EQ(choose_node({idle_node(false, t0, 64), idle_node(true, t1, 64)}), 1u);
  EXPECT_EQ(choose_node({idle_node(true, t1, 64), idle_node(true, t0, 64)}), 1u);
  // A node holding the prefix but busy, or without the tier, is no candidate.
  Candidate busy = idle_node(true, t0, 512);
  busy.free_slots = 0;
  Candidate elsewhere = idle_node(true, t0, 512);
  elsewhere.capable = false;
  EXPECT_EQ(choose_node({busy, elsewhere, idle_node(true, t1, 0)}), 2u);
}

// Among equals, the node with more free slots: another machine's memory bus
// beats a second row on a busy one.
TEST(Placement, PrefersMoreFreeSlotsBeforeIdleLongest) {
  const Clock::time_point t0 = Clock::now(), t1 = t0 + std::chrono::seconds(1);
  EXPECT_EQ(choose_node({{true, 1, true, t0}, {true, 4, true, t1}}), 1u);
  EXPECT_EQ(choose_node({{true, 3, true, t1}, {true, 3, true, t0}}), 1u) << "equal slots: idle longest";
  EXPECT_EQ(choose_node({{true, 4, false, t0}, {true, 1, true, t1}}), 1u) << "a loaded model first";
}

TEST(Placement, CachedPrefixTokensIsTheLongestPublishedPrefix) {
  // The prompt's digests name its first 64, 128, 192 tokens.
  const std::vector<std::string> prompt = {"p64", "p128", "p192"};
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {}), 0);
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {"other", "x"}), 0);
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {"p64"}), 64);
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {"zzz", "p128", "p64"}), 128);
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {"p192", "p128", "p64"}), 192);
  // A checkpoint that diverged early still shares its first block.
  EXPECT_EQ(cached_prefix_tokens(prompt, 64, {"q192", "q128", "p64"}), 64);
  EXPECT_EQ(cached_prefix_tokens({}, 64, {"p64"}), 0) << "a prompt shorter than a block";
}

}  // namespace
}  // namespace revis::fabric
