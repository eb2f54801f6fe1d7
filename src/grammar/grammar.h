// Grammars for constrained decoding, in GBNF (the notation llama.cpp's
// `grammar` field takes).
//
// Contract
//   Grammar::parse() reads GBNF text: rules `name ::= alternatives`, string
//   literals "..." with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes,
//   character classes [a-z] and [^...], rule references, groups ( ), the
//   repetitions * + ? {m} {m,} {m,n}, and `#` comments. The rule named
//   `root` (or the one the caller names) is where output starts. Undefined
//   rules, left recursion (which would loop without consuming input) and
//   repetition counts above kMaxRepetition are errors that name the rule;
//   so are groups nested and repetitions expanded past Grammar::Limits.
//
//   A GrammarMatcher holds the parse state of one output: the set of ways
//   the text so far can continue (a set of stacks of grammar positions, the
//   usual pushdown-automaton reading of a context-free grammar). accept()
//   advances it by bytes, which may end inside a UTF-8 character (tokens
//   split characters); can_end() says whether the text so far is a complete
//   sentence of the grammar; allows() whether some bytes could come next.
//   Rules open at one point of the text nest at most 4096 deep: a way on
//   that would nest deeper is not taken.
//
// Thread-safety
//   A Grammar is immutable after parse() and may be shared between threads.
//   A GrammarMatcher is per-output mutable state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

namespace revis {

// What one grammar may cost: groups `( )` nested at most max_nesting deep
// (the parser recurses on them), and repetitions written out into at most
// max_elements elements (and character ranges) in all. Past either,
// Grammar::parse() fails naming the limit; its time is linear in the text.
struct GrammarLimits {
  int max_nesting = 256;
  size_t max_elements = 1'000'000;
};

class Grammar {
 public:
  static constexpr int kMaxRepetition = 10000;
  using Limits = GrammarLimits;

  static Result<std::shared_ptr<const Grammar>> parse(std::string_view gbnf, std::string_view root = "root",
                                                      const Limits& limits = {});

  // One element of a sequence: a character class or a reference to a rule.
  struct Element {
    bool is_rule = false;
    uint32_t rule = 0;                                  // is_rule
    bool negated = false;                               // [^...]
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
    bool matches(uint32_t code_point) const;
    // Whether some code point in [lo, hi] matches (for a partial character).
    bool matches_any(uint32_t lo, uint32_t hi) const;
  };
  using Sequence = std::vector<Element>;

  uint32_t root() const { return root_; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return rules_[rule]; }
  const Sequence& sequence(uint32_t id) const { return sequences_[id]; }
  size_t n_rules() const { return rules_.size(); }

 private:
  friend class GrammarParser;
  std::vector<std::string> names_;             // per rule
  std::vector<std::vector<uint32_t>> rules_;   // per rule: its alternatives (sequence ids)
  std::vector<Sequence> sequences_;
  uint32_t root_ = 0;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Advances over bytes; false (and the state unchanged) when the grammar
  // does not allow them here.
  bool accept(std::string_view bytes);
  // Whether `bytes` could come next (the state unchanged).
  bool allows(std::string_view bytes) const;
  bool can_end() const;
  // Whether anything at all may follow (false once the only way on is to end).
  bool can_continue() const;

  // A position in the grammar: element `index` of sequence `sequence`.
  struct Position {
    uint32_t sequence;
    uint32_t index;
    bool operator==(const Position&) const = default;
    auto operator<=>(const Position&) const = default;
  };
  using Stack = std::vector<Position>;  // the innermost rule on top (back)

  // The state, for callers that cache work per state: the stacks (sorted,
  // each with a character class on top, or empty for "complete") and the
  // bytes of a character not finished yet.
  const std::vector<Stack>& stacks() const { return stacks_; }
  const std::string& pending() const { return pending_; }

  // Low-level stepping used by accept() and by vocabulary walks:
  // the stacks after one more code point, or after a partial character
  // whose possible code points span [lo, hi] (kept as is, only checked).
  static std::vector<Stack> advance(const Grammar& g, const std::vector<Stack>& stacks, uint32_t code_point);
  static bool any_matches(const Grammar& g, const std::vector<Stack>& stacks, uint32_t lo, uint32_t hi);

  const Grammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  std::string pending_;  // an incomplete UTF-8 character's bytes
};

// UTF-8 stepping shared by the matcher and the vocabulary walk.
// Decodes the next character of `bytes` from `*pos`: returns 1 and the code
// point when complete, 0 when `bytes` ends inside it (then *lo..*hi span the
// code points it could still become), -1 for malformed bytes.
int next_code_point(std::string_view bytes, size_t* pos, uint32_t* code_point, uint32_t* lo, uint32_t* hi);

}  // namespace revis
