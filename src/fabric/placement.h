// Where a ticket should run: the dispatch rule of the fabric as one pure
// function, so it can be tested without a network.
//
// Among the nodes that can take the ticket now (they serve its tier with
// the same catalogue, are reachable, and have a free slot), prefer the one
// whose KV checkpoints hold the longest prefix of the ticket's prompt (it
// skips that much prefill), then one that already has the tier's model
// loaded, then the one with the most free slots (a pass costs a machine
// about the same for one row or several, so spreading the work adds
// machines' bandwidth), then the one that has been idle longest (least
// recently busy). The accepting node is one of the candidates.
//
// Thread-safety: pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace revis::fabric {

struct Candidate {
  bool capable = false;  // serves the tier, same catalogue, reachable
  int free_slots = 0;    // slots neither running nor promised (tickets on their way there); none while jobs wait
  bool loaded = false;   // the tier's model is loaded there
  std::chrono::steady_clock::time_point idle_since{};  // when it last became idle
  int cached_tokens = 0;  // prompt tokens its published KV prefixes hold (cached_prefix_tokens)
};

// Index of the best candidate, or nullopt when none can take the ticket now.
std::optional<size_t> choose_node(const std::vector<Candidate>& candidates);

// How many of the prompt's tokens a node's KV checkpoints hold: the longest
// prefix whose digest it publishes. prompt_digests[i] is the digest of the
// prompt's first (i + 1) x block tokens.
int cached_prefix_tokens(const std::vector<std::string>& prompt_digests, int block,
                         const std::vector<std::string>& published);

}  // namespace revis::fabric
