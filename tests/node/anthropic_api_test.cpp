// Anthropic's Messages API (POST /v1/messages): requests rewritten as chat
// requests, answers written as Anthropic's messages and event streams, and
// curl-shaped requests against a real node (api_node.h): text, streaming, stop
// sequences, thinking, tool_use and tool_result, errors and x-api-key.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "api/anthropic_api.h"
#include "net/client.h"
#include "node/api_node.h"
#include "support/testdata.h"

namespace revis::node {
namespace {

using nlohmann::json;

json user(const json& content) { return {{"role", "user"}, {"content", content}}; }

TEST(AnthropicApi, RewritesAConversationWithToolsAsAChatRequest) {
  const json body = {
      {"model", "claude-sonnet-4-5"},
      {"max_tokens", 64},
      {"system", {{{"type", "text"}, {"text", "Be brief. "}, {"cache_control", {{"type", "ephemeral"}}}},
                  {{"type", "text"}, {"text", "Use tools."}}}},
      {"messages",
       {user("Weather in Paris?"),
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "I should call the tool."}, {"signature", "abc"}},
           {{"type", "text"}, {"text", "Let me look."}},
           {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
        user({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "21C"}},
              {{"type", "tool_result"},
               {"tool_use_id", "toolu_2"},
               {"content", {{{"type", "text"}, {"text", "no such city"}}}},
               {"is_error", true}},
              {{"type", "text"}, {"text", "And tomorrow?"}}})}},
      {"tools",
       {{{"name", "get_weather"},
         {"description", "Weather in a city"},
         {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
      {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}},
      {"stop_sequences", {"END"}},
      {"temperature", 0.5},
      {"top_k", 5},
      {"metadata", {{"user_id", "u"}}},
      {"thinking", {{"type", "disabled"}}}};
  auto r = parse_messages_request(body.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const OpenAiRequest& chat = r->chat;
  EXPECT_EQ(chat.model, "claude-sonnet-4-5");
  EXPECT_EQ(chat.max_tokens, 64);
  EXPECT_EQ(chat.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(chat.sampling.temperature, 0.5f);
  EXPECT_EQ(chat.sampling.top_k, 5);
  EXPECT_FALSE(chat.stream);
  ASSERT_EQ(chat.messages.size(), 6u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "Be brief. Use tools.");
  EXPECT_EQ(chat.messages[2].role, "assistant");
  EXPECT_EQ(chat.messages[2].content, "Let me look.");
  EXPECT_EQ(chat.messages[2].fields["reasoning_content"], "I should call the tool.");
  EXPECT_EQ(chat.messages[2].fields["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(chat.messages[2].fields["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(chat.messages[3].role, "tool");
  EXPECT_EQ(chat.messages[3].content, "21C");
  EXPECT_EQ(chat.messages[3].fields["tool_call_id"], "toolu_1");
  EXPECT_EQ(chat.messages[4].content, "Error: no such city") << "the model reads that the tool failed";
  EXPECT_EQ(chat.messages[5].role, "user");
  EXPECT_EQ(chat.messages[5].content, "And tomorrow?");
  ASSERT_TRUE(chat.chat_options.tools.has_value());
  EXPECT_EQ((*chat.chat_options.tools)[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(chat.tool_use.choice, ToolChoice::kNamed);
  EXPECT_EQ(chat.tool_use.name, "get_weather");
  EXPECT_FALSE(chat.tool_use.parallel);
  EXPECT_EQ(chat.chat_options.kwargs["enable_thinking"], false);

  auto any = parse_messages_request(
      json{{"max_tokens", 8}, {"messages", {user("x")}}, {"tools", body["tools"]}, {"tool_choice", {{"type", "any"}}},
           {"stream", true}}.dump());
  ASSERT_TRUE(any.ok()) << any.error().message;
  EXPECT_EQ(any->chat.tool_use.choice, ToolChoice::kRequired);
  EXPECT_TRUE(any->chat.stream);
}

TEST(AnthropicApi, RefusesWhatItCannotHonourNamingTheField) {
  const json tool = {{"name", "f"}, {"input_schema", {{"type", "object"}}}};
  // A schema keyword the grammar cannot enforce: named as Anthropic spells the field.
  const json unenforceable = {
      {"name", "f"},
      {"input_schema", {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"pattern", "^a"}}}}}}}};
  const std::pair<json, const char*> cases[] = {
      {{{"messages", {user("x")}}}, "max_tokens"},
      {{{"max_tokens", 0}, {"messages", {user("x")}}}, "max_tokens"},
      {{{"max_tokens", 8}, {"messages", json::array()}}, "messages"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"temperature", 1.5}}, "temperature"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"stop_sequences", "END"}}, "stop_sequences"},
      {{{"max_tokens", 8}, {"messages", {{{"role", "system"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"max_tokens", 8}, {"messages", {user({{{"type", "text"}, {"text", "a"}}, {{"type", "image"}, {"source", {}}}})}}},
       "messages[0].content[1]"},
      {{{"max_tokens", 8}, {"messages", {user("x"), {{"role", "assistant"}, {"content", "The answer is"}}}}}, "prefill"},
      {{{"max_tokens", 8}, {"messages", {user({{{"type", "tool_result"}}})}}}, "tool_use_id"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"tools", {{{"type", "web_search_20250305"}, {"name", "s"}}}}},
       "tools[0].type"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"tools", {{{"name", "f"}}}}}, "tools[0].input_schema"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"tools", {unenforceable}}}, "tools[0].input_schema"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"tools", {tool}}, {"tool_choice", {{"type", "tool"}, {"name", "g"}}}},
       "tool_choice"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}}},
       "thinking.budget_tokens"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"mcp_servers", json::array()}}, "mcp_servers"},
      {{{"max_tokens", 8}, {"messages", {user("x")}}, {"system", {{{"type", "image"}}}}}, "system[0]"},
  };
  for (const auto& [body, names] : cases) {
    auto r = parse_messages_request(body.dump());
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
    EXPECT_NE(r.error().message.find(names), std::string::npos) << r.error().message;
  }
}

JobResult answer(std::string text, std::string stop_reason) {
  JobResult r;
  r.text = std::move(text);
  r.stop_reason = std::move(stop_reason);
  r.stats.prompt_tokens = 20;
  r.stats.cached_tokens = 8;
  r.stats.generated_tokens = 5;
  return r;
}

TEST(AnthropicApi, AMessageWithItsBlocksStopReasonAndUsage) {
  auto format = anthropic_format("msg_1", "small");
  JobResult r = answer("It is sunny.", "eog");
  r.reasoning = "Look it up.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  const json m = json::parse(format->response({&r, 1}, r.stats));
  EXPECT_EQ(m["id"], "msg_1");
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "small");
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Look it up.");
  EXPECT_EQ(m["content"][1]["text"], "It is sunny.");
  EXPECT_EQ(m["content"][2]["type"], "tool_use");
  EXPECT_EQ(m["content"][2]["input"]["city"], "Paris");
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 12) << "Anthropic counts cache reads apart";
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 8);
  EXPECT_EQ(m["usage"]["output_tokens"], 5);

  const std::pair<JobResult, const char*> reasons[] = {
      {answer("a", "length"), "max_tokens"}, {answer("a", "context"), "max_tokens"}, {answer("a", "eog"), "end_turn"},
      {answer("a", "stop"), "end_turn"}};
  for (const auto& [result, reason] : reasons)
    EXPECT_EQ(json::parse(format->response({&result, 1}, result.stats))["stop_reason"], reason) << result.stop_reason;
  JobResult stopped = answer("a", "stop");
  stopped.stop_sequence = "END";
  const json s = json::parse(format->response({&stopped, 1}, stopped.stats));
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");

  const json e = json::parse(anthropic_error_for({ErrorCode::kQueueFull, "busy"}));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "overloaded_error");
  EXPECT_EQ(e["error"]["message"], "busy");
  EXPECT_EQ(json::parse(anthropic_error_for({ErrorCode::kTooLong, "x"}))["error"]["type"], "invalid_request_error");
}

TEST(AnthropicApi, AStreamOpensClosesAndNumbersItsBlocks) {
  auto format = anthropic_format("msg_1", "small");
  AnswerFormat::Events events;
  format->begin(0, events);
  format->reasoning(0, "Hmm", events);
  format->reasoning(0, ".", events);
  format->content(0, "Sunny", {}, events);
  format->content(0, "", {}, events);
  JobResult r = answer("Sunny", "eog");
  r.reasoning = "Hmm.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  format->end(0, r, {}, events);
  format->close(r.stats, events);
  std::vector<std::string> names;
  for (const SseEvent& e : events) {
    names.push_back(e.name);
    EXPECT_EQ(json::parse(e.data)["type"], e.name) << e.data;
  }
  const std::vector<std::string> expected = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_stop",  "content_block_start", "content_block_delta",
      "content_block_stop",  "message_delta",       "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(json::parse(events[1].data)["content_block"]["type"], "thinking");
  EXPECT_EQ(json::parse(events[2].data)["delta"]["type"], "thinking_delta");
  EXPECT_EQ(json::parse(events[5].data)["index"], 1);
  EXPECT_EQ(json::parse(events[6].data)["delta"]["text"], "Sunny");
  const json tool = json::parse(events[8].data);
  EXPECT_EQ(tool["index"], 2);
  EXPECT_EQ(tool["content_block"]["type"], "tool_use");
  EXPECT_EQ(tool["content_block"]["name"], "get_weather");
  EXPECT_EQ(json::parse(json::parse(events[9].data)["delta"]["partial_json"].get<std::string>())["city"], "Paris");
  const json delta = json::parse(events[11].data);
  EXPECT_EQ(delta["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(delta["usage"]["output_tokens"], 5);

  AnswerFormat::Events failed;
  format->failed({ErrorCode::kInternal, "lost"}, failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].name, "error");
  EXPECT_EQ(json::parse(failed[0].data)["error"]["type"], "api_error");
}

// ---------------------------------------------------------------- a real node

// Events of an SSE body: (name, data) pairs.
std::vector<std::pair<std::string, json>> events_of(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  std::string name;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(at, end - at);
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) == 0) out.emplace_back(name, json::parse(line.substr(6)));
    at = end + 1;
  }
  return out;
}

class AnthropicNode : public testing::ApiNode {
 protected:
  // As curl would send it, with Anthropic's headers.
  static HttpResponse post(const json& body, const std::string& key = "s3cret") {
    auto r = http_request(node_->endpoint(), "POST", "/v1/messages", body.dump(),
                          {{"Content-Type", "application/json"}, {"x-api-key", key}, {"anthropic-version", "2023-06-01"}},
                          120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
};

TEST_F(AnthropicNode, AnswersWholeAndStreamedAlike) {
  const json body = {{"model", "claude-sonnet-4-5"}, {"max_tokens", 6}, {"temperature", 0},
                     {"system", "You are terse."}, {"messages", {user("Name a river.")}}};
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["model"], "small");
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["usage"]["output_tokens"], 6);
  EXPECT_GT(m["usage"]["input_tokens"].get<int>(), 5);
  ASSERT_EQ(m["content"].size(), 1u);
  const std::string text = m["content"][0]["text"];

  json streaming = body;
  streaming["stream"] = true;
  auto s = post(streaming);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.headers["content-type"], "text/event-stream");
  const auto events = events_of(s.body);
  ASSERT_GE(events.size(), 5u) << s.body;
  EXPECT_EQ(events.front().first, "message_start");
  EXPECT_EQ(events.front().second["message"]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(events.back().first, "message_stop");
  std::string streamed;
  json delta;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_delta") streamed += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") delta = data;
  }
  EXPECT_EQ(streamed, text) << "greedy: the same text streamed or not";
  EXPECT_EQ(delta["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(delta["usage"]["output_tokens"], 6);
  auto prompt = [](const json& usage) {
    return usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>();
  };
  EXPECT_EQ(prompt(delta["usage"]), prompt(m["usage"])) << "message_delta counts the prompt";

  // This random model answers with newlines: one of them is a stop sequence.
  json stopping = body;
  stopping["stop_sequences"] = {"\n"};
  const json stopped = json::parse(post(stopping).body);
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence") << stopped.dump();
  EXPECT_EQ(stopped["stop_sequence"], "\n");
}

TEST_F(AnthropicNode, ToolUseComesBackAndToolResultsGoIn) {
  const json tools = {{{"name", "get_weather"},
                       {"description", "Weather in a city"},
                       {"input_schema",
                        {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                         {"required", {"city"}}}}}};
  // Greedy (Anthropic's API has no seed): the same call whole and streamed.
  const json body = {{"max_tokens", 300}, {"temperature", 0}, {"messages", {user("Weather in Paris?")}},
                     {"tools", tools}, {"tool_choice", {{"type", "any"}}}};
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_FALSE(m["content"].empty());
  const json call = m["content"].back();
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  ASSERT_TRUE(call["input"].is_object());
  EXPECT_TRUE(call["input"]["city"].is_string());

  json streaming = body;
  streaming["stream"] = true;
  json streamed_input, tool_block;
  std::string stop_reason;
  for (const auto& [name, data] : events_of(post(streaming).body)) {
    if (name == "content_block_start" && data["content_block"]["type"] == "tool_use") tool_block = data["content_block"];
    if (name == "content_block_delta" && data["delta"]["type"] == "input_json_delta")
      streamed_input = json::parse(data["delta"]["partial_json"].get<std::string>());
    if (name == "message_delta") stop_reason = data["delta"]["stop_reason"];
  }
  EXPECT_EQ(tool_block["name"], "get_weather");
  EXPECT_EQ(streamed_input, call["input"]) << "greedy: the same call streamed or not";
  EXPECT_EQ(stop_reason, "tool_use");

  // The call and its result, as an agent sends them back.
  const json next = {{"max_tokens", 4},
                     {"tools", tools},
                     {"messages",
                      {user("Weather in Paris?"), {{"role", "assistant"}, {"content", m["content"]}},
                       user({{{"type", "tool_result"}, {"tool_use_id", call["id"]}, {"content", "21 degrees"}}})}}};
  auto answer = post(next);
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(json::parse(answer.body)["type"], "message");
}

TEST_F(AnthropicNode, ThinkingIsAThinkingBlockUnlessDisabled) {
  const json body = {{"model", "thinker"}, {"max_tokens", 6}, {"temperature", 1.0}, {"messages", {user("Hi")}}};
  const json m = json::parse(post(body).body);
  ASSERT_FALSE(m["content"].empty()) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "thinking") << m.dump();
  EXPECT_FALSE(m["content"][0]["thinking"].get<std::string>().empty());

  json streaming = body;
  streaming["stream"] = true;
  std::string thinking;
  for (const auto& [name, data] : events_of(post(streaming).body))
    if (name == "content_block_delta" && data["delta"]["type"] == "thinking_delta")
      thinking += data["delta"]["thinking"].get<std::string>();
  EXPECT_FALSE(thinking.empty());

  json disabled = body;
  disabled["thinking"] = {{"type", "disabled"}};
  const json plain = json::parse(post(disabled).body);
  for (const json& block : plain["content"]) EXPECT_NE(block["type"], "thinking") << plain.dump();
}

TEST_F(AnthropicNode, ErrorsAreAnthropicShapedAndComeBeforeAStream) {
  auto missing = post({{"messages", {user("Hi")}}});
  EXPECT_EQ(missing.status, 400);
  json e = json::parse(missing.body);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos) << missing.body;

  std::string words;
  for (int i = 0; i < 3000; ++i) words += "x ";  // more than the 2048 tokens of the context
  auto too_long = post({{"max_tokens", 4}, {"stream", true}, {"messages", {user(words)}}});
  EXPECT_EQ(too_long.status, 400) << too_long.body.substr(0, 200);
  EXPECT_EQ(too_long.headers["content-type"], "application/json");
  EXPECT_EQ(json::parse(too_long.body)["error"]["type"], "invalid_request_error");

  auto wrong_key = post({{"max_tokens", 4}, {"messages", {user("Hi")}}}, "nope");
  EXPECT_EQ(wrong_key.status, 401);
  EXPECT_EQ(json::parse(wrong_key.body)["error"]["type"], "authentication_error");
}

}  // namespace
}  // namespace revis::node
