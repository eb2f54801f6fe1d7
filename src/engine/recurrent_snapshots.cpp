#include "engine/recurrent_snapshots.h"

#include <algorithm>

namespace revis {

void RecurrentSnapshots::keep(int position, std::span<const float> state) {
  drop_after(position - 1);
  // The earliest goes first: a resume gains most from the latest positions.
  if (static_cast<int>(kept_.size()) >= kMax) kept_.erase(kept_.begin());
  kept_.push_back({position, std::vector<float>(state.begin(), state.end())});
}

std::span<const float> RecurrentSnapshots::at(int position) const {
  for (const Snapshot& s : kept_)
    if (s.position == position) return s.state;
  return {};
}

int RecurrentSnapshots::latest_at_or_below(int limit) const {
  int best = 0;
  for (const Snapshot& s : kept_)
    if (s.position <= limit) best = s.position;
  return best;
}

void RecurrentSnapshots::drop_after(int position) {
  std::erase_if(kept_, [position](const Snapshot& s) { return s.position > position; });
}

}  // namespace revis
