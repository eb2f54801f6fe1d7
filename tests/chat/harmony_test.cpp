// gpt-oss's harmony answers read by channel: thinking, content and tool
// calls, whole or streamed in pieces of any size, from outputs shaped as
// gpt-oss writes them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/harmony.h"

namespace revis::node {
namespace {

struct HarmonyRead {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// `text` fed in pieces of `step` bytes (0: whole).
HarmonyRead read_harmony(const std::string& text, size_t step, bool reads_calls = true) {
  HarmonySplitter splitter(reads_calls);
  HarmonyRead r;
  auto take = [&](const ReasoningDelta& d) {
    r.reasoning += d.reasoning;
    r.content += d.content;
  };
  for (size_t at = 0; at < text.size(); at += step ? step : text.size())
    take(splitter.feed(std::string_view(text).substr(at, step ? step : text.size())));
  take(splitter.finish("seed", r.calls));
  return r;
}

TEST(Harmony, ThinkingThenTheFinalAnswer) {
  const std::string out =
      "<|channel|>analysis<|message|>User asks for a river. Answer briefly.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>The Danube.";
  for (size_t step : {0, 1, 3, 7}) {
    const HarmonyRead r = read_harmony(out, step);
    EXPECT_EQ(r.reasoning, "User asks for a river. Answer briefly.") << step;
    EXPECT_EQ(r.content, "The Danube.") << step;
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(Harmony, ACallWithTheRecipientBeforeOrAfterTheChannel) {
  const std::string outputs[] = {
      "<|channel|>analysis<|message|>Need the weather tool.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
      "<|channel|>analysis<|message|>Need the weather tool.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
  };
  for (const std::string& out : outputs)
    for (size_t step : {0, 1, 5}) {
      const HarmonyRead r = read_harmony(out, step);
      EXPECT_EQ(r.reasoning, "Need the weather tool.");
      EXPECT_EQ(r.content, "");
      ASSERT_EQ(r.calls.size(), 1u) << out;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(nlohmann::json::parse(r.calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
      EXPECT_EQ(r.calls[0].id, tool_call_id(ToolFormat::kHarmony, "seed", 0));
    }
  // A call straight away, as a forced call's grammar writes it.
  const HarmonyRead direct =
      read_harmony(" to=functions.get_time<|channel|>commentary json<|message|>{\"tz\": \"CET\"}", 2);
  ASSERT_EQ(direct.calls.size(), 1u);
  EXPECT_EQ(direct.calls[0].name, "get_time");
}

TEST(Harmony, NothingIsDropped) {
  // A preamble to the user (commentary without a recipient) is content.
  EXPECT_EQ(read_harmony("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>final"
                         "<|message|>Done.",
                         1)
                .content,
            "Checking.Done.");
  // Plain text, not harmony: all content.
  for (const char* plain : {"Just an answer.", "a <| b", "  to be or not"})
    EXPECT_EQ(read_harmony(plain, 1).content, plain);
  // Arguments that are not a JSON object stay content.
  const HarmonyRead broken = read_harmony(" to=functions.f<|channel|>commentary json<|message|>{\"a\": ", 0);
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "{\"a\": ");
  // Without tools in the request, a message to a function is content.
  const HarmonyRead untooled = read_harmony(" to=functions.f<|channel|>commentary json<|message|>{}", 0, false);
  EXPECT_TRUE(untooled.calls.empty());
  EXPECT_EQ(untooled.content, "{}");
  // Thinking that never ends is all thinking.
  EXPECT_EQ(read_harmony("<|channel|>analysis<|message|>Hmm, let me", 4).reasoning, "Hmm, let me");
}

TEST(Harmony, StreamedPiecesAreCertain) {
  // The body goes out as it comes; only what may be "<|end|>" waits.
  HarmonySplitter s(true);
  EXPECT_EQ(s.feed("<|channel|>analysis<|message|>abc<|e").reasoning, "abc");
  EXPECT_EQ(s.feed("nd|><|start|>assistant<|channel|>final<|message|>x").content, "x");
  std::vector<ToolCall> calls;
  EXPECT_TRUE(s.finish("seed", calls).empty());
}

}  // namespace
}  // namespace revis::node
