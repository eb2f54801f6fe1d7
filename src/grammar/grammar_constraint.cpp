#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace revis {

// ---------------------------------------------------------------- vocabulary

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] || (bytes_[static_cast<size_t>(a)] ==
           bytes_[static_cast<size_t>(b)] && a < b);
  });
  // Builds the subtree of the tokens order[begin, end) that share their first
  // `depth` bytes, breadth by breadth so each node's edges are contiguous.
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  nodes_.push_back({});
  std::vector<Pending> todo{{0, 0, order.size(), 0}};
  for (size_t k = 0; k < todo.size(); ++k) {
    const Pending p = todo[k];
    size_t i = p.begin;
    Node& node = nodes_[p.node];
    node.first_token = static_cast<uint32_t>(tokens_.size());
    while (i < p.end && bytes_[static_cast<size_t>(order[i])].size() == p.depth) tokens_.push_back(order[i++]);
    nodes_[p.node].n_tokens = static_cast<uint32_t>(tokens_.size()) - nodes_[p.node].first_token;
    nodes_[p.node].first_edge = static_cast<uint32_t>(edges_.size());
    while (i < p.end) {
      const uint8_t byte = static_cast<uint8_t>(bytes_[static_cast<size_t>(order[i])][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<uint8_t>(bytes_[static_cast<size_t>(order[j])][p.depth]) == byte) ++j;
      const uint32_t child = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back({});
      edges_.push_back({byte, child});
      todo.push_back({child, i, j, p.depth + 1});
      i = j;
    }
    nodes_[p.node].n_edges = static_cast<uint32_t>(edges_.size()) - nodes_[p.node].first_edge;
  }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::of(const Engine& engine, std::span<const int32_t> shown) {
  std::vector<std::string> bytes(static_cast<size_t>(engine.info().n_vocab));
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!engine.is_end_of_generation(static_cast<int32_t>(id))) bytes[id] = engine.token_bytes(static_cast<int32_t>(id));
  for (int32_t id : shown)
    if (id >= 0 && static_cast<size_t>(id) < bytes.size() && !engine.is_end_of_generation(id))
      bytes[static_cast<size_t>(id)] = engine.token_bytes(id, /*render_control=*/true);
  return std::make_shared<const TokenVocabulary>(std::move(bytes));
}

// ---------------------------------------------------------------- constraint

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocabulary_(std::move(vocabulary)), matcher_(std::move(grammar)) {}

int32_t GrammarConstraint::intern(Stacks stacks) {
  auto [it, inserted] = state_ids_.emplace(std::move(stacks), static_cast<int32_t>(states_.size()));
  if (inserted) states_.push_back(it->first);
  return it->second;
}

int32_t GrammarConstraint::transition(int32_t state, uint32_t code_point) {
  const uint64_t key = (static_cast<uint64_t>(state) << 21) | code_point;
  auto cached = transitions_.find(key);
  if (cached != transitions_.end()) return cached->second;
  Stacks next = GrammarMatcher::advance(matcher_.grammar(), states_[static_cast<size_t>(state)], code_point);
  const int32_t id = next.empty() ? -1 : intern(std::move(next));
  transitions_.emplace(key, id);
  return id;
}

std::vector<uint64_t> GrammarConstraint::walk(int32_t start, const std::string& pending) {
  const auto& nodes = vocabulary_->nodes();
  const auto& edges = vocabulary_->edges();
  const auto& tokens = vocabulary_->tokens();
  std::vector<uint64_t> bits((vocabulary_->size() + 63) / 64, 0);
  // Depth-first over the trie. `partial` holds the bytes of a character that
  // is not complete yet (the pending ones from earlier tokens first).
  struct Frame {
    uint32_t node;
    int32_t state;
    std::string partial;
  };
  std::vector<Frame> todo{{0, start, pending}};
  while (!todo.empty()) {
    Frame f = std::move(todo.back());
    todo.pop_back();
    const TokenVocabulary::Node& node = nodes[f.node];
    for (uint32_t e = node.first_edge; e < node.first_edge + node.n_edges; ++e) {
      std::string partial = f.partial;
      partial.push_back(static_cast<char>(edges[e].byte));
      size_t pos = 0;
      uint32_t cp = 0, lo = 0, hi = 0;
      const int r = next_code_point(partial, &pos, &cp, &lo, &hi);
      int32_t state = f.state;
      if (r < 0) continue;
      if (r == 1) {
        state = transition(f.state, cp);
        if (state < 0) continue;
        partial.clear();
      } else if (!GrammarMatcher::any_matches(matcher_.grammar(), states_[static_cast<size_t>(f.state)], lo, hi)) {
        continue;
      }
      const TokenVocabulary::Node& child = nodes[edges[e].node];
      for (uint32_t t = child.first_token; t < child.first_token + child.n_tokens; ++t) {
        const auto id = static_cast<size_t>(tokens[t]);
        bits[id / 64] |= uint64_t{1} << (id % 64);
      }
      if (child.n_edges) todo.push_back({edges[e].node, state, std::move(partial)});
    }
  }
  return bits;
}

const std::vector<uint64_t>& GrammarConstraint::allowed() {
  const int32_t state = intern(matcher_.stacks());
  auto key = std::make_pair(state, matcher_.pending());
  auto it = masks_.find(key);
  if (it == masks_.end()) {
    // A bound on the memory a long generation can spend on kept masks.
    if (masks_.size() >= 256) masks_.clear();
    it = masks_.emplace(std::move(key), walk(state, matcher_.pending())).first;
  }
  return it->second;
}

void GrammarConstraint::mask(std::span<float> logits) {
  const std::vector<uint64_t>& bits = allowed();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), vocabulary_->size());
  for (size_t id = 0; id < n; ++id)
    if (!(bits[id / 64] >> (id % 64) & 1)) logits[id] = minus_inf;
  for (size_t id = n; id < logits.size(); ++id) logits[id] = minus_inf;
}

Status GrammarConstraint::accept(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size())
    return Status::error("grammar: token " + std::to_string(token) + " is outside the vocabulary");
  const std::string& bytes = vocabulary_->bytes(token);
  if (bytes.empty()) {
    if (matcher_.can_end()) return {};
    return Status::error("grammar: token " + std::to_string(token) + " (a control token) is not allowed here");
  }
  if (!matcher_.accept(bytes))
    return Status::error("grammar: token " + std::to_string(token) + " is not allowed here");
  return {};
}

bool GrammarConstraint::can_end() const { return matcher_.can_end(); }

}  // namespace revis
