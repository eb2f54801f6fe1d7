// Tool-call parsing (node/tool_calls.h) per family, from answers written the
// way each family's template renders an assistant's tool calls.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "node/tool_calls.h"

namespace revis::node {
namespace {

using nlohmann::json;

void expect_call(const ToolCall& call, const std::string& name, const json& arguments) {
  EXPECT_EQ(call.name, name);
  EXPECT_EQ(json::parse(call.arguments), arguments) << call.arguments;
}

TEST(ToolCalls, HermesQwen) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
      "call_x");
  EXPECT_EQ(a.content, "Let me check.");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(a.calls[1], "get_time", {{"tz", "CET"}});
  EXPECT_EQ(a.calls[0].id, "call_x_0");
  EXPECT_EQ(a.calls[1].id, "call_x_1");
  // Cut off before the close tag: the call still parses when its JSON is whole.
  const ParsedAnswer cut = parse_tool_calls(ToolFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "c");
  ASSERT_EQ(cut.calls.size(), 1u);
  expect_call(cut.calls[0], "f", json::object());
  // Broken JSON stays content.
  const ParsedAnswer broken = parse_tool_calls(ToolFormat::kHermes, "<tool_call>{\"name\": \"f\", </tool_call>", "c");
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": \"f\", </tool_call>");
  EXPECT_EQ(parse_tool_calls(ToolFormat::kHermes, "Just text.", "c").content, "Just text.");
}

TEST(ToolCalls, Llama3Json) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}", "c");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}, {"days", 3}});
  const ParsedAnswer tagged =
      parse_tool_calls(ToolFormat::kLlama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 1}}", "c");
  ASSERT_EQ(tagged.calls.size(), 1u);
  expect_call(tagged.calls[0], "f", {{"x", 1}});
  const ParsedAnswer prose = parse_tool_calls(ToolFormat::kLlama3, "{braces} are fine in prose", "c");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "{braces} are fine in prose");
}

TEST(ToolCalls, MistralBothSyntaxes) {
  const ParsedAnswer list = parse_tool_calls(
      ToolFormat::kMistral,
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", "
      "\"arguments\": {}}]",
      "c");
  ASSERT_EQ(list.calls.size(), 2u);
  expect_call(list.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(list.calls[1], "get_time", json::object());
  const ParsedAnswer args = parse_tool_calls(
      ToolFormat::kMistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}", "c");
  ASSERT_EQ(args.calls.size(), 2u);
  expect_call(args.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(args.calls[1], "get_time", json::object());
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kMistral, "[TOOL_CALLS][{\"name\": ", "c").calls.empty());
}

TEST(ToolCalls, DeepSeek) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kDeepSeek,
      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
      "{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      "c");
  EXPECT_EQ(a.content, "Checking.");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(a.calls[1], "get_time", {{"tz", "CET"}});
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolCalls, FormatFromTheSharedTemplates) {
  const std::string dir = std::string(REVIS_TESTDATA_DIR) + "/chat/templates/";
  const std::vector<std::pair<const char*, ToolFormat>> expected = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolFormat::kHermes},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFormat::kLlama3},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFormat::kMistral},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFormat::kDeepSeek},
  };
  for (const auto& [file, format] : expected) {
    auto f = tool_format(read(dir + file));
    ASSERT_TRUE(f.has_value()) << file;
    EXPECT_STREQ(tool_format_name(*f), tool_format_name(format)) << file;
  }
}

}  // namespace
}  // namespace revis::node
