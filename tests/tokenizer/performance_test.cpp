// Long inputs: 100+ KB texts of every awkward shape encode and decode back
// (a quadratic path in the special-token split, the regexes or the merge
// loops would run into the ctest timeout; speed itself is not asserted in
// unit tests), and concurrent encoding from several threads must agree with
// single-threaded results.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tok_test_util.h"
#include "tokenizer/utf8.h"

namespace revis::test {
namespace {

std::vector<std::pair<std::string, std::string>> long_texts() {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string prose =
      "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village, "
      "\xE6\x8E\xA8\xE8\xAB\x96\xE3\x81\xAF 3.14159 don't <|im_end|> \t\n";
  std::string s;
  while (s.size() < 150000) s += prose;
  out.emplace_back("prose", s);
  out.emplace_back("spaces", std::string(120000, ' ') + "x");
  out.emplace_back("newlines", std::string(120000, '\n'));
  out.emplace_back("one word", std::string(120000, 'a'));
  out.emplace_back("digits", std::string(120000, '7'));
  std::string cjk;
  while (cjk.size() < 120000) cjk += "\xE4\xB8\xAD\xE3\x80\x80";  // 中 + U+3000
  out.emplace_back("cjk", cjk);
  std::mt19937 rng(3);
  std::string noise(120000, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  out.emplace_back("random bytes", noise);
  return out;
}

class LongInput : public ::testing::TestWithParam<std::string> {};

TEST_P(LongInput, Encodes) {
  Loaded l = load(vocab_file(GetParam()));
  ASSERT_TRUE(l.tok);
  for (const auto& [name, text] : long_texts()) {
    const auto ids = l.tok->encode(text, true, true);
    EXPECT_FALSE(ids.empty()) << GetParam() << " / " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, LongInput,
                         ::testing::ValuesIn(vocab_names()), vocab_param_name);

TEST(Concurrency, ThreadsAgree) {
  Loaded l = load(testdata() / "vocab" / "ggml-vocab-deepseek-llm.gguf");
  ASSERT_TRUE(l.tok);
  std::vector<std::string> texts;
  for (int i = 0; i < 32; ++i) {
    texts.push_back("Sample " + std::to_string(i) +
                    ": r\xC3\xA9sum\xC3\xA9, \xE4\xB8\xAD\xE6\x96\x87 " +
                    std::string(static_cast<size_t>(i), '!') + " 12345");
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(l.tok->encode(t, false, false));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (l.tok->encode(texts[i], false, false) != expected[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace revis::test
