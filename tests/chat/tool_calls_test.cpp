// Tool-call parsing (chat/tool_calls.h) per family, from answers written the
// way each family's template renders an assistant's tool calls.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/answer_stream.h"
#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"

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
  EXPECT_EQ(a.calls[0].id, tool_call_id(ToolFormat::kHermes, "call_x", 0));
  EXPECT_EQ(a.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(a.calls[0].id.size(), 14u);
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  EXPECT_NE(tool_call_id(ToolFormat::kHermes, "other", 0), a.calls[0].id);
  // Mistral's templates take back exactly 9 letters and digits.
  EXPECT_EQ(tool_call_id(ToolFormat::kMistral, "call_x", 0).size(), 9u);
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

// Arguments nested past kMaxToolCallDepth are text, not a call; within it,
// a call.
TEST(ToolCalls, ArgumentsNestedTooDeepStayText) {
  const auto answer = [](int depth) {
    std::string arguments;
    for (int i = 0; i < depth; ++i) arguments += "{\"a\": ";
    arguments += "1" + std::string(depth, '}');
    return "<tool_call>{\"name\": \"f\", \"arguments\": " + arguments + "}</tool_call>";
  };
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kHermes, answer(100'000), "c").calls.empty());
  const ParsedAnswer inside = parse_tool_calls(ToolFormat::kHermes, answer(kMaxToolCallDepth - 2), "c");
  ASSERT_EQ(inside.calls.size(), 1u);
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
  const ParsedAnswer with_id =
      parse_tool_calls(ToolFormat::kMistral, "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}", "c");
  ASSERT_EQ(with_id.calls.size(), 1u);
  expect_call(with_id.calls[0], "get_weather", {{"city", "Paris"}});
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

TEST(ToolCalls, XmlFunctionWithTypedValuesAndSeedWrapper) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kXmlFunction,
      "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=units>\n{\"temp\": \"C\"}\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
      "c");
  EXPECT_EQ(a.content, "Checking.");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "New York"}, {"days", 3}, {"units", {{"temp", "C"}}}});
  expect_call(a.calls[1], "get_time", json::object());
  const ParsedAnswer seed = parse_tool_calls(
      ToolFormat::kXmlFunction,
      "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>", "c");
  ASSERT_EQ(seed.calls.size(), 1u);
  expect_call(seed.calls[0], "get_weather", {{"city", "Paris"}});
  // A multi-line string keeps its inner newlines.
  const ParsedAnswer lines = parse_tool_calls(
      ToolFormat::kXmlFunction, "<tool_call>\n<function=f>\n<parameter=text>\na\nb\n</parameter>\n</function>\n</tool_call>",
      "c");
  ASSERT_EQ(lines.calls.size(), 1u);
  expect_call(lines.calls[0], "f", {{"text", "a\nb"}});
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kXmlFunction, "<tool_call>\n<function=f>\n<parameter=x>1", "c").calls.empty());
  // With the request's tools, a property declared as text stays text.
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"zip": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  const ParsedAnswer typed = parse_tool_calls(
      ToolFormat::kXmlFunction,
      "<tool_call>\n<function=f>\n<parameter=zip>\n75001\n</parameter>\n<parameter=n>\n2\n</parameter>\n</function>\n"
      "</tool_call>",
      "c", tools);
  ASSERT_EQ(typed.calls.size(), 1u);
  expect_call(typed.calls[0], "f", {{"zip", "75001"}, {"n", 2}});
}

// A model may write any bytes: a tagged argument that is not UTF-8 is
// still a call, its bad bytes U+FFFD (found by fuzz_openai_chat).
TEST(ToolCalls, TaggedArgumentsThatAreNotUtf8StillParse) {
  const ParsedAnswer xml = parse_tool_calls(
      ToolFormat::kXmlFunction, "<tool_call>\n<function=f>\n<parameter=a>\nx\xffy\n</parameter>\n</function>\n</tool_call>", "c");
  ASSERT_EQ(xml.calls.size(), 1u);
  expect_call(xml.calls[0], "f", {{"a", "x\xEF\xBF\xBDy"}});
  const ParsedAnswer glm = parse_tool_calls(
      ToolFormat::kGlm, "<tool_call>f\n<arg_key>k\xfe</arg_key>\n<arg_value>v</arg_value>\n</tool_call>", "c");
  ASSERT_EQ(glm.calls.size(), 1u);
  expect_call(glm.calls[0], "f", {{"k\xEF\xBF\xBD", "v"}});
}

TEST(ToolCalls, GlmKeyValuePairs) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kGlm,
      "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
      "<arg_value>2</arg_value>\n</tool_call><tool_call>get_time<arg_key>tz</arg_key><arg_value>CET</arg_value></tool_call>",
      "c");
  EXPECT_EQ(a.content, "Sure.");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}, {"days", 2}});
  expect_call(a.calls[1], "get_time", {{"tz", "CET"}});
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kGlm, "<tool_call>f\n<arg_key>x</arg_key>\n</tool_call>", "c").calls.empty());
}

TEST(ToolCalls, KimiIdsAreTheModelsOwn) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kKimi,
      "Let me look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
      "{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}"
      "<|tool_call_end|><|tool_calls_section_end|>",
      "c");
  EXPECT_EQ(a.content, "Let me look.");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(a.calls[1], "get_time", json::object());
  EXPECT_EQ(a.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(a.calls[1].id, "functions.get_time:1");
}

TEST(ToolCalls, CommandRActionList) {
  const ParsedAnswer a = parse_tool_calls(
      ToolFormat::kCommandR,
      "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
      "\"Paris\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {}}\n]<|END_ACTION|>",
      "c");
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}});
  expect_call(a.calls[1], "get_time", json::object());
  EXPECT_TRUE(parse_tool_calls(ToolFormat::kCommandR, "<|START_ACTION|>[{\"tool_name\": 3}]", "c").calls.empty());
}

TEST(ToolCalls, FunctionaryInline) {
  const ParsedAnswer a =
      parse_tool_calls(ToolFormat::kFunctionary, "One moment. <function=get_weather>{\"city\": \"Paris\"}</function>", "c");
  EXPECT_EQ(a.content, "One moment.");
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "get_weather", {{"city", "Paris"}});
  EXPECT_EQ(parse_tool_calls(ToolFormat::kFunctionary, "<function=f>not json</function>", "c").calls.size(), 0u);
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
      {"Qwen3.5-4B.jinja", ToolFormat::kXmlFunction},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", ToolFormat::kXmlFunction},
      {"ByteDance-Seed-OSS.jinja", ToolFormat::kXmlFunction},
      {"StepFun3.5-Flash.jinja", ToolFormat::kXmlFunction},
      {"GLM-4.6.jinja", ToolFormat::kGlm},
      {"poolside-Laguna-S-2.1.jinja", ToolFormat::kGlm},
      {"moonshotai-Kimi-K2.jinja", ToolFormat::kKimi},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolFormat::kCommandR},
      {"Cohere2MoE.jinja", ToolFormat::kCommandR},
      {"meetkai-functionary-medium-v3.1.jinja", ToolFormat::kFunctionary},
      {"openai-gpt-oss-120b.jinja", ToolFormat::kHarmony},
  };
  for (const auto& [file, format] : expected) {
    auto f = tool_format(read(dir + file));
    ASSERT_TRUE(f.has_value()) << file;
    EXPECT_STREQ(tool_format_name(*f), tool_format_name(format)) << file;
  }
}

// A stream cut every way gives what the whole answer gives: the same calls,
// and content that went out before the call (never part of it).
void expect_streams_like_whole(ToolFormat format, const std::string& text) {
  const ParsedAnswer whole = parse_tool_calls(format, text, "c");
  auto run = [&](const std::vector<size_t>& cuts) {
    ToolCallSplitter splitter(format);
    std::string content;
    size_t at = 0;
    for (size_t cut : cuts) {
      content += splitter.feed(std::string_view(text).substr(at, cut - at));
      at = cut;
    }
    content += splitter.feed(std::string_view(text).substr(at));
    ParsedAnswer end = splitter.finish("c");
    content += end.content;
    ASSERT_EQ(end.calls.size(), whole.calls.size()) << text;
    for (size_t i = 0; i < end.calls.size(); ++i) {
      EXPECT_EQ(end.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(end.calls[i].arguments, whole.calls[i].arguments);
      EXPECT_EQ(end.calls[i].id, whole.calls[i].id);
    }
    // Without calls the content is the text as written; a generic answer's
    // words are decoded.
    if (whole.calls.empty() && format != ToolFormat::kGeneric) EXPECT_EQ(content, text);
    else EXPECT_EQ(content, whole.content) << text;
  };
  run({});
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  run(every);
  for (size_t cut = 1; cut < text.size(); ++cut) run({cut});
}

TEST(ToolCallSplitter, StreamsLikeTheWholeAnswerPerFamily) {
  expect_streams_like_whole(ToolFormat::kHermes,
                            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                            "\n</tool_call>");
  expect_streams_like_whole(ToolFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  expect_streams_like_whole(ToolFormat::kHermes, "No call: <tool_call> is just text");
  expect_streams_like_whole(ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  expect_streams_like_whole(ToolFormat::kLlama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 1}}");
  expect_streams_like_whole(ToolFormat::kLlama3, "The set {1, 2} has two members.");
  expect_streams_like_whole(ToolFormat::kMistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}");
  expect_streams_like_whole(ToolFormat::kMistral, "Sure.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": [1]}}]");
  expect_streams_like_whole(ToolFormat::kDeepSeek,
                            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                            "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  expect_streams_like_whole(ToolFormat::kDeepSeek, "Plain ｜ text.");
  expect_streams_like_whole(ToolFormat::kXmlFunction,
                            "Hm.\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>");
  expect_streams_like_whole(ToolFormat::kXmlFunction, "<seed:tool_call><function=f></function></seed:tool_call>");
  expect_streams_like_whole(ToolFormat::kGlm, "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x</arg_value>\n</tool_call>");
  expect_streams_like_whole(ToolFormat::kKimi,
                            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
                            "<|tool_call_end|><|tool_calls_section_end|>");
  expect_streams_like_whole(ToolFormat::kCommandR,
                            "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {}}]<|END_ACTION|>");
  expect_streams_like_whole(ToolFormat::kFunctionary, "Ok <function=f>{\"a\": 1}</function>");
  expect_streams_like_whole(ToolFormat::kFunctionary, "a < b, and <function is a word");
  expect_streams_like_whole(ToolFormat::kGeneric,
                            R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})");
  expect_streams_like_whole(ToolFormat::kGeneric, R"({"response": "caf\u00e9 \ud83d\ude00 \"q\" \\ done"})");
  expect_streams_like_whole(ToolFormat::kGeneric, R"(  {"response": "cut off \u00)");
  expect_streams_like_whole(ToolFormat::kGeneric, R"({"response": "bad \x escape"})");
  expect_streams_like_whole(ToolFormat::kGeneric, R"({"response": "a", "tool_calls": []})");
  expect_streams_like_whole(ToolFormat::kGeneric, "Plain words, no JSON.");
  expect_streams_like_whole(ToolFormat::kGeneric, R"({"respond": "near miss"})");
}

TEST(ToolCallSplitter, ContentBeforeACallStreamsAtOnce) {
  ToolCallSplitter splitter(ToolFormat::kHermes);
  EXPECT_EQ(splitter.feed("Let me check the weather."), "Let me check the weather.");
  EXPECT_EQ(splitter.feed("\n<tool"), "");  // white space and a possible marker wait
  EXPECT_EQ(splitter.feed("_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"), "");
  const ParsedAnswer end = splitter.finish("c");
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].name, "f");
}

// The families' real templates: an assistant turn with a tool call, as the
// template renders it, is what a model trained on it writes; the parser (and
// a thinking template's splitter before it) must read it back, and the
// grammar of a required call must accept it.
struct TemplateCase {
  const char* file;
  ToolFormat format;
  const char* turn_opener;  // what precedes the assistant's output
  const char* turn_end;     // what ends it
};

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
   "parameters": {"type": "object", "properties": {"tz": {"enum": ["CET", "UTC"]}}, "required": ["tz"]}}}])");

ModelInfo info_for(const std::string& file) {
  ModelInfo info;
  info.chat_template = read(std::string(REVIS_TESTDATA_DIR) + "/chat/templates/" + file);
  info.bos.text = "<s>";
  info.eos.text = "</s>";
  return info;
}

std::vector<ChatMessage> call_conversation() {
  ChatMessage call{"assistant", ""};
  call.fields["tool_calls"] = nlohmann::ordered_json::parse(
      R"([{"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])");
  return {{"user", "What is the weather in Paris?"}, call};
}

TEST(ToolCalls, ReadsWhatTheFamiliesTemplatesWrite) {
  const std::vector<TemplateCase> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::kHermes, "<|im_start|>assistant\n", "<|im_end|>"},
      {"Qwen-Qwen3-0.6B.jinja", ToolFormat::kHermes, "<|im_start|>assistant\n", "<|im_end|>"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolFormat::kHermes, "<|im_start|>assistant\n",
       "<|im_end|>"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFormat::kLlama3,
       "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::kLlama3,
       "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFormat::kMistral, "[/INST]", "</s>"},
      {"unsloth-mistral-Devstral-Small-2507.jinja", ToolFormat::kMistral, "[/INST]", "</s>"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolFormat::kDeepSeek, "<｜Assistant｜>",
       "<｜end▁of▁sentence｜>"},
      {"Qwen3.5-4B.jinja", ToolFormat::kXmlFunction, "<|im_start|>assistant\n", "<|im_end|>"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", ToolFormat::kXmlFunction, "<|im_start|>assistant\n", "<|im_end|>"},
      {"StepFun3.5-Flash.jinja", ToolFormat::kXmlFunction, "<|im_start|>assistant\n", "<|im_end|>"},
      {"GLM-4.6.jinja", ToolFormat::kGlm, "<|assistant|>", "<|"},
      {"poolside-Laguna-S-2.1.jinja", ToolFormat::kGlm, "<assistant></think>", "</assistant>"},  // thinking opened by the prompt
      {"moonshotai-Kimi-K2.jinja", ToolFormat::kKimi, "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolFormat::kCommandR, "<|CHATBOT_TOKEN|>",
       "<|END_OF_TURN_TOKEN|>"},
      {"meetkai-functionary-medium-v3.1.jinja", ToolFormat::kFunctionary,
       "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eom_id|>"},
      {"openai-gpt-oss-120b.jinja", ToolFormat::kHarmony, "<|start|>assistant", "<|call|>"},
  };
  for (const TemplateCase& c : cases) {
    SCOPED_TRACE(c.file);
    auto chat = model_chat(info_for(c.file));
    ASSERT_TRUE(chat.ok()) << chat.status().message();
    ASSERT_TRUE(chat->tool_format.has_value());
    EXPECT_STREQ(tool_format_name(*chat->tool_format), tool_format_name(c.format));
    ChatOptions options;
    options.add_generation_prompt = false;
    options.tools = kTools;
    auto rendered = render_chat(*chat, call_conversation(), options);
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    const std::string& text = rendered->text;
    const size_t open = text.find(c.turn_opener, text.find("What is the weather in Paris?"));
    ASSERT_NE(open, std::string::npos) << text;
    std::string output = text.substr(open + std::string(c.turn_opener).size());
    output = output.substr(0, output.find(c.turn_end));

    // Streamed byte by byte through the thinking split (for a thinking
    // template) and the tool-call split, as the executor does.
    std::optional<ReasoningSplitter> thinking;
    if (chat->reasoning) thinking.emplace(*chat->reasoning, false);
    AnswerStream stream(std::move(thinking), ToolCallSplitter(*chat->tool_format), nullptr, nullptr);
    for (char ch : output) stream.feed(std::string_view(&ch, 1));
    stream.finish("call");
    EXPECT_EQ(stream.content(), "") << output;
    ASSERT_EQ(stream.calls().size(), 1u) << output;
    expect_call(stream.calls()[0], "get_weather", {{"city", "Paris"}});

    // The grammar of a required call accepts the template's own call.
    auto grammar = tool_call_grammar(*chat->tool_format, kTools, ToolRequest{ToolChoice::kRequired, "", true});
    ASSERT_TRUE(grammar.ok()) << grammar.status().message();
    const std::string_view body = std::string_view(output).substr(output.find_first_not_of(" \n"));
    const std::string call = std::string(body.substr(0, body.find_last_not_of(" \n") + 1));
    // Harmony's call is the whole message: its header names the function.
    const size_t call_at = c.format == ToolFormat::kHarmony ? 0 : call.find(tool_markers(*chat->tool_format)[0]);
    GrammarMatcher matcher(*grammar);
    const std::string from = call.substr(call_at == std::string::npos ? call.find('{') : call_at);
    EXPECT_TRUE(matcher.accept(from)) << from;
    EXPECT_TRUE(matcher.can_end()) << from;
  }
}

TEST(ToolCalls, ToolsAndResultsReachTheTemplate) {
  auto chat = model_chat(info_for("Qwen-Qwen2.5-7B-Instruct.jinja"));
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  ChatOptions options;
  options.tools = kTools;
  std::vector<ChatMessage> messages = call_conversation();
  ChatMessage result{"tool", "{\"temperature\": 21}<|im_end|>"};
  result.fields["tool_call_id"] = "abc123XYZ";
  messages.push_back(result);
  auto p = render_chat(*chat, messages, options);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // The definitions, the earlier call and the result, in Qwen's words.
  EXPECT_NE(p->text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                         "\"Weather in a city\""),
            std::string::npos)
      << p->text;
  EXPECT_NE(p->text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << p->text;
  const size_t response = p->text.find("<tool_response>\n{\"temperature\": 21}<|im_end|>\n</tool_response>");
  ASSERT_NE(response, std::string::npos) << p->text;
  // The result is message text: a literal span, so its <|im_end|> stays text.
  const size_t at = response + std::string("<tool_response>\n").size();
  bool literal = false;
  for (const TextSpan& s : p->message_spans) literal = literal || (s.begin == at && s.end > at + 20);
  EXPECT_TRUE(literal);
}

TEST(ToolCalls, NamedChoiceGrammarAllowsOnlyThatTool) {
  ToolRequest named{ToolChoice::kNamed, "get_time", true};
  auto grammar = tool_call_grammar(ToolFormat::kHermes, kTools, named);
  ASSERT_TRUE(grammar.ok()) << grammar.status().message();
  GrammarMatcher ok(*grammar);
  EXPECT_TRUE(ok.accept("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>"));
  EXPECT_TRUE(ok.can_end());
  GrammarMatcher other(*grammar);
  EXPECT_FALSE(other.accept("<tool_call>\n{\"name\": \"get_weather\""));
  GrammarMatcher bad_args(*grammar);
  EXPECT_FALSE(bad_args.accept("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"PST\""));
  // A thinking block the prompt opened is closed first.
  auto closing = tool_call_grammar(ToolFormat::kDeepSeek, kTools, named, "</think>\n\n");
  ASSERT_TRUE(closing.ok()) << closing.status().message();
  GrammarMatcher m(*closing);
  EXPECT_TRUE(m.accept("</think>\n\n<｜tool▁calls▁begin｜>"));
}

}  // namespace
}  // namespace revis::node
