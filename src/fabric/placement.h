// Where a ticket should run: the dispatch rule of the fabric as one pure
// function, so it can be tested without a network.
//
// Among the nodes that can take the ticket now (they serve its tier with
// the same catalogue, are reachable, and are idle), prefer one that already
// has the tier's model loaded, then the one that has been idle longest
// (least recently busy). The accepting node is one of the candidates.
//
// Thread-safety: pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace revis::fabric {

struct Candidate {
  bool capable = false;  // serves the tier, same catalogue, reachable
  bool idle = false;     // nothing running or waiting there (nor on its way there)
  bool loaded = false;   // the tier's model is loaded there
  std::chrono::steady_clock::time_point idle_since{};  // when it last became idle
};

// Index of the best candidate, or nullopt when none can take the ticket now.
std::optional<size_t> choose_node(const std::vector<Candidate>& candidates);

}  // namespace revis::fabric
