// Pre-tokenizer splits for the regex lists, including the places where
// llama.cpp's reading of a regex differs from a naive one.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/utf8.h"

namespace revis::tok {
namespace {

std::vector<std::string> split(const char* pre, const std::string& text) {
  auto p = PreTokenizer::create(pre, nullptr);
  EXPECT_TRUE(p.ok()) << p.status().message();
  std::vector<std::string_view> words;
  p.value().split(text, words);
  return {words.begin(), words.end()};
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world  !"), (V{"Hello", " world", " ", " !"}));
  EXPECT_EQ(split("gpt-2", "I'm 12345 ok\n\n"), (V{"I", "'m", " 12345", " ok", "\n\n"}));
  EXPECT_EQ(split("gpt-2", "DON'T"), (V{"DON", "'", "T"}));  // contractions are lowercase only
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "12345 DON'T"), (V{"123", "45", " DON", "'T"}));
  EXPECT_EQ(split("llama-bpe", "a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_EQ(split("llama-bpe", "x   y"), (V{"x", "  ", " y"}));
}

// Gemma 4 merges whole lines (spaces already U+2581): only runs of
// newlines are split off, and "\r" stays inside a line.
TEST(PreTokenizer, Gemma4SplitsNewlineRunsOnly) {
  EXPECT_EQ(split("gemma4", "a b  12,3\n\n\tc\r\n"), (V{"a b  12,3", "\n\n", "\tc\r", "\n"}));
  auto p = PreTokenizer::create("gemma4", nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value().spm_spelling());
  EXPECT_TRUE(p.value().add_bos_default());
  auto gpt2 = PreTokenizer::create("gpt-2", nullptr);
  ASSERT_TRUE(gpt2.ok());
  EXPECT_FALSE(gpt2.value().spm_spelling());
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "abc 123"), (V{"abc", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  // U+3000 (ideographic space) is whitespace, so it is never part of the CJK
  // range [ࠀ-一] even though its code point lies inside it.
  EXPECT_EQ(split("deepseek-llm", "中\xE3\x80\x80文"), (V{"中", "\xE3\x80\x80", "文"}));
  // Trailing whitespace of a piece is split off.
  EXPECT_EQ(split("deepseek-llm", "ab  "), (V{"ab", "  "}));
}

TEST(PreTokenizer, DeepseekV3) {
  // Digits in threes, kana and CJK runs apart from Latin.
  EXPECT_EQ(split("deepseek-v3", "12345"), (V{"123", "45"}));
  EXPECT_EQ(split("deepseek-v3", "これはabc"), (V{"これは", "abc"}));
}

TEST(PreTokenizer, UnknownNameFallsBack) {
  std::vector<std::string> warnings;
  auto p = PreTokenizer::create("brand-new", &warnings);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().name(), "default");
  EXPECT_EQ(warnings.size(), 1u);
}

// Whatever the regexes do, the words must concatenate back to the text.
TEST(PreTokenizer, WordsCoverTheText) {
  std::mt19937 rng(42);
  const std::vector<uint32_t> pool = {
      'a',  'Z',    ' ',    '\n',   '\r',    '\t',  '1',    '\'',   's',    '!',  '$',    0xA0,
      0x85, 0x3000, 0x4E2D, 0xAC00, 0x1F680, 0x300, 0x2028, 0x180E, 0xFF01, 0xE9, 0x212A, 0x1680};
  for (const char* pre : {"default", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                          "falcon", "mpt", "gpt-neox", "starcoder", "refact", "gpt-4o", "tekken",
                          "poro-chat", "dbrx", "chatglm-bpe"}) {
    auto p = PreTokenizer::create(pre, nullptr);
    ASSERT_TRUE(p.ok()) << pre << ": " << p.status().message();
    for (int iter = 0; iter < 300; ++iter) {
      std::string text;
      const int len = static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) append(text, pool[rng() % pool.size()]);
      std::vector<std::string_view> words;
      p.value().split(text, words);
      std::string joined;
      for (auto w : words) {
        EXPECT_FALSE(w.empty()) << pre;
        joined += w;
      }
      ASSERT_EQ(joined, text) << pre;
    }
  }
}

TEST(Utf8, CheckSequence) {
  auto check = [](const std::string& s) {
    return check_sequence(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(check("a"), 1);
  EXPECT_EQ(check("\xC3\xA9"), 2);
  EXPECT_EQ(check("\xE4\xB8\xAD"), 3);
  EXPECT_EQ(check("\xF0\x9F\x9A\x80"), 4);
  EXPECT_EQ(check("\xF0\x9F\x9A"), 0);  // needs one more byte
  EXPECT_EQ(check("\xF0\x9F"
                  "a"),
            -2);  // cut short: maximal subpart F0 9F
  EXPECT_EQ(check("\x80"), -1);
  EXPECT_EQ(check("\xC0\x80"), -1);          // overlong
  EXPECT_EQ(check("\xED\xA0\x80"), -1);      // surrogate
  EXPECT_EQ(check("\xF4\x90\x80\x80"), -1);  // above U+10FFFF
  EXPECT_EQ(sanitize("a\xFF"
                     "b\xE4\xB8"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace revis::tok
