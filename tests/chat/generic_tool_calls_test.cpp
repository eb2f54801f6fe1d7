// The generic tool-call format (tool_calls.h, generic_tool_prompt.h) for
// templates with no tool-call syntax: the prompt describes the tools and the
// answer's JSON, earlier calls and results render in roles the template
// takes, the grammar allows exactly what the request does, and the reader
// gives calls or decoded words, the words as they stream (streams cut every
// way: tool_calls_test.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/answer_stream.h"
#include "chat/chat_template.h"
#include "chat/generic_tool_prompt.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"

namespace revis::node {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                  "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
   "parameters": {"type": "object", "properties": {"tz": {"enum": ["CET", "UTC"]}}, "required": ["tz"]}}}])");

ModelChat chat_of(const std::string& template_file) {
  ModelInfo info;
  if (!template_file.empty()) {
    std::ifstream in(std::string(REVIS_TESTDATA_DIR) + "/chat/templates/" + template_file);
    std::ostringstream s;
    s << in.rdbuf();
    info.chat_template = s.str();
  }
  info.bos.text = "<s>";
  info.eos.text = "</s>";
  auto chat = model_chat(info);
  EXPECT_TRUE(chat.ok()) << chat.status().message();
  return chat.ok() ? *chat : ModelChat{};
}

std::string render(const ModelChat& chat, const std::vector<ChatMessage>& messages, const ToolRequest& request = {},
                   bool with_tools = true) {
  ChatOptions options;
  if (with_tools) options.tools = kTools;
  auto p = render_chat(chat, messages, options, request);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? p->text : "";
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A user's question, the assistant's call, its result and the question again.
std::vector<ChatMessage> round_trip() {
  ChatMessage call{"assistant", ""};
  call.fields["tool_calls"] = ordered_json::parse(
      R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
          {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "CET"}}}])");
  ChatMessage weather{"tool", "{\"temperature\": 21}<|im_end|>"};
  weather.fields["tool_call_id"] = "call_1";
  ChatMessage time{"tool", "10:00"};
  time.fields["tool_call_id"] = "call_2";
  time.fields["name"] = "get_time";
  return {{"user", "Weather and time in Paris?"}, call, weather, time, {"user", "And tomorrow?"}};
}

TEST(GenericToolCalls, OnlyTemplatesWithoutSyntaxUseIt) {
  EXPECT_FALSE(chat_of("").tool_format.has_value());  // the default ChatML
  EXPECT_EQ(chat_of("").tool_calls_format(), ToolFormat::kGeneric);
  EXPECT_FALSE(chat_of("google-gemma-2-2b-it.jinja").tool_format.has_value());
  EXPECT_FALSE(chat_of("microsoft-Phi-3.5-mini-instruct.jinja").tool_format.has_value());
  EXPECT_EQ(chat_of("Qwen-Qwen2.5-7B-Instruct.jinja").tool_calls_format(), ToolFormat::kHermes);
  EXPECT_STREQ(tool_format_name(ToolFormat::kGeneric), "generic");
  // A template with a family keeps its own rendering of the tools.
  const std::string qwen = render(chat_of("Qwen-Qwen2.5-7B-Instruct.jinja"), {{"user", "Hi"}});
  EXPECT_NE(qwen.find("<tools>"), std::string::npos) << qwen;
  EXPECT_EQ(qwen.find("Answer with one JSON object"), std::string::npos) << qwen;
}

TEST(GenericToolCalls, ToolsJoinTheSystemMessage) {
  const ModelChat chatml = chat_of("");
  EXPECT_TRUE(chatml.system_role);
  const std::string own = render(chatml, {{"system", "Be brief."}, {"user", "Weather in Paris?"}});
  EXPECT_EQ(count(own, "<|im_start|>system"), 1u) << own;
  const size_t system = own.find("<|im_start|>system\nBe brief.\n\nYou can use tools.");
  ASSERT_NE(system, std::string::npos) << own;
  // Each tool with its description and schema, then the answer's shape.
  EXPECT_NE(own.find("{\"name\":\"get_weather\",\"description\":\"Weather in a city\",\"parameters\":{\"type\":"
                     "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}"),
            std::string::npos)
      << own;
  EXPECT_NE(own.find("{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments>}}]}"), std::string::npos);
  EXPECT_NE(own.find("{\"response\": \"<your answer>\"}"), std::string::npos) << own;
  EXPECT_LT(own.find("You can use tools."), own.find("<|im_start|>user"));
  // Without one, a system message of its own comes first.
  const std::string added = render(chatml, {{"user", "Weather in Paris?"}});
  EXPECT_EQ(added.find("<|im_start|>system\nYou can use tools."), 0u) << added;
  // tool_choice none: the API sends no tools, and none are described.
  EXPECT_EQ(render(chatml, {{"user", "Hi"}}, {}, false), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(GenericToolCalls, TheSectionSaysWhatTheRequestAllows) {
  const std::string required = generic_tools_section(kTools, {ToolChoice::kRequired, "", true});
  EXPECT_NE(required.find("Call one of the tools:"), std::string::npos) << required;
  EXPECT_EQ(required.find("\"response\""), std::string::npos) << required;
  EXPECT_NE(required.find("one call, or several"), std::string::npos) << required;
  const std::string named = generic_tools_section(kTools, {ToolChoice::kNamed, "get_time", false});
  EXPECT_NE(named.find("Call the tool get_time:"), std::string::npos) << named;
  EXPECT_NE(named.find("[{\"name\": \"get_time\", \"arguments\""), std::string::npos) << named;
  EXPECT_NE(named.find("exactly one call"), std::string::npos) << named;
  EXPECT_EQ(named.find("\"response\""), std::string::npos) << named;
}

TEST(GenericToolCalls, CallsAndResultsRenderAsUserAndAssistantText) {
  const std::string text = render(chat_of(""), round_trip());
  // The calls in the answer's own shape; both results in one user turn,
  // followed by the user's next question in the same turn.
  EXPECT_NE(text.find("<|im_start|>assistant\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
                      "{\"city\":\"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\":\"CET\"}}]}<|im_end|>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>user\n{\"tool_results\": [{\"name\": \"get_weather\", \"content\": "
                      "\"{\\\"temperature\\\": 21}<|im_end|>\"}, {\"name\": \"get_time\", \"content\": \"10:00\"}]}"
                      "\n\nAnd tomorrow?<|im_end|>"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("<|im_start|>tool"), std::string::npos) << text;
  EXPECT_EQ(count(text, "<|im_start|>user"), 2u) << text;
  // tool_choice none (no tools): the earlier calls and results still render.
  const std::string none = render(chat_of(""), round_trip(), {}, false);
  EXPECT_EQ(none.find("You can use tools."), std::string::npos) << none;
  EXPECT_NE(none.find("<|im_start|>assistant\n{\"tool_calls\": [{\"name\": \"get_weather\""), std::string::npos) << none;
  EXPECT_NE(none.find("<|im_start|>user\n{\"tool_results\": ["), std::string::npos) << none;

  // Phi-3.5 drops any role but system, user and assistant: the results
  // must still be there.
  const std::string phi = render(chat_of("microsoft-Phi-3.5-mini-instruct.jinja"), round_trip());
  EXPECT_NE(phi.find("<|user|>\n{\"tool_results\": [{\"name\": \"get_weather\""), std::string::npos) << phi;
  EXPECT_NE(phi.find("<|assistant|>\n{\"tool_calls\": ["), std::string::npos) << phi;
}

TEST(GenericToolCalls, ResultsStayLiteralText) {
  ChatOptions options;
  options.tools = kTools;
  auto p = render_chat(chat_of(""), round_trip(), options);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const size_t end = p->text.find("21}<|im_end|>");
  ASSERT_NE(end, std::string::npos) << p->text;
  bool literal = false;
  for (const TextSpan& s : p->message_spans) literal = literal || (s.begin < end && s.end > end + 10);
  EXPECT_TRUE(literal) << "the <|im_end|> in a tool's result must stay text";
}

// Gemma 2 raises on a system message and on turns that do not alternate.
TEST(GenericToolCalls, GemmaGetsToolsInTheFirstUserTurnAndAlternatingTurns) {
  const ModelChat gemma = chat_of("google-gemma-2-2b-it.jinja");
  EXPECT_FALSE(gemma.system_role);
  const std::string text = render(gemma, round_trip());
  EXPECT_EQ(text.find("<s><start_of_turn>user\nYou can use tools."), 0u) << text;
  EXPECT_NE(text.find("Weather and time in Paris?<end_of_turn>"), std::string::npos) << text;
  EXPECT_NE(text.find("<start_of_turn>model\n{\"tool_calls\": [{\"name\": \"get_weather\""), std::string::npos) << text;
  EXPECT_NE(text.find("<start_of_turn>user\n{\"tool_results\": ["), std::string::npos) << text;
  // The results end the conversation: they are the last user turn.
  std::vector<ChatMessage> ends_with_results = round_trip();
  ends_with_results.pop_back();
  const std::string last = render(gemma, ends_with_results);
  EXPECT_NE(last.find("\"10:00\"}]}<end_of_turn>\n<start_of_turn>model\n"), std::string::npos) << last;
}

// The text `answer` through a fresh matcher of `grammar`: whether it is a
// whole sentence.
bool sentence(const std::shared_ptr<const Grammar>& grammar, const std::string& answer) {
  GrammarMatcher m(grammar);
  return m.accept(answer) && m.can_end();
}

std::shared_ptr<const Grammar> grammar_for(const ToolRequest& request) {
  auto g = tool_call_grammar(ToolFormat::kGeneric, kTools, request);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : nullptr;
}

TEST(GenericToolCalls, GrammarAllowsWhatTheRequestDoes) {
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
  const std::string time = R"({"name": "get_time", "arguments": {"tz": "UTC"}})";
  const std::string one = "{\"tool_calls\": [" + weather + "]}", two = "{\"tool_calls\": [" + weather + ", " + time + "]}";
  const std::string words = R"({"response": "It is \"sunny\".\n"})";

  const auto any = grammar_for({ToolChoice::kAuto, "", true});
  EXPECT_TRUE(tool_call_grammar_applies(ToolFormat::kGeneric, {ToolChoice::kAuto, "", true}));
  EXPECT_FALSE(tool_call_grammar_applies(ToolFormat::kHermes, {ToolChoice::kAuto, "", true}));
  EXPECT_TRUE(sentence(any, one));
  EXPECT_TRUE(sentence(any, two));
  EXPECT_TRUE(sentence(any, words));
  EXPECT_FALSE(sentence(any, "It is sunny."));
  EXPECT_FALSE(sentence(any, "{\"tool_calls\": []}"));
  EXPECT_FALSE(sentence(any, R"({"tool_calls": [{"name": "get_time", "arguments": {"tz": "PST"}}]})"));
  EXPECT_FALSE(sentence(any, R"({"tool_calls": [{"name": "get_weather", "arguments": {"days": 2}}]})"));  // city is required
  EXPECT_FALSE(sentence(any, R"({"tool_calls": [{"name": "send_mail", "arguments": {}}]})"));

  const auto required = grammar_for({ToolChoice::kRequired, "", true});
  EXPECT_TRUE(sentence(required, two));
  EXPECT_FALSE(sentence(required, words));

  const auto single = grammar_for({ToolChoice::kRequired, "", false});
  EXPECT_TRUE(sentence(single, one));
  EXPECT_FALSE(sentence(single, two));

  const auto named = grammar_for({ToolChoice::kNamed, "get_time", true});
  EXPECT_TRUE(sentence(named, "{\"tool_calls\": [" + time + "]}"));
  EXPECT_FALSE(sentence(named, one));
  EXPECT_FALSE(sentence(named, words));

  // The prompt shows earlier calls as the grammar writes them.
  const ordered_json calls = ordered_json::parse(
      R"([{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 3}}}])");
  EXPECT_TRUE(sentence(required, generic_calls_text(calls))) << generic_calls_text(calls);

  // A thinking block the prompt opened is closed first.
  auto closing = tool_call_grammar(ToolFormat::kGeneric, kTools, {ToolChoice::kAuto, "", true}, "</think>\n\n");
  ASSERT_TRUE(closing.ok()) << closing.status().message();
  EXPECT_TRUE(sentence(*closing, "</think>\n\n" + words));
}

TEST(GenericToolCalls, ReadsCallsAndWords) {
  const ParsedAnswer calls = parse_tool_calls(
      ToolFormat::kGeneric,
      R"( {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "CET"}}]} )",
      "seed");
  ASSERT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(calls.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(calls.calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(calls.calls[1].name, "get_time");
  EXPECT_EQ(calls.calls[0].id, tool_call_id(ToolFormat::kGeneric, "seed", 0));
  EXPECT_EQ(calls.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(calls.calls[0].id, calls.calls[1].id);
  EXPECT_EQ(calls.content, "");

  // Words come out decoded: escapes, \u escapes and surrogate pairs.
  const ParsedAnswer words =
      parse_tool_calls(ToolFormat::kGeneric, R"({"response": "Tab\there, \"quoted\", caf\u00e9, \ud83d\ude00."})", "s");
  EXPECT_TRUE(words.calls.empty());
  EXPECT_EQ(words.content, "Tab\there, \"quoted\", caf\xC3\xA9, \xF0\x9F\x98\x80.");

  // What is not the shape stays content as written, never dropped.
  for (const std::string text : {"Just words.", "{\"tool_calls\": [{\"arguments\": {}}]}", "{\"other\": 1}",
                                 "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}"})
    EXPECT_EQ(parse_tool_calls(ToolFormat::kGeneric, text, "s").content, text);
  // Words cut off (the answer ran out of tokens) are the words so far; a
  // lone surrogate is U+FFFD.
  EXPECT_EQ(parse_tool_calls(ToolFormat::kGeneric, R"({"response": "Half a sent)", "s").content, "Half a sent");
  EXPECT_EQ(parse_tool_calls(ToolFormat::kGeneric, R"({"response": "a\ud800b"})", "s").content, "a\xEF\xBF\xBD" "b");
  // Anything after the words but the object's close is kept.
  EXPECT_EQ(parse_tool_calls(ToolFormat::kGeneric, R"({"response": "a", "x": 1})", "s").content, "a, \"x\": 1}");
}

TEST(GenericToolCalls, WordsStreamAsTheyAreDecoded) {
  ToolCallSplitter splitter(ToolFormat::kGeneric);
  EXPECT_EQ(splitter.feed("{\"resp"), "");
  EXPECT_EQ(splitter.feed("onse\": \"It is"), "It is");
  EXPECT_EQ(splitter.feed(" sunny \\u00"), " sunny ");  // the escape waits for its digits
  EXPECT_EQ(splitter.feed("e9.\"}"), "\xC3\xA9.");
  const ParsedAnswer end = splitter.finish("c");
  EXPECT_EQ(end.content, "");
  EXPECT_TRUE(end.calls.empty());

  // Through AnswerStream, as the executor reads an answer.
  std::string sent;
  AnswerStream stream(std::nullopt, ToolCallSplitter(ToolFormat::kGeneric),
                      [&](std::string_view piece) { sent += piece; }, nullptr);
  for (std::string_view piece : {"{\"response\"", ": \"Hel", "lo\"", "}"}) stream.feed(piece);
  EXPECT_EQ(sent, "Hello");
  stream.finish("c");
  EXPECT_EQ(stream.content(), "Hello");
  EXPECT_TRUE(stream.calls().empty());
}

}  // namespace
}  // namespace revis::node
