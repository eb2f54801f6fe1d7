#include "grammar/grammar.h"

#include <algorithm>

namespace revis {

// ---------------------------------------------------------------- UTF-8

int next_code_point(std::string_view bytes, size_t* pos, uint32_t* code_point, uint32_t* lo, uint32_t* hi) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t first = byte(*pos);
  int length;
  uint32_t value;
  if (first < 0x80) {
    *code_point = first;
    *pos += 1;
    return 1;
  } else if (first >= 0xC2 && first <= 0xDF) {
    length = 2, value = first & 0x1F;
  } else if (first >= 0xE0 && first <= 0xEF) {
    length = 3, value = first & 0x0F;
  } else if (first >= 0xF0 && first <= 0xF4) {
    length = 4, value = first & 0x07;
  } else {
    return -1;
  }
  int have = 1;
  for (; have < length && *pos + have < bytes.size(); ++have) {
    const uint8_t b = byte(*pos + have);
    if ((b & 0xC0) != 0x80) return -1;
    // Only the shortest form of a scalar value is UTF-8: no overlong forms
    // (E0 80..9F, F0 80..8F: a space could hide as E0 80 A0), no surrogates
    // (ED A0..BF), nothing above U+10FFFF (F4 90..BF). The detokenizer
    // turns those into U+FFFD, so a grammar must never let them through.
    if (have == 1 && ((first == 0xE0 && b < 0xA0) || (first == 0xED && b > 0x9F) || (first == 0xF0 && b < 0x90) ||
                      (first == 0xF4 && b > 0x8F)))
      return -1;
    value = (value << 6) | (b & 0x3F);
  }
  if (have < length) {
    const int missing_bits = 6 * (length - have);
    const uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    *lo = std::max(value << missing_bits, smallest);
    *hi = std::min((value << missing_bits) | ((1u << missing_bits) - 1), uint32_t{0x10FFFF});
    *pos = bytes.size();
    return 0;
  }
  *code_point = value;
  *pos += length;
  return 1;
}

// ---------------------------------------------------------------- elements

bool Grammar::Element::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [first, last] : ranges)
    if (cp >= first && cp <= last) {
      in = true;
      break;
    }
  return in != negated;
}

bool Grammar::Element::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [first, last] : ranges)
      if (first <= hi && last >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range. The ranges
  // are sorted and merged at parse time, so walk the gaps.
  uint32_t next = lo;
  for (const auto& [first, last] : ranges) {
    if (last < next) continue;
    if (first > next) return true;  // the gap [next, first) is inside [lo, hi]
    if (last >= hi) return false;
    next = last + 1;
  }
  return next <= hi;
}

// ---------------------------------------------------------------- matcher

namespace {

using Stack = GrammarMatcher::Stack;

// A bound on the ways a text can be parsed at once: ambiguous grammars can
// multiply them, and each costs work per character.
constexpr size_t kMaxStacks = 4096;
// How deep the rules that are open at one point of the text may nest.
constexpr size_t kMaxStackDepth = 4096;

// Follows rule references at the top of `stack` until a character class is
// on top (or the stack is empty: the text may end here), adding each result.
// A work list, not recursion: a chain of rules as long as the grammar must
// not run off the thread's stack. Stacks deeper than kMaxStackDepth are
// dropped: output may not nest deeper than that.
void expand(const Grammar& g, Stack stack, std::vector<Stack>* out) {
  std::vector<Stack> todo;
  todo.push_back(std::move(stack));
  while (!todo.empty() && out->size() < kMaxStacks) {
    Stack s = std::move(todo.back());
    todo.pop_back();
    if (s.empty()) {
      out->push_back(std::move(s));
      continue;
    }
    const GrammarMatcher::Position top = s.back();
    const Grammar::Sequence& seq = g.sequence(top.sequence);
    const Grammar::Element& e = seq[top.index];
    if (!e.is_rule) {
      out->push_back(std::move(s));
      continue;
    }
    s.pop_back();
    if (top.index + 1 < seq.size()) s.push_back({top.sequence, top.index + 1});
    if (s.size() >= kMaxStackDepth) continue;
    // No left recursion (checked at parse time), so this ends. Pushed in
    // reverse, so the first alternative is expanded first.
    const std::vector<uint32_t>& alts = g.alternatives(e.rule);
    for (auto alt = alts.rbegin(); alt != alts.rend(); ++alt) {
      Stack next = s;
      if (!g.sequence(*alt).empty()) next.push_back({*alt, 0});
      todo.push_back(std::move(next));
    }
  }
}

void sort_unique(std::vector<Stack>* stacks) {
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
}

const Grammar::Element& top_element(const Grammar& g, const Stack& s) {
  return g.sequence(s.back().sequence)[s.back().index];
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
    Stack s;
    if (!grammar_->sequence(alt).empty()) s.push_back({alt, 0});
    expand(*grammar_, std::move(s), &stacks_);
  }
  sort_unique(&stacks_);
}

std::vector<Stack> GrammarMatcher::advance(const Grammar& g, const std::vector<Stack>& stacks, uint32_t cp) {
  std::vector<Stack> out;
  for (const Stack& s : stacks) {
    if (s.empty() || !top_element(g, s).matches(cp)) continue;
    Stack next = s;
    const Position top = next.back();
    next.pop_back();
    if (top.index + 1 < g.sequence(top.sequence).size()) next.push_back({top.sequence, top.index + 1});
    expand(g, std::move(next), &out);
    if (out.size() >= kMaxStacks) break;
  }
  sort_unique(&out);
  return out;
}

bool GrammarMatcher::any_matches(const Grammar& g, const std::vector<Stack>& stacks, uint32_t lo, uint32_t hi) {
  for (const Stack& s : stacks)
    if (!s.empty() && top_element(g, s).matches_any(lo, hi)) return true;
  return false;
}

namespace {

// Runs `bytes` (after the pending ones) through the stacks; false when the
// grammar refuses them. On success *stacks and *pending hold the new state.
bool step(const Grammar& g, std::vector<Stack>* stacks, std::string* pending, std::string_view bytes) {
  const std::string data = *pending + std::string(bytes);
  size_t pos = 0;
  std::vector<Stack> current = *stacks;
  std::string rest;
  while (pos < data.size()) {
    uint32_t cp = 0, lo = 0, hi = 0;
    const size_t start = pos;
    const int r = next_code_point(data, &pos, &cp, &lo, &hi);
    if (r < 0) return false;
    if (r == 0) {
      if (!GrammarMatcher::any_matches(g, current, lo, hi)) return false;
      rest = data.substr(start);
      break;
    }
    current = GrammarMatcher::advance(g, current, cp);
    if (current.empty()) return false;
  }
  *stacks = std::move(current);
  *pending = std::move(rest);
  return true;
}

}  // namespace

bool GrammarMatcher::accept(std::string_view bytes) { return step(*grammar_, &stacks_, &pending_, bytes); }

bool GrammarMatcher::allows(std::string_view bytes) const {
  std::vector<Stack> stacks = stacks_;
  std::string pending = pending_;
  return step(*grammar_, &stacks, &pending, bytes);
}

bool GrammarMatcher::can_end() const {
  if (!pending_.empty()) return false;
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::can_continue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return !s.empty(); });
}

}  // namespace revis
