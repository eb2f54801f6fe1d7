// PrefetchTuner: picks how a single-token matrix product asks for the
// weight rows ahead of the one it multiplies, by timing decoding steps.
//
// Which request streams fastest depends on the CPU and, on a virtual
// machine, on the minute. Into L2 was the best measured on a Zen 4 (into L1
// there made decoding a third slower than no requests at all); on a Zen 5
// guest a non-temporal request decoded Q8_0 fastest, and while the guest's
// memory ran in its slow state, requests into L2 were 10-15% slower than
// none. So the model tries each mode for a few steps, uses the fastest for
// a while, and tries them all again.
//
// Usage, per single-token step: mode() for the products of the step, then
// record() the step's time. Results never depend on the mode.
#pragma once

#include <array>

namespace revis {

enum class Prefetch { kIntoL2, kNonTemporal, kNone };
// "into_l2", "non_temporal" or "none", for reports.
const char* prefetch_name(Prefetch how);

class PrefetchTuner {
 public:
  // Steps each mode is tried for, and steps the fastest then runs, per cycle.
  static constexpr int kTrialSteps = 3;
  static constexpr int kExploitSteps = 64;
  static constexpr std::array<Prefetch, 3> kModes = {Prefetch::kIntoL2, Prefetch::kNonTemporal, Prefetch::kNone};

  Prefetch mode() const;
  void record(double seconds);

 private:
  // Steps into the current cycle: first kModes.size() trials of
  // kTrialSteps, then kExploitSteps with the fastest.
  int step_ = 0;
  std::array<std::array<double, kTrialSteps>, kModes.size()> trial_seconds_{};
  Prefetch fastest_ = Prefetch::kIntoL2;
};

}  // namespace revis
