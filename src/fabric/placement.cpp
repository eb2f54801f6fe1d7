#include "fabric/placement.h"

#include <unordered_set>

namespace revis::fabric {

std::optional<size_t> choose_node(const std::vector<Candidate>& candidates) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.capable || c.free_slots <= 0) continue;
    if (!best) {
      best = i;
      continue;
    }
    const Candidate& b = candidates[*best];
    // Cached prefix tokens are prefill not done again; a loaded model saves
    // seconds of loading; more free slots put another machine's memory bus
    // to work; among equals the node idle longest spreads the work and lets
    // recently busy machines cool down.
    const bool better = c.cached_tokens != b.cached_tokens ? c.cached_tokens > b.cached_tokens
                        : c.loaded != b.loaded             ? c.loaded
                        : c.free_slots != b.free_slots     ? c.free_slots > b.free_slots
                                                           : c.idle_since < b.idle_since;
    if (better) best = i;
  }
  return best;
}

int cached_prefix_tokens(const std::vector<std::string>& prompt_digests, int block,
                         const std::vector<std::string>& published) {
  if (published.empty()) return 0;
  const std::unordered_set<std::string> held(published.begin(), published.end());
  for (size_t n = prompt_digests.size(); n > 0; --n)
    if (held.count(prompt_digests[n - 1])) return static_cast<int>(n) * block;
  return 0;
}

}  // namespace revis::fabric
