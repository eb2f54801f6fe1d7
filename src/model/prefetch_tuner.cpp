#include "model/prefetch_tuner.h"

#include <algorithm>

namespace revis {
namespace {

constexpr int kTrialTotal = PrefetchTuner::kTrialSteps * static_cast<int>(PrefetchTuner::kModes.size());

// The median of a mode's trial steps: one step slowed by something else
// (another process, a page fault) does not decide.
double median(std::array<double, PrefetchTuner::kTrialSteps> seconds) {
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

const char* prefetch_name(Prefetch how) {
  switch (how) {
    case Prefetch::kIntoL2: return "into_l2";
    case Prefetch::kNonTemporal: return "non_temporal";
    case Prefetch::kNone: return "none";
  }
  return "?";
}

Prefetch PrefetchTuner::mode() const {
  return step_ < kTrialTotal ? kModes[step_ / kTrialSteps] : fastest_;
}

void PrefetchTuner::record(double seconds) {
  if (step_ < kTrialTotal) trial_seconds_[step_ / kTrialSteps][step_ % kTrialSteps] = seconds;
  if (++step_ == kTrialTotal) {
    size_t best = 0;
    for (size_t m = 1; m < kModes.size(); ++m)
      if (median(trial_seconds_[m]) < median(trial_seconds_[best])) best = m;
    fastest_ = kModes[best];
  }
  if (step_ == kTrialTotal + kExploitSteps) step_ = 0;
}

}  // namespace revis
