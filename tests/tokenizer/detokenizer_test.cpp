// Streaming detokenizer: whole UTF-8 characters only, held-back partial
// sequences, U+FFFD for bytes that can never form a character.
#include <gtest/gtest.h>

#include "tok_test_util.h"
#include "tokenizer/utf8.h"

namespace revis::test {
namespace {

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const int n = tok::check_sequence(p + i, s.size() - i);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string byte_token(const Tokenizer& tok, int byte) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", byte);
  return buf;
}

TEST(Detokenizer, EmojiSplitOverByteTokensSpm) {
  Loaded l = load(testdata() / "vocab" / "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(l.tok);
  const Tokenizer& tok = *l.tok;
  const std::string rocket = "\xF0\x9F\x9A\x80";  // U+1F680, not in the vocabulary
  std::vector<int32_t> ids;
  for (unsigned char c : rocket) ids.push_back(tok.find_token(byte_token(tok, c)).value());
  // The encoder falls back to exactly these byte tokens (after "▁").
  const auto enc = tok.encode(rocket, false, false);
  ASSERT_EQ(enc.size(), 5u);
  EXPECT_EQ(std::vector<int32_t>(enc.begin() + 1, enc.end()), ids);

  Detokenizer detok(tok);
  EXPECT_EQ(detok.push(ids[0]), "");
  EXPECT_EQ(detok.push(ids[1]), "");
  EXPECT_EQ(detok.push(ids[2]), "");
  EXPECT_EQ(detok.pending_bytes(), 3u);
  EXPECT_EQ(detok.push(ids[3]), rocket);
  EXPECT_EQ(detok.flush(), "");
}

TEST(Detokenizer, ByteLevelStreamNeverEmitsPartialCharacters) {
  Loaded l = load(testdata() / "vocab" / "ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(l.tok);
  const std::string text =
      "Emoji 😶‍🌫️ and 🚀, Japanese 推論はメモリ帯域, math ∑ done";
  const auto ids = l.tok->encode(text, false, false);
  Detokenizer detok(*l.tok);
  std::string joined;
  bool held_back = false;
  for (int32_t id : ids) {
    const std::string out = detok.push(id);
    EXPECT_TRUE(is_valid_utf8(out)) << "partial output for id " << id;
    held_back |= detok.pending_bytes() > 0;
    joined += out;
  }
  joined += detok.flush();
  EXPECT_TRUE(held_back) << "test text should split a character across tokens";
  EXPECT_EQ(joined, text);
}

TEST(Detokenizer, InvalidAndUnfinishedBytesBecomeReplacementCharacters) {
  Loaded l = load(testdata() / "vocab" / "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(l.tok);
  const Tokenizer& tok = *l.tok;
  auto b = [&](int byte) { return tok.find_token(byte_token(tok, byte)).value(); };
  const std::string fffd = "\xEF\xBF\xBD";
  const int32_t a = tok.find_token("a").value();

  Detokenizer detok(tok);
  EXPECT_EQ(detok.push(b(0xFF)), fffd);  // can never start a character
  EXPECT_EQ(detok.push(b(0xF0)), "");
  EXPECT_EQ(detok.push(b(0x9F)), "");
  EXPECT_EQ(detok.push(a), fffd + "a");  // F0 9F cut short: one U+FFFD
  EXPECT_EQ(detok.push(b(0xE3)), "");
  EXPECT_EQ(detok.flush(), fffd);  // unfinished at the end
  EXPECT_EQ(detok.pending_bytes(), 0u);
  EXPECT_EQ(detok.push(b(0xED)), "");
  EXPECT_EQ(detok.push(b(0xA0)), fffd + fffd);  // surrogate: ED alone, then A0
}

TEST(Detokenizer, ControlTokensFollowTheFlag) {
  Loaded l = load(testdata() / "models" / "qwen2-F16.gguf");
  ASSERT_TRUE(l.tok);
  const int32_t im_end = l.tok->find_token("<|im_end|>").value();
  Detokenizer plain(*l.tok);
  Detokenizer special(*l.tok, /*render_special=*/true);
  EXPECT_EQ(plain.push(im_end), "");
  EXPECT_EQ(special.push(im_end), "<|im_end|>");
}

}  // namespace
}  // namespace revis::test
