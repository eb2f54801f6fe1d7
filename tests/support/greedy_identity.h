// Speculative decoding in tests: greedy output with a drafter must be the
// output without one, token for token, on a few prompts of different kinds
// (prose that repeats itself, code, a story opening, Japanese).
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "revis/engine.h"
#include "revis/generate.h"

namespace revis::testing {

inline const char* const kPrompts[] = {
    "Summarize: the cat sat on the mat. The cat sat on the mat because the mat was warm.",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    "Once upon a time",
    "東京は日本の首都です。東京には多くの人が住んでいます。",
};

inline GenerateOptions greedy(int max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  o.ignore_eog = true;
  return o;
}

// Generates every prompt with and without `drafter`; the outputs must be
// equal. Returns the drafted and accepted totals.
inline std::pair<int, int> expect_same_greedy_output(Engine& engine, Drafter& drafter, const GenerateOptions& base) {
  int drafted = 0, accepted = 0;
  auto session = engine.new_session();
  for (const char* text : kPrompts) {
    const std::vector<int32_t> prompt = engine.tokenize(text, engine.add_bos_default(), false);
    auto plain = generate(engine, *session, prompt, base, nullptr);
    EXPECT_TRUE(plain.ok()) << plain.status().message();
    if (!plain.ok()) break;
    const int held = session->n_past();
    GenerateOptions o = base;
    o.drafter = &drafter;
    o.draft_max = 6;
    auto fast = generate(engine, *session, prompt, o, nullptr);
    EXPECT_TRUE(fast.ok()) << fast.status().message();
    if (!fast.ok()) break;
    EXPECT_EQ(fast->generated, plain->generated) << text;
    EXPECT_EQ(fast->text, plain->text) << text;
    EXPECT_EQ(fast->stop_reason, plain->stop_reason) << text;
    EXPECT_EQ(session->n_past(), held) << text << ": the session ends holding what it held without a drafter";
    EXPECT_LE(fast->accepted_tokens, fast->draft_tokens);
    drafted += fast->draft_tokens;
    accepted += fast->accepted_tokens;
  }
  return {drafted, accepted};
}

}  // namespace revis::testing
