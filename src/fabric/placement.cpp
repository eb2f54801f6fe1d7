#include "fabric/placement.h"

namespace revis::fabric {

std::optional<size_t> choose_node(const std::vector<Candidate>& candidates) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.capable || !c.idle) continue;
    if (!best) {
      best = i;
      continue;
    }
    const Candidate& b = candidates[*best];
    // A loaded model saves seconds of loading; among equals the node idle
    // longest spreads the work and lets recently busy machines cool down.
    if (c.loaded != b.loaded ? c.loaded : c.idle_since < b.idle_since) best = i;
  }
  return best;
}

}  // namespace revis::fabric
