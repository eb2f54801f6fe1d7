// GrammarConstraint: the generation loop's TokenConstraint
// (include/revis/generate.h) for a grammar over one model's vocabulary.
//
// Contract
//   TokenVocabulary holds the bytes of every token as a trie, built once per
//   model and shared by every constrained request on it. Tokens given as ""
//   (control tokens such as <|im_end|>, whose text is not output) are never
//   allowed by a grammar; the generation loop lets end-of-generation tokens
//   through itself when can_end().
//
//   mask() leaves exactly the tokens whose bytes the grammar allows next
//   (a token may end inside a UTF-8 character when the characters it could
//   become are allowed). accept() advances the grammar by the token's bytes.
//
// Cost
//   A mask walks the trie once, sharing the work of common prefixes, and
//   stops under a prefix the grammar refuses. Grammar states are interned
//   and their transitions cached, and each state's mask is kept, so text
//   that returns to a state (inside a JSON string, between array items)
//   costs one lookup.
//
// Thread-safety
//   TokenVocabulary is immutable and shareable; a GrammarConstraint is
//   per-generation mutable state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "revis/generate.h"

namespace revis {

class TokenVocabulary {
 public:
  // token_bytes[id]: what token id outputs ("" for control tokens).
  explicit TokenVocabulary(std::vector<std::string> token_bytes);
  // The vocabulary of a loaded model: each token's bytes, control and
  // end-of-generation tokens as "", but the `shown` control tokens (those
  // generate() keeps in the output: GenerateOptions::shown_tokens) as their text.
  static std::shared_ptr<const TokenVocabulary> of(const Engine& engine, std::span<const int32_t> shown = {});

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  struct Node {
    uint32_t first_edge = 0, n_edges = 0;    // into edges_
    uint32_t first_token = 0, n_tokens = 0;  // into tokens_: the tokens that end here
  };
  struct Edge {
    uint8_t byte;
    uint32_t node;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
};

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary);

  void mask(std::span<float> logits) override;
  Status accept(int32_t token) override;
  bool can_end() const override;

  // The allowed tokens now, one bit per token id (what mask() applies).
  const std::vector<uint64_t>& allowed();

 private:
  using Stacks = std::vector<GrammarMatcher::Stack>;
  int32_t intern(Stacks stacks);
  int32_t transition(int32_t state, uint32_t code_point);  // -1: refused
  std::vector<uint64_t> walk(int32_t state, const std::string& pending);

  std::shared_ptr<const TokenVocabulary> vocabulary_;
  GrammarMatcher matcher_;
  std::vector<Stacks> states_;
  std::map<Stacks, int32_t> state_ids_;
  std::unordered_map<uint64_t, int32_t> transitions_;          // (state << 21 | code point) -> state
  std::map<std::pair<int32_t, std::string>, std::vector<uint64_t>> masks_;  // (state, pending) -> bits
};

}  // namespace revis
