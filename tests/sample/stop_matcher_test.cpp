// Tests for sample/stop_matcher.h: stops split across pieces, several stop
// strings, near misses that are released, finish(), UTF-8 around the stop,
// and a randomized comparison against a whole-string reference.
#include "sample/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sample/sampler.h"  // Rng, for the randomized test

namespace revis {
namespace {

// True if s is a sequence of complete, well-formed UTF-8 characters.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >= 0xC2 && b <= 0xDF) ? 2 : (b >= 0xE0 && b <= 0xEF) ? 3
                                : (b >= 0xF0 && b <= 0xF4) ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopMatcher, StopSplitAcrossPieces) {
  StopMatcher m({"</s>"});
  auto a = m.push("Hello <");
  EXPECT_EQ(a.text, "Hello ");
  EXPECT_FALSE(a.stopped);
  EXPECT_EQ(m.held_bytes(), 1u);
  auto b = m.push("/");
  EXPECT_EQ(b.text, "");
  EXPECT_FALSE(b.stopped);
  auto c = m.push("s> trailing");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_TRUE(m.stopped());
  ASSERT_NE(m.matched_stop(), nullptr);
  EXPECT_EQ(*m.matched_stop(), "</s>");
  // Stopped is final: nothing more comes out.
  auto d = m.push("more");
  EXPECT_EQ(d.text, "");
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, TextBeforeStopInSamePieceIsEmitted) {
  StopMatcher m({"###"});
  auto r = m.push("answer: 42### ignored");
  EXPECT_EQ(r.text, "answer: 42");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, MultipleStopStrings) {
  StopMatcher m({"STOP", "\n\n", "<|im_end|>"});
  auto a = m.push("abc\n");
  EXPECT_EQ(a.text, "abc");
  auto b = m.push("\nxyz");
  EXPECT_EQ(b.text, "");
  EXPECT_TRUE(b.stopped);
  EXPECT_EQ(*m.matched_stop(), "\n\n");

  // The earliest occurrence wins, whichever string it is.
  StopMatcher e({"STOP", "\n\n"});
  auto r = e.push("xx\n\nSTOP");
  EXPECT_EQ(r.text, "xx");
  EXPECT_EQ(*e.matched_stop(), "\n\n");

  // A shorter stop inside the prefix of a longer one that never completes.
  StopMatcher o({"abcd", "bc"});
  auto q = o.push("abc");
  EXPECT_EQ(q.text, "a");
  EXPECT_TRUE(q.stopped);
  EXPECT_EQ(*o.matched_stop(), "bc");
}

TEST(StopMatcher, NearMissIsReleased) {
  StopMatcher m({"</s>"});
  EXPECT_EQ(m.push("a </").text, "a ");
  EXPECT_EQ(m.held_bytes(), 2u);
  auto r = m.push("b> done");
  EXPECT_EQ(r.text, "</b> done");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.held_bytes(), 0u);

  // Overlapping restart: "<</s>" must still stop after the first '<'.
  StopMatcher k({"</s>"});
  EXPECT_EQ(k.push("<").text, "");
  EXPECT_EQ(k.push("<").text, "<");
  EXPECT_EQ(k.push("/s").text, "");
  auto s = k.push(">");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
}

TEST(StopMatcher, HoldsOnlyTheLongestPossiblePrefix) {
  StopMatcher m({"abab"});
  // "xaba": suffix "aba" could start "abab"; "x" is safe.
  EXPECT_EQ(m.push("xaba").text, "x");
  EXPECT_EQ(m.held_bytes(), 3u);
  // "abaa": no suffix longer than "a" fits, so "aba" is released.
  EXPECT_EQ(m.push("a").text, "aba");
  EXPECT_EQ(m.held_bytes(), 1u);
  auto r = m.push("bab");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, FinishFlushes) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("x<|en").text, "x");
  EXPECT_EQ(m.finish(), "<|en");
  EXPECT_EQ(m.held_bytes(), 0u);
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, ResetAndEmptyStops) {
  StopMatcher m({"", "end"});
  auto r = m.push("the end");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "the ");
  EXPECT_EQ(*m.matched_stop(), "end");
  m.reset();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.matched_stop(), nullptr);
  EXPECT_EQ(m.push("fine").text, "fin");  // "e" might start "end"
  EXPECT_EQ(m.finish(), "e");

  StopMatcher none({});
  EXPECT_EQ(none.push("anything at all").text, "anything at all");
  EXPECT_EQ(none.finish(), "");
}

TEST(StopMatcher, MultiByteAroundTheStop) {
  // "你好。再见" with stop "。", fed one byte at a time.
  const std::string text = "你好。再见";
  StopMatcher m({"。"});
  std::string out;
  bool stopped = false;
  for (char c : text) {
    auto r = m.push(std::string(1, c));
    EXPECT_TRUE(valid_utf8(r.text)) << "chunk splits a character";
    out += r.text;
    stopped = r.stopped;
    if (stopped) break;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "你好");

  // Multi-byte stop string split in the middle of its own character.
  StopMatcher e({"ü<end>"});
  EXPECT_EQ(e.push("grüß \xC3").text, "grüß ");
  EXPECT_EQ(e.push("\xBC<en").text, "");
  auto r = e.push("d>");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, UnfinishedCharacterIsHeldUntilComplete) {
  StopMatcher m({"STOP"});
  // Byte-fallback tokens can split "你" (E4 BD A0).
  EXPECT_EQ(m.push("ab\xE4\xBD").text, "ab");
  EXPECT_EQ(m.held_bytes(), 2u);
  EXPECT_EQ(m.push("\xA0!").text, "你!");
  // A 4-byte emoji split 1 + 3.
  EXPECT_EQ(m.push("\xF0").text, "");
  EXPECT_EQ(m.push("\x9F\x98\x80").text, "😀");
  // Broken bytes are not held forever: a lead byte followed by ASCII.
  EXPECT_EQ(m.push("\xE4").text, "");
  EXPECT_EQ(m.push("x").text, "\xE4x");
  // finish() hands over an unfinished tail as is.
  EXPECT_EQ(m.push("\xE4\xBD").text, "");
  EXPECT_EQ(m.finish(), "\xE4\xBD");
}

TEST(StopMatcher, NeverEmitsHalfACharacterBeforeAHeldPrefix) {
  // Odd stop strings that begin with a continuation byte: the character
  // they would split is held (or dropped with the stop) as a whole.
  StopMatcher hold({"\xBD\xA0X"});
  EXPECT_EQ(hold.push("a你").text, "a");  // "\xBD\xA0" might start the stop
  EXPECT_EQ(hold.push("b").text, "你b");

  StopMatcher stop({"\xA0z"});
  auto r = stop.push("a你z");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
}

TEST(StopMatcher, RandomizedAgainstReference) {
  // Random texts over an alphabet mixing ASCII and multi-byte characters,
  // random stop lists, random piece boundaries (including mid-character).
  // The concatenated output must equal the text cut at the earliest stop,
  // and every emitted chunk must be whole characters.
  const std::vector<std::string> alphabet = {"a", "b", "<", "/", ">", "é", "你", "😀", "\n"};
  Rng rng(99);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng.next() % n); };
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const size_t chars = pick(40);
    for (size_t i = 0; i < chars; ++i) text += alphabet[pick(alphabet.size())];
    std::vector<std::string> stops;
    const size_t nstops = 1 + pick(3);
    for (size_t s = 0; s < nstops; ++s) {
      std::string stop;
      const size_t len = 1 + pick(4);
      for (size_t i = 0; i < len; ++i) stop += alphabet[pick(alphabet.size())];
      stops.push_back(stop);
    }
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    const std::string want = cut == std::string::npos ? text : text.substr(0, cut);

    StopMatcher m(stops);
    std::string got;
    bool stopped = false;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      const size_t len = std::min(text.size() - pos, 1 + pick(6));
      auto r = m.push(std::string_view(text).substr(pos, len));
      ASSERT_TRUE(valid_utf8(r.text)) << "iter " << iter;
      got += r.text;
      stopped = r.stopped;
      pos += len;
    }
    if (!stopped) got += m.finish();
    ASSERT_EQ(stopped, cut != std::string::npos) << "iter " << iter;
    ASSERT_EQ(got, want) << "iter " << iter;
  }
}

}  // namespace
}  // namespace revis
