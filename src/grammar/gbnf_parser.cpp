// GBNF text into a Grammar (grammar.h's Grammar::parse): a recursive
// descent over rules, alternatives, sequences, groups, repetitions written
// out as generated rules, and character classes.
#include <algorithm>
#include <map>
#include <set>

#include "grammar/grammar.h"

namespace revis {

class GrammarParser {
 public:
  GrammarParser(std::string_view text, const Grammar::Limits& limits) : text_(text), limits_(limits) {}

  Result<std::shared_ptr<const Grammar>> parse(std::string_view root_name) {
    skip_space();
    if (at_end()) return Status::error("grammar: empty (expected at least one rule `root ::= ...`)");
    while (!at_end()) {
      std::string name = read_name();
      if (name.empty()) return fail("a rule name");
      skip_space();
      if (text_.substr(pos_, 3) != "::=") return fail("'::=' after the rule name '" + name + "'");
      pos_ += 3;
      const uint32_t rule = rule_id(name);
      if (defined_.count(rule)) return Status::error("grammar: rule '" + name + "' is defined twice");
      defined_.insert(rule);
      std::vector<uint32_t> alts;
      if (Status s = parse_alternatives(name, &alts); !s.ok()) return s;
      g_->rules_[rule] = std::move(alts);
      skip_space();
    }
    for (uint32_t r = 0; r < g_->names_.size(); ++r)
      if (!defined_.count(r) && !generated_.count(r))
        return Status::error("grammar: rule '" + g_->names_[r] + "' is used but never defined");
    auto root = ids_.find(std::string(root_name));
    if (root == ids_.end() || !defined_.count(root->second))
      return Status::error("grammar: no rule named '" + std::string(root_name) + "' (where output starts)");
    g_->root_ = root->second;
    for (auto& seq : g_->sequences_)
      for (auto& e : seq) normalize_ranges(&e);
    if (Status s = check_left_recursion(); !s.ok()) return s;
    return std::shared_ptr<const Grammar>(std::move(g_));
  }

 private:
  using Element = Grammar::Element;
  using Fragment = std::vector<Element>;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  Status fail(const std::string& expected) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, column = 1;
      else ++column;
    }
    return Status::error("grammar: line " + std::to_string(line) + ", column " + std::to_string(column) +
                         ": expected " + expected);
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string read_name() {
    const size_t start = pos_;
    while (!at_end() && name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a rule definition (`name ::=`) starts here: it ends the sequence
  // before it, so rules need no separator but white space.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(g_->names_.size()));
    if (inserted) {
      g_->names_.push_back(name);
      g_->rules_.emplace_back();
    }
    return it->second;
  }

  uint32_t new_rule(const std::string& base, std::vector<Fragment> alternatives) {
    const std::string name = base + "-" + std::to_string(g_->names_.size());
    const uint32_t id = rule_id(name);
    generated_.insert(id);
    for (Fragment& f : alternatives) {
      g_->rules_[id].push_back(static_cast<uint32_t>(g_->sequences_.size()));
      g_->sequences_.push_back(std::move(f));
    }
    return id;
  }

  static Element ref(uint32_t rule) {
    Element e;
    e.is_rule = true;
    e.rule = rule;
    return e;
  }

  Status parse_alternatives(const std::string& rule_name, std::vector<uint32_t>* out) {
    while (true) {
      Fragment seq;
      if (Status s = parse_sequence(rule_name, &seq); !s.ok()) return s;
      out->push_back(static_cast<uint32_t>(g_->sequences_.size()));
      g_->sequences_.push_back(std::move(seq));
      skip_space();
      if (peek() != '|') return {};
      ++pos_;
    }
  }

  Status parse_sequence(const std::string& rule_name, Fragment* out) {
    while (true) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) return {};
      Fragment item;
      if (Status s = parse_primary(rule_name, &item); !s.ok()) return s;
      if (Status s = parse_repetition(rule_name, std::move(item), out); !s.ok()) return s;
    }
  }

  Status parse_primary(const std::string& rule_name, Fragment* out) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      while (!at_end() && peek() != '"') {
        uint32_t cp;
        if (Status s = read_char(&cp); !s.ok()) return s;
        Element e;
        e.ranges.push_back({cp, cp});
        out->push_back(std::move(e));
      }
      if (at_end()) return fail("'\"' to close the string");
      ++pos_;
      return {};
    }
    if (c == '[') {
      ++pos_;
      Element e;
      if (peek() == '^') e.negated = true, ++pos_;
      while (!at_end() && peek() != ']') {
        uint32_t first, last;
        if (Status s = read_char(&first); !s.ok()) return s;
        last = first;
        if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
          ++pos_;
          if (Status s = read_char(&last); !s.ok()) return s;
          if (last < first) return fail("a range whose end is not below its start");
        }
        e.ranges.push_back({first, last});
      }
      if (at_end()) return fail("']' to close the character class");
      ++pos_;
      out->push_back(std::move(e));
      return {};
    }
    if (c == '.') {
      ++pos_;
      Element any;
      any.negated = true;  // [^] : every character
      out->push_back(std::move(any));
      return {};
    }
    if (c == '(') {
      // Groups are parsed by recursion: their depth is bounded so that no
      // grammar can run the parser off its thread's stack.
      if (nesting_ == limits_.max_nesting)
        return fail("groups nested at most " + std::to_string(limits_.max_nesting) + " deep");
      ++pos_;
      ++nesting_;
      std::vector<uint32_t> alts;
      if (Status s = parse_alternatives(rule_name, &alts); !s.ok()) return s;
      --nesting_;
      skip_space();
      if (peek() != ')') return fail("')' to close the group");
      ++pos_;
      const std::string name = rule_name + "-" + std::to_string(g_->names_.size());
      const uint32_t id = rule_id(name);
      generated_.insert(id);
      g_->rules_[id] = std::move(alts);
      out->push_back(ref(id));
      return {};
    }
    if (name_char(c)) {
      out->push_back(ref(rule_id(read_name())));
      return {};
    }
    return fail("a string, a character class, a rule name or '('");
  }

  Status read_number(int* value) {
    skip_space();
    if (!(peek() >= '0' && peek() <= '9')) return fail("a number");
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      ++pos_;
      if (v > Grammar::kMaxRepetition) return fail("a repetition count of at most " +
                                                   std::to_string(Grammar::kMaxRepetition));
    }
    *value = static_cast<int>(v);
    return {};
  }

  // Applies a following * + ? {m,n} to `item` and appends the result to out.
  Status parse_repetition(const std::string& rule_name, Fragment item, Fragment* out) {
    const char c = peek();
    if (c != '*' && c != '+' && c != '?' && c != '{') {
      out->insert(out->end(), item.begin(), item.end());
      return {};
    }
    int min = 0, max = -1;  // max -1: unbounded
    ++pos_;
    if (c == '+') min = 1;
    if (c == '?') max = 1;
    if (c == '{') {
      if (Status s = read_number(&min); !s.ok()) return s;
      skip_space();
      max = min;
      if (peek() == ',') {
        ++pos_;
        skip_space();
        max = -1;
        if (peek() != '}')
          if (Status s = read_number(&max); !s.ok()) return s;
      }
      skip_space();
      if (peek() != '}') return fail("'}' to close the repetition");
      ++pos_;
      if (max >= 0 && max < min) return fail("a repetition whose maximum is not below its minimum");
    }
    // One element stands for the item (a multi-element literal gets a rule).
    Element unit = item.size() == 1 ? item[0] : ref(new_rule(rule_name, {item}));
    // A repetition is written out: {m,n} becomes about 2n elements. Their
    // total is what a grammar costs in memory, so it is bounded.
    const size_t copies = static_cast<size_t>(min) + (max < 0 ? 1 : 2 * static_cast<size_t>(max - min));
    expanded_ += copies * (1 + unit.ranges.size());
    if (expanded_ > limits_.max_elements)
      return fail("repetitions that expand to at most " + std::to_string(limits_.max_elements) +
                  " elements in all (this grammar's are larger)");
    for (int i = 0; i < min; ++i) out->push_back(unit);
    if (max < 0) {
      // star ::= unit star | (empty)
      const uint32_t star = rule_id(rule_name + "-" + std::to_string(g_->names_.size()));
      generated_.insert(star);
      g_->rules_[star].push_back(static_cast<uint32_t>(g_->sequences_.size()));
      g_->sequences_.push_back({unit, ref(star)});
      g_->rules_[star].push_back(static_cast<uint32_t>(g_->sequences_.size()));
      g_->sequences_.push_back({});
      out->push_back(ref(star));
    } else if (max > min) {
      // Up to (max - min) more, nested so each count has one parse:
      // opt_k ::= unit opt_{k-1} | (empty), opt_1 ::= unit | (empty)
      uint32_t inner = new_rule(rule_name, {{unit}, {}});
      for (int k = 2; k <= max - min; ++k) inner = new_rule(rule_name, {{unit, ref(inner)}, {}});
      out->push_back(ref(inner));
    }
    return {};
  }

  Status read_char(uint32_t* cp) {
    if (at_end()) return fail("a character");
    if (peek() != '\\') {
      size_t p = pos_;
      uint32_t lo, hi;
      if (next_code_point(text_, &p, cp, &lo, &hi) != 1) return fail("valid UTF-8");
      pos_ = p;
      return {};
    }
    ++pos_;
    const char e = peek();
    ++pos_;
    int hex_digits = 0;
    switch (e) {
      case 'n': *cp = '\n'; return {};
      case 't': *cp = '\t'; return {};
      case 'r': *cp = '\r'; return {};
      case '\\': case '"': case '[': case ']': case '-': case '^': *cp = static_cast<uint8_t>(e); return {};
      case 'x': hex_digits = 2; break;
      case 'u': hex_digits = 4; break;
      case 'U': hex_digits = 8; break;
      default: --pos_; return fail("an escape (\\n \\t \\r \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH)");
    }
    uint32_t v = 0;
    for (int i = 0; i < hex_digits; ++i) {
      const char h = peek();
      int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) return fail(std::to_string(hex_digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > 0x10FFFF) return fail("a code point up to U+10FFFF");
    *cp = v;
    return {};
  }

  static void normalize_ranges(Element* e) {
    if (e->is_rule) return;
    auto& r = e->ranges;
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& range : r) {
      if (!merged.empty() && range.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, range.second);
      else
        merged.push_back(range);
    }
    r = std::move(merged);
  }

  // A rule that can reach itself without consuming a character would make
  // the matcher's expansion loop forever: refuse it, naming the rule.
  Status check_left_recursion() const {
    const Grammar& g = *g_;
    const size_t n = g.rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t alt : g.rules_[r]) {
          bool all = true;
          for (const Element& e : g.sequences_[alt])
            if (!e.is_rule || !nullable[e.rule]) {
              all = false;
              break;
            }
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // leftmost[r]: rules that can start r's text.
    std::vector<std::vector<uint32_t>> leftmost(n);
    for (size_t r = 0; r < n; ++r)
      for (uint32_t alt : g.rules_[r])
        for (const Element& e : g.sequences_[alt]) {
          if (!e.is_rule) break;
          leftmost[r].push_back(e.rule);
          if (!nullable[e.rule]) break;
        }
    // A cycle in `leftmost` is left recursion. One depth-first walk with an
    // explicit stack finds it in time linear in the grammar (walking again
    // from every rule was quadratic in a long chain of rules).
    enum : uint8_t { kNew, kOnPath, kDone };
    std::vector<uint8_t> state(n, kNew);
    std::vector<std::pair<uint32_t, size_t>> path;  // a rule, and its next edge to follow
    for (uint32_t start = 0; start < n; ++start) {
      if (state[start] != kNew) continue;
      state[start] = kOnPath;
      path.push_back({start, 0});
      while (!path.empty()) {
        auto& [r, edge] = path.back();
        if (edge == leftmost[r].size()) {
          state[r] = kDone;
          path.pop_back();
          continue;
        }
        const uint32_t next = leftmost[r][edge++];
        if (state[next] == kOnPath)
          return Status::error("grammar: rule '" + g.names_[next] + "' is left-recursive (it can " +
                               "reach itself before matching a character); rewrite it with repetition");
        if (state[next] == kNew) {
          state[next] = kOnPath;
          path.push_back({next, 0});
        }
      }
    }
    return {};
  }

  std::string_view text_;
  const Grammar::Limits limits_;
  size_t pos_ = 0;
  int nesting_ = 0;       // groups open at pos_
  size_t expanded_ = 0;   // elements written out for repetitions so far
  std::unique_ptr<Grammar> g_ = std::make_unique<Grammar>();
  std::map<std::string, uint32_t> ids_;
  std::set<uint32_t> defined_, generated_;
};

Result<std::shared_ptr<const Grammar>> Grammar::parse(std::string_view gbnf, std::string_view root, const Limits& limits) {
  return GrammarParser(gbnf, limits).parse(root);
}

}  // namespace revis
