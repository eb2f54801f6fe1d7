#include "engine/recurrent_snapshots.h"

#include <algorithm>

namespace revis {

void RecurrentSnapshots::keep(int position, std::span<const float> state) {
  drop_after(position - 1);
  Snapshot snapshot{position, {}};
  // The earliest goes first: a resume gains most from the latest positions.
  // Its memory is reused, so a long prompt's copies are not fresh pages.
  if (static_cast<int>(kept_.size()) >= kMax) {
    snapshot.state = std::move(kept_.front().state);
    kept_.erase(kept_.begin());
  }
  snapshot.state.assign(state.begin(), state.end());
  kept_.push_back(std::move(snapshot));
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
