// Reasoning split (chat/reasoning_split.h) over outputs of thinking models,
// written as the families' templates render an assistant turn, fed whole,
// byte by byte and cut in two at every boundary.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/reasoning_split.h"

namespace revis::node {
namespace {

struct Split {
  std::string reasoning, content;
};

Split run(const ReasoningTags& tags, bool opened, const std::vector<std::string_view>& pieces) {
  ReasoningSplitter s(tags, opened);
  Split out;
  for (std::string_view p : pieces) {
    ReasoningDelta d = s.feed(p);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  ReasoningDelta d = s.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

// Whole, one byte at a time, and cut in two at every boundary: all agree.
void expect_split(const ReasoningTags& tags, bool opened, std::string_view text, std::string_view reasoning,
                  std::string_view content) {
  Split whole = run(tags, opened, {text});
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  Split by_byte = run(tags, opened, bytes);
  EXPECT_EQ(by_byte.reasoning, reasoning) << "byte by byte: " << text;
  EXPECT_EQ(by_byte.content, content) << "byte by byte: " << text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Split two = run(tags, opened, {text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(two.reasoning, reasoning) << "cut at " << cut << ": " << text;
    EXPECT_EQ(two.content, content) << "cut at " << cut << ": " << text;
  }
}

const ReasoningTags kThink{"<think>", "</think>"};

// Qwen3 with enable_thinking on.
TEST(ReasoningSplit, Qwen3Thinking) {
  expect_split(kThink, false,
               "<think>\nOkay, the user asks for 2+2. That is 4.\n</think>\n\nThe answer is **4**.",
               "Okay, the user asks for 2+2. That is 4.", "The answer is **4**.");
}

// Qwen3 with enable_thinking=false: the template wrote an empty think block
// into the prompt, the output is all answer.
TEST(ReasoningSplit, NoThinkingIsAllAnswer) {
  expect_split(kThink, false, "Hello! How can I help you today?", "", "Hello! How can I help you today?");
  expect_split(kThink, false, "  <thin", "", "  <thin");  // an answer without thinking is left as is
  expect_split(kThink, false, "", "", "");
}

// DeepSeek R1 distills: the generation prompt ends with "<think>\n", so the
// output starts inside the thinking and only closes it.
TEST(ReasoningSplit, DeepSeekR1OpenedByThePrompt) {
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>\n", kThink));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", kThink));
  expect_split(kThink, true, "Let me compute: 17 * 3 = 51.\n</think>\n\n17 × 3 = **51**", "Let me compute: 17 * 3 = 51.",
               "17 × 3 = **51**");
}

// Cut off by max_tokens while thinking: everything is reasoning.
TEST(ReasoningSplit, UnclosedThinkingIsAllReasoning) {
  expect_split(kThink, false, "<think>\nFirst, consider </thi", "First, consider </thi", "");
  expect_split(kThink, true, "Step one  \n", "Step one", "");
}

// A close tag inside the answer stays in the answer.
TEST(ReasoningSplit, OnlyTheFirstBlockIsReasoning) {
  expect_split(kThink, false, "<think>a</think>b</think>c", "a", "b</think>c");
}

// Seed-OSS and Magistral-style tags.
TEST(ReasoningSplit, OtherFamiliesTags) {
  expect_split({"<seed:think>", "</seed:think>"}, false, "<seed:think>plan</seed:think>done", "plan", "done");
  expect_split({"[THINK]", "[/THINK]"}, false, "[THINK]Check units.[/THINK]\n42 m", "Check units.", "42 m");
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The tags each shared thinking template uses.
TEST(ReasoningSplit, TagsFromTheSharedTemplates) {
  const std::string dir = std::string(REVIS_TESTDATA_DIR) + "/chat/templates/";
  const std::vector<std::pair<const char*, const char*>> expected = {
      {"Qwen-Qwen3-0.6B.jinja", "</think>"},
      {"Qwen-QwQ-32B.jinja", "</think>"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "</think>"},
      {"ByteDance-Seed-OSS.jinja", "</seed:think>"},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "[/THINK]"},
      {"MiniMax-M3.jinja", "</mm:think>"},
  };
  for (const auto& [file, close] : expected) {
    const std::string source = read(dir + file);
    ASSERT_FALSE(source.empty()) << file;
    auto tags = reasoning_tags(source);
    ASSERT_TRUE(tags.has_value()) << file;
    EXPECT_EQ(tags->close, close) << file;
  }
  EXPECT_FALSE(reasoning_tags(read(dir + "meta-llama-Llama-3.1-8B-Instruct.jinja")).has_value());
}

}  // namespace
}  // namespace revis::node
