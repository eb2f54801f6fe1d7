// Malformed tokenizer metadata must give an error Status, never a crash;
// small hand-built vocabularies also pin down the merge rules.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>

#include "tok_test_util.h"
#include "tokenizer/byte_unicode.h"

namespace revis::test {
namespace {

// A tiny but complete byte-level vocabulary: the 256 byte characters, then
// the merges "h e" -> "he", "l l" -> "ll", "he ll" -> "hell", "hell o".
struct BpeSpec {
  std::vector<std::string> tokens;
  std::vector<std::string> merges{"h e", "l l", "he ll", "hell o"};
  std::vector<int32_t> types;
  std::string pre = "gpt-2";
  std::function<void(GgufWriter&)> extra;  // more keys
  bool with_model = true, with_tokens = true, with_merges = true;
  std::optional<uint32_t> eos;  // default: the last token

  BpeSpec() {
    for (int b = 0; b < 256; ++b) tokens.push_back(tok::byte_to_unicode(static_cast<uint8_t>(b)));
    for (const char* t : {"he", "ll", "hell", "hello"}) tokens.push_back(t);
    tokens.push_back("<|endoftext|>");
    types.assign(tokens.size(), 1);
    types.back() = 3;
  }

  Result<std::unique_ptr<Tokenizer>> build() const {
    GgufWriter w;
    if (with_model) w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", pre);
    if (with_tokens) w.str_array("tokenizer.ggml.tokens", tokens);
    w.i32_array("tokenizer.ggml.token_type", types);
    if (with_merges) w.str_array("tokenizer.ggml.merges", merges);
    w.u32("tokenizer.ggml.eos_token_id", eos.value_or(static_cast<uint32_t>(tokens.size() - 1)));
    if (extra) extra(w);
    auto file = w.parse();
    EXPECT_TRUE(file.ok()) << file.status().message();
    if (!file.ok()) return file.status();
    return Tokenizer::from_gguf(*file.value());
  }
};

void expect_error(const BpeSpec& spec, const std::string& needle) {
  auto tok = spec.build();
  ASSERT_FALSE(tok.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
}

TEST(HandBuiltVocab, BpeMergesByRank) {
  BpeSpec spec;
  auto tok = spec.build();
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = *tok.value();
  EXPECT_EQ(t.encode("hello", false, false), std::vector<int32_t>{t.find_token("hello").value()});
  const std::vector<int32_t> hell_x = {t.find_token("hell").value(), t.find_token("x").value()};
  EXPECT_EQ(t.encode("hellx", false, false), hell_x);
  EXPECT_EQ(t.decode(t.encode("hello world\n", false, false)), "hello world\n");
  EXPECT_TRUE(t.warnings().empty());
  // Anything goes through without crashing.
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    (void)t.encode(s, true, true);
  }
}

TEST(HostileMetadata, MissingOrWrongTypedArrays) {
  {
    BpeSpec s;
    s.with_tokens = false;
    expect_error(s, "tokenizer.ggml.tokens is missing");
  }
  {
    BpeSpec s;
    s.with_model = false;
    expect_error(s, "tokenizer.ggml.model is missing");
  }
  {
    BpeSpec s;
    s.with_merges = false;
    expect_error(s, "tokenizer.ggml.merges is missing");
  }
  {
    BpeSpec s;
    s.with_tokens = false;
    s.extra = [](GgufWriter& w) { w.u32("tokenizer.ggml.tokens", 5); };
    auto tok = s.build();
    EXPECT_FALSE(tok.ok());
  }
  {
    BpeSpec s;
    s.tokens.clear();
    s.types.clear();
    s.merges.clear();
    s.extra = [](GgufWriter&) {};
    auto tok = s.build();
    EXPECT_FALSE(tok.ok());
  }
  {
    GgufWriter w;
    w.str("tokenizer.ggml.model", "bert");
    w.str_array("tokenizer.ggml.tokens", {"a"});
    auto file = w.parse();
    ASSERT_TRUE(file.ok());
    auto tok = Tokenizer::from_gguf(*file.value());
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find("not supported"), std::string::npos);
  }
}

TEST(HostileMetadata, ArraysOfTheWrongLength) {
  {
    BpeSpec s;
    s.types.pop_back();
    expect_error(s, "token_type has");
  }
  {
    BpeSpec s;
    s.extra = [](GgufWriter& w) { w.f32_array("tokenizer.ggml.scores", {0.0f, 1.0f}); };
    expect_error(s, "scores has 2 entries");
  }
}

TEST(HostileMetadata, BadMerges) {
  {
    BpeSpec s;
    s.merges.push_back("h zz");
    expect_error(s, "zz is not a token");
  }
  {
    BpeSpec s;
    s.merges.push_back("hello");
    expect_error(s, "expected two tokens");
  }
  {
    BpeSpec s;
    s.merges.push_back("e h");  // both tokens, but "eh" is not
    expect_error(s, "the merged text 'eh' is not a token");
  }
}

TEST(HostileMetadata, TokenIdsOutOfRange) {
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.unknown_token_id",
                        "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    BpeSpec s;
    s.extra = [k](GgufWriter& w) { w.u32(k, 100000); };
    expect_error(s, std::string(k) + " = 100000 is outside the vocabulary");
  }
  {
    BpeSpec s;
    s.eos = static_cast<uint32_t>(s.tokens.size());  // one past the end
    expect_error(s, "eos_token_id = 261 is outside the vocabulary");
  }
  {
    BpeSpec s;
    s.extra = [](GgufWriter& w) { w.i32("tokenizer.ggml.bos_token_id", -1); };
    expect_error(s, "is outside the vocabulary");
  }
}

// A byte-level BPE file that asks for BOS but names none gets llama.cpp's
// fallback id, 11 (DeepSeek's files are such).
TEST(HostileMetadata, BpeBosFallsBackToEleven) {
  BpeSpec s;
  s.extra = [](GgufWriter& w) { w.boolean("tokenizer.ggml.add_bos_token", true); };
  auto tok = s.build();
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_TRUE(tok.value()->add_bos_default());
  EXPECT_EQ(tok.value()->bos(), 11);
  EXPECT_EQ(tok.value()->encode("a", true, false).front(), 11);
}

TEST(HostileMetadata, DuplicatesAndBadByteTokens) {
  {
    BpeSpec s;
    s.tokens.push_back("he");
    s.types.push_back(1);
    expect_error(s, "duplicate token 'he'");
  }
  {
    BpeSpec s;
    s.types[256] = 6;  // "he" typed as BYTE
    expect_error(s, "not of the form <0xNN>");
  }
}

TEST(HostileMetadata, UnknownPreTokenizerFallsBackWithWarning) {
  BpeSpec s;
  s.pre = "no-such-pre";
  auto tok = s.build();
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(tok.value()->pre_tokenizer(), "default");
  ASSERT_EQ(tok.value()->warnings().size(), 1u);
  EXPECT_NE(tok.value()->warnings()[0].find("no-such-pre"), std::string::npos);
  EXPECT_EQ(tok.value()->decode(tok.value()->encode("hello, 123 world", false, false)),
            "hello, 123 world");
}

// SentencePiece vocabularies: scores decide, byte fallback covers the rest.
TEST(HandBuiltVocab, SpmScoresAndByteFallback) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
    scores.push_back(0);
  }
  const std::vector<std::pair<std::string, float>> pieces = {{"\xE2\x96\x81", -1},
                                                             {"a", -1},
                                                             {"b", -1},
                                                             {"c", -1},
                                                             {"ab", -5},
                                                             {"bc", -2},
                                                             {"abc", -3},
                                                             {"\xE2\x96\x81"
                                                              "a",
                                                              -4}};
  for (const auto& [t, s] : pieces) {
    tokens.push_back(t);
    types.push_back(1);
    scores.push_back(s);
  }
  GgufWriter w;
  w.str("tokenizer.ggml.model", "llama");
  w.str_array("tokenizer.ggml.tokens", tokens);
  w.f32_array("tokenizer.ggml.scores", scores);
  w.i32_array("tokenizer.ggml.token_type", types);
  auto file = w.parse();
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(*file.value());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const Tokenizer& t = *tok.value();
  auto id = [&](const std::string& s) { return t.find_token(s).value(); };
  // "▁abc": bc (-2) beats ▁a (-4) and ab (-5); then a+bc = abc (-3) beats
  // ▁a (-4); "▁abc" is no token.
  EXPECT_EQ(t.encode("abc", false, false), (std::vector<int32_t>{id("\xE2\x96\x81"), id("abc")}));
  // Without "c", ▁a (-4) beats ab (-5).
  EXPECT_EQ(t.encode("ab", false, false), (std::vector<int32_t>{id("\xE2\x96\x81"
                                                                   "a"),
                                                                id("b")}));
  // 'x' is not in the vocabulary: byte fallback.
  EXPECT_EQ(t.encode("x", false, false), (std::vector<int32_t>{id("\xE2\x96\x81"), id("<0x78>")}));
  EXPECT_EQ(t.decode(t.encode("xyz abc", false, false)), " xyz abc");
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos_default());

  // Scores of the wrong length, and NaN.
  GgufWriter bad;
  bad.str("tokenizer.ggml.model", "llama");
  bad.str_array("tokenizer.ggml.tokens", tokens);
  bad.f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size() + 3, 0.0f));
  auto bad_file = bad.parse();
  ASSERT_TRUE(bad_file.ok());
  EXPECT_FALSE(Tokenizer::from_gguf(*bad_file.value()).ok());
}

}  // namespace
}  // namespace revis::test
