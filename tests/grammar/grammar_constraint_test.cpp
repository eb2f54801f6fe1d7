// Tests for grammar/grammar_constraint.h: the token masks are exactly what
// the grammar allows over a vocabulary of realistic token shapes, and
// random choices among the allowed tokens always give valid JSON.
#include "grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/sample_schemas.h"
#include "support/json_schema_check.h"

namespace revis {
namespace {

using json = nlohmann::json;
using testing::sample_schemas;
using testing::schema_grammar;

// A toy vocabulary with the shapes real ones have: single characters,
// JSON punctuation runs, words with a leading space, digits, characters
// split into their UTF-8 bytes, and white space runs.
std::shared_ptr<const TokenVocabulary> toy_vocabulary() {
  std::vector<std::string> tokens = {""};  // id 0: a control token
  for (int c = 32; c < 127; ++c) tokens.push_back(std::string(1, static_cast<char>(c)));
  for (const char* t : {"{\"", "\":", "\": ", "\", \"", "\",\"", "\"}", "},", "}]", "[{", "[\"", "\"]", ", ",
                        "true", "false", "null", "name", " the", " a", "age", "\n", "\n  ", "  ", "\t", "12", "345",
                        "0.", "-1", "e+", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC", "abc", "\\n", "\\u00", "red",
                        "\"red", "green\"", "--", "2026", "-12-", "e89b"})
    tokens.push_back(t);
  return std::make_shared<const TokenVocabulary>(tokens);
}

// Random choices among the allowed tokens until the output may end (and a
// coin says so) or nothing else is allowed.
std::string random_output(const std::shared_ptr<const Grammar>& g,
                          const std::shared_ptr<const TokenVocabulary>& vocab, uint64_t seed) {
  GrammarConstraint c(g, vocab);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise;
  std::string out;
  std::vector<float> logits(vocab->size());
  for (int step = 0; step < 4000; ++step) {
    for (float& l : logits) l = noise(rng);
    c.mask(logits);
    int best = -1;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i]) && (best < 0 || logits[i] > logits[static_cast<size_t>(best)])) best = static_cast<int>(i);
    if (c.can_end() && (best < 0 || rng() % 4 == 0)) return out;
    EXPECT_GE(best, 0) << "dead end after " << out;
    if (best < 0) return out;
    EXPECT_TRUE(c.accept(best).ok());
    out += vocab->bytes(best);
  }
  ADD_FAILURE() << "no end after 4000 tokens: " << out.substr(0, 200);
  return out;
}

TEST(GrammarConstraint, RandomChoicesAlwaysGiveValidJson) {
  auto vocab = toy_vocabulary();
  int outputs = 0;
  for (const nlohmann::ordered_json& ordered : sample_schemas()) {
    const json schema = json::parse(ordered.dump());
    auto g = schema_grammar(ordered);
    ASSERT_TRUE(g);
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const std::string text = random_output(g, vocab, seed * 7919 + outputs);
      json value;
      try {
        value = json::parse(text);
      } catch (const json::exception& e) {
        ADD_FAILURE() << schema.dump() << "\ndoes not parse: " << text << "\n" << e.what();
        continue;
      }
      std::string why;
      EXPECT_TRUE(testing::schema_accepts(value, schema, schema, &why)) << schema.dump() << "\n" << text << "\n" << why;
      ++outputs;
    }
  }
  EXPECT_EQ(outputs, static_cast<int>(sample_schemas().size()) * 8);
}
TEST(GrammarConstraint, MasksExactlyTheTokensTheGrammarAllows) {
  auto vocab = toy_vocabulary();
  auto g = Grammar::parse(R"(root ::= "caf" "\u00e9" " " [0-9]+)");
  ASSERT_TRUE(g.ok());
  GrammarConstraint c(*g, vocab);
  std::vector<float> logits(vocab->size(), 0.0f);
  auto allowed_now = [&] {
    std::vector<std::string> out;
    std::fill(logits.begin(), logits.end(), 0.0f);
    c.mask(logits);
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i])) out.push_back(vocab->bytes(static_cast<int32_t>(i)));
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(allowed_now(), std::vector<std::string>{"c"});
  ASSERT_TRUE(c.accept(1 + 'c' - 32).ok());
  EXPECT_EQ(allowed_now(), std::vector<std::string>{"a"});
  ASSERT_TRUE(c.accept(1 + 'a' - 32).ok());
  ASSERT_TRUE(c.accept(1 + 'f' - 32).ok());
  // é whole, or its first byte (the second then follows).
  EXPECT_EQ(allowed_now(), (std::vector<std::string>{"\xC3", "\xC3\xA9"}));
  EXPECT_FALSE(c.accept(1 + 'x' - 32).ok());
  EXPECT_FALSE(c.can_end());
  EXPECT_FALSE(c.accept(0).ok());  // a control token, before the end
}


}  // namespace
}  // namespace revis
