#include "model/prefetch_tuner.h"

#include <gtest/gtest.h>

#include <map>

namespace revis {
namespace {

// Runs `steps` steps, each taking the time `seconds_of` gives its mode, and
// counts the steps of each mode.
template <typename SecondsOf>
std::map<Prefetch, int> run_steps(PrefetchTuner& tuner, int steps, SecondsOf seconds_of) {
  std::map<Prefetch, int> used;
  for (int i = 0; i < steps; ++i) {
    const Prefetch mode = tuner.mode();
    ++used[mode];
    tuner.record(seconds_of(mode, i));
  }
  return used;
}

constexpr int kCycle = PrefetchTuner::kTrialSteps * 3 + PrefetchTuner::kExploitSteps;

TEST(PrefetchTuner, TriesEveryModeThenKeepsTheFastest) {
  for (Prefetch fastest : PrefetchTuner::kModes) {
    PrefetchTuner tuner;
    const auto used = run_steps(tuner, kCycle, [&](Prefetch mode, int) { return mode == fastest ? 0.020 : 0.025; });
    for (Prefetch mode : PrefetchTuner::kModes)
      EXPECT_EQ(used.at(mode), PrefetchTuner::kTrialSteps + (mode == fastest ? PrefetchTuner::kExploitSteps : 0))
          << static_cast<int>(fastest);
  }
}

TEST(PrefetchTuner, OneSlowStepDoesNotDecide) {
  // The non-temporal mode is faster, but one of its trial steps is slowed
  // by something else: the median of its trials still wins.
  PrefetchTuner tuner;
  int non_temporal_steps = 0;
  const auto used = run_steps(tuner, kCycle, [&](Prefetch mode, int) {
    if (mode != Prefetch::kNonTemporal) return 0.025;
    return ++non_temporal_steps == 2 ? 0.100 : 0.020;
  });
  EXPECT_EQ(used.at(Prefetch::kNonTemporal), PrefetchTuner::kTrialSteps + PrefetchTuner::kExploitSteps);
}

TEST(PrefetchTuner, FollowsAChangeAtTheNextTrials) {
  // Into L2 is faster for the first cycle, no requests after it.
  PrefetchTuner tuner;
  auto seconds = [](Prefetch mode, int step) {
    const Prefetch fastest = step < kCycle ? Prefetch::kIntoL2 : Prefetch::kNone;
    return mode == fastest ? 0.020 : 0.030;
  };
  run_steps(tuner, kCycle, seconds);
  const auto second_cycle = run_steps(tuner, kCycle, [&](Prefetch mode, int step) { return seconds(mode, kCycle + step); });
  EXPECT_EQ(second_cycle.at(Prefetch::kNone), PrefetchTuner::kTrialSteps + PrefetchTuner::kExploitSteps);
  EXPECT_EQ(second_cycle.at(Prefetch::kIntoL2), PrefetchTuner::kTrialSteps);
}

}  // namespace
}  // namespace revis
