// decode(encode(x)) == x: always for byte-level BPE; for SentencePiece up to
// the space encode() puts in front (add_space_prefix).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "tok_test_util.h"
#include "tokenizer/utf8.h"

namespace revis::test {
namespace {

std::vector<std::string> vocab_strings(const std::string& vocab) {
  return split(read_file(vocab_file(vocab).string() + ".inp"),
               "\n__ggml_vocab_test__\n");
}

std::string expected_decode(const Tokenizer& tok, const std::string& text) {
  return tok.add_space_prefix() && !text.empty() ? " " + text : text;
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, VocabTestStrings) {
  Loaded l = load(vocab_file(GetParam()));
  ASSERT_TRUE(l.tok);
  for (const std::string& text : vocab_strings(GetParam())) {
    const auto ids = l.tok->encode(text, false, false);
    EXPECT_EQ(l.tok->decode(ids), expected_decode(*l.tok, text)) << "ids " << ids_to_string(ids);
  }
}

// Random valid UTF-8 (ASCII, Latin, CJK, emoji, odd whitespace) survives.
TEST_P(RoundTrip, RandomUtf8) {
  Loaded l = load(vocab_file(GetParam()));
  ASSERT_TRUE(l.tok);
  std::mt19937 rng(1234);
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0x17F},    {0x370, 0x3FF},     {0x400, 0x4FF},
      {0x3000, 0x303F}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00}, {0x1F300, 0x1F64F}, {0x2000, 0x206F}};
  for (int iter = 0; iter < 200; ++iter) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      tok::append(text, lo + rng() % (hi - lo + 1));
    }
    const auto ids = l.tok->encode(text, false, false);
    ASSERT_EQ(l.tok->decode(ids), expected_decode(*l.tok, text)) << "ids " << ids_to_string(ids);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, RoundTrip,
                         ::testing::ValuesIn(vocab_names()), vocab_param_name);

// The truncated byte-level model vocabularies still hold every byte, so
// prompts round-trip too (BOS renders as nothing: it is a control token).
// Not so the truncated SentencePiece one: it lacks "▁", which then falls back
// to the bytes E2 96 81 and decodes as "▁" (llama.cpp and Hugging Face do
// the same).
TEST(RoundTrip, ModelVocabularies) {
  const auto prompts = nlohmann::json::parse(read_file(testdata() / "golden" / "prompts.json"));
  for (const char* model :
       {"llama-bpe-F16.gguf", "qwen2-F16.gguf", "qwen3-F16.gguf", "qwen3moe-F16.gguf"}) {
    Loaded l = load(testdata() / "models" / model);
    ASSERT_TRUE(l.tok) << model;
    for (const auto& p : prompts) {
      const std::string text = p.at("text").get<std::string>();
      const auto ids = l.tok->encode(text, l.tok->add_bos_default(), false);
      EXPECT_EQ(l.tok->decode(ids), expected_decode(*l.tok, text)) << model;
    }
  }
}

}  // namespace
}  // namespace revis::test
