// RecurrentSnapshots: copies of a hybrid model's recurrent state (every
// recurrent layer's convolution inputs and delta-net matrices,
// model/kv_cache.h) as it stood after the first `position` tokens of a
// session's history, so that the session can go back to such a position
// and a checkpoint of those tokens can hold the state it needs.
//
// A recurrent state is one block of floats that each token rewrites, not
// rows per position, so it can only be kept whole, at chosen positions:
// the session keeps the ones its owner asks for (Session::keep_recurrent_state:
// the ends of a prompt's prefill chunks), at most kMax, dropping the
// earliest. A copy stays valid while the history before its position is
// unchanged: truncating below it drops it.
//
// Thread-safety: none; part of one Session.
#pragma once

#include <span>
#include <vector>

namespace revis {

class RecurrentSnapshots {
 public:
  // Each copy costs ModelInfo::recurrent_state_bytes; kMax bounds a
  // session's memory for them (docs/kvstore.md has the figures).
  static constexpr int kMax = 4;

  // Keeps `state` as the one at `position` (replacing one kept there).
  void keep(int position, std::span<const float> state);
  // The state kept at exactly `position`; empty when none.
  std::span<const float> at(int position) const;
  // The highest position kept at or below `limit`; 0 when none.
  int latest_at_or_below(int limit) const;
  // Forgets the states kept past `position` (the history there changed).
  void drop_after(int position);
  void clear() { kept_.clear(); }

 private:
  struct Snapshot {
    int position;
    std::vector<float> state;
  };
  std::vector<Snapshot> kept_;  // ascending positions
};

}  // namespace revis
