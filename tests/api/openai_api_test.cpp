// Parsing OpenAI requests and writing OpenAI-shaped responses.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "api/openai_api.h"

namespace revis::node {
namespace {

using nlohmann::json;

TEST(OpenAi, ParsesAChatRequest) {
  auto r = parse_chat_request(R"({"model":"gpt-4o","messages":[{"role":"developer","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
      "temperature":0,"top_p":0.5,"max_tokens":12,"stop":"END","seed":42,"stream":true,
      "stream_options":{"include_usage":true},"user":"ignored","logit_bias":{}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "gpt-4o");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "Hi there");
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_EQ(r->sampling.top_p, 0.5f);
  EXPECT_EQ(r->max_tokens, 12);
  EXPECT_EQ(r->stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_TRUE(r->seed_given);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

std::string repeated(const std::string& piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

// Each client-controlled structure fails at its limit with a message
// naming the field and the limit (scripts/hostile-requests.sh sends the
// same shapes to a running node).
TEST(OpenAi, RefusesRequestsPastThePreparationLimits) {
  const std::string hi = R"("messages":[{"role":"user","content":"hi"}])";
  const std::string schema =
      repeated(R"({"type":"object","properties":{"a":)", 10'000) + R"({"type":"string"})" + repeated("}}", 10'000);
  auto deep = parse_chat_request("{" + hi + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)" +
                                 schema + "}}}");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("nested deeper than 64 levels (at response_format.json_schema.schema.properties"),
            std::string::npos)
      << deep.error().message;

  auto grammar = parse_chat_request("{" + hi + R"(,"grammar":"root ::= )" + repeated("(", 20'000) + R"(\"a\")" +
                                    repeated(")", 20'000) + "\"}");
  ASSERT_FALSE(grammar.ok());
  EXPECT_NE(grammar.error().message.find("groups nested at most 256 deep"), std::string::npos) << grammar.error().message;

  // The node's configuration sets the limits.
  const RequestLimits small{.max_json_depth = 8, .grammar = {.max_nesting = 4, .max_elements = 1000}};
  const std::string ok_schema = R"({"type":"object","properties":{"a":{"type":"object"}}})";
  const std::string body = "{" + hi + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)" +
                           ok_schema + "}}}";
  EXPECT_TRUE(parse_chat_request(body).ok());
  EXPECT_FALSE(parse_chat_request(body, {.max_json_depth = 5, .grammar = {}}).ok());
  auto budget = parse_chat_request("{" + hi + R"(,"grammar":"root ::= [a-z]{0,2000}"})", small);
  ASSERT_FALSE(budget.ok());
  EXPECT_NE(budget.error().message.find("at most 1000 elements"), std::string::npos) << budget.error().message;

  // A tool call's arguments, a string of JSON in the history, are read
  // with the same depth limit.
  auto arguments = parse_chat_request(
      R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function",)"
      R"("function":{"name":"f","arguments":")" + repeated(R"({\"a\":)", 100) + "1" + repeated("}", 100) + R"("}}]}]})");
  ASSERT_FALSE(arguments.ok());
  EXPECT_NE(arguments.error().message.find("function.arguments: JSON nested deeper than 64"), std::string::npos)
      << arguments.error().message;
}

// A schema's properties come out in the order the client wrote them,
// required ones included, at any count (a required list once made the
// conversion quadratic).
TEST(OpenAi, SchemasWithManyPropertiesCompile) {
  std::string props, required;
  for (int i = 0; i < 2000; ++i) {
    props += (i ? "," : "") + std::string(R"("p)") + std::to_string(i) + R"(":{"type":"integer"})";
    required += (i ? "," : "") + std::string(R"("p)") + std::to_string(i) + "\"";
  }
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",)"
                              R"("json_schema":{"name":"x","schema":{"type":"object","properties":{)" +
                              props + R"(},"required":[)" + required + "]}}}}");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->grammar, nullptr);
}

TEST(OpenAi, RefusesWhatItCannotHonour) {
  for (const char* body :
       {"not json", "[]", R"({"messages":[]})", R"({"messages":"hi"})", R"({"messages":[{"role":"tool","content":"x"}]})",
        R"({"messages":[{"role":"user"}]})", R"({"messages":[{"role":"user","content":5}]})",
        R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
        R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})",
        R"({"messages":[{"role":"user","content":"x"}],"temperature":3})",
        R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})",
        R"({"messages":[{"role":"user","content":"x"}],"n":0})",
        R"({"messages":[{"role":"user","content":"x"}],"n":17})",
        R"({"messages":[{"role":"user","content":"x"}],"n":1.5})",
        R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})",
        R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})",
        R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})"}) {
    auto r = parse_chat_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
  }
}

TEST(OpenAi, ParsesToolsAndToolMessages) {
  auto r = parse_chat_request(R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"21C"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"]}}}],
    "tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->messages.size(), 3u);
  // The call's arguments reach the template as an object; content null is
  // "" (templates test `'</think>' in content`).
  EXPECT_EQ(r->messages[1].fields["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(r->messages[1].content, "");
  EXPECT_FALSE(r->messages[1].fields.contains("content"));
  EXPECT_EQ(r->messages[2].role, "tool");
  EXPECT_EQ(r->messages[2].content, "21C");
  EXPECT_EQ(r->messages[2].fields["tool_call_id"], "call_1");
  ASSERT_TRUE(r->chat_options.tools.has_value());
  EXPECT_EQ((*r->chat_options.tools)[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r->tool_use.choice, ToolChoice::kNamed);
  EXPECT_EQ(r->tool_use.name, "get_weather");
  EXPECT_FALSE(r->tool_use.parallel);
  // tool_choice none: the model is not shown the tools.
  auto none = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"none",
      "tools":[{"type":"function","function":{"name":"f"}}]})");
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->chat_options.tools.has_value());
}

TEST(OpenAi, ToolCallsInResponsesAndChunks) {
  JobResult r;
  r.stop_reason = "eog";
  r.tool_calls = {{"call_a_0", "get_weather", "{\"city\":\"Paris\"}"}};
  const json message = json::parse(chat_response("chatcmpl-1", "m", 1, {&r, 1}, r.stats))["choices"][0];
  EXPECT_EQ(message["finish_reason"], "tool_calls");
  EXPECT_TRUE(message["message"]["content"].is_null());
  EXPECT_EQ(message["message"]["tool_calls"][0]["id"], "call_a_0");
  EXPECT_EQ(message["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Paris\"}");
  const json chunk = json::parse(chat_tool_call_chunk({"chatcmpl-1", "m", 1, 0}, 0, r.tool_calls[0]));
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
  // The ticket protocol's shape and back.
  const std::vector<ToolCall> back = tool_calls_from_json(tool_calls_json(r.tool_calls));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].id, "call_a_0");
  EXPECT_EQ(back[0].name, "get_weather");
  EXPECT_EQ(back[0].arguments, r.tool_calls[0].arguments);
}

TEST(OpenAi, ChoicesAndTheirSeeds) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"n":3})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n, 3);
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})")->n, 1);
  auto refused = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"n":17})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("n must be"), std::string::npos) << refused.error().message;
  // best_of equal to n returns every run, so it is n; anything else is refused.
  EXPECT_TRUE(parse_completion_request(R"({"prompt":"x","n":2,"best_of":2})").ok());
  EXPECT_FALSE(parse_completion_request(R"({"prompt":"x","n":2,"best_of":3})").ok());
  // Choice 0 keeps the client's seed; the others get distinct ones.
  EXPECT_EQ(choice_seed(42, 0), 42u);
  std::set<uint64_t> seeds;
  for (size_t k = 0; k < kMaxChoices; ++k) seeds.insert(choice_seed(42, k));
  EXPECT_EQ(seeds.size(), static_cast<size_t>(kMaxChoices));
  EXPECT_EQ(choice_seed(42, 3), choice_seed(42, 3));
  EXPECT_NE(choice_seed(42, 1), choice_seed(43, 1));
}

TEST(OpenAi, ParsesACompletionRequest) {
  auto r = parse_completion_request(R"({"model":"small","prompt":["Once upon"],"max_tokens":5})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->prompt, "Once upon");
  EXPECT_FALSE(r->chat);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x"})")->max_tokens, 16) << "OpenAI's default";
  EXPECT_FALSE(parse_completion_request(R"({"prompt":["a","b"]})").ok());
  EXPECT_FALSE(parse_completion_request(R"({"prompt":[1,2]})").ok());
  EXPECT_FALSE(parse_completion_request(R"({"max_tokens":5})").ok());
}

TEST(OpenAi, ResponseShapes) {
  JobResult r;
  r.text = "Hello";
  r.stop_reason = "length";
  r.stats.prompt_tokens = 3;
  r.stats.generated_tokens = 2;
  json c = json::parse(chat_response("chatcmpl-1", "small", 100, {&r, 1}, r.stats));
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["total_tokens"], 5);
  json first = json::parse(chat_chunk({"chatcmpl-1", "small", 100, 0}, true, "", nullptr));
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  json last = json::parse(chat_chunk({"chatcmpl-1", "small", 100, 2}, false, "", "stop"));
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["choices"][0]["index"], 2);
  json t = json::parse(completion_response("cmpl-1", "small", 100, {&r, 1}, r.stats));
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "Hello");
  json u = json::parse(usage_chunk(true, "chatcmpl-1", "small", 100, r.stats));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens"], 3);
  json e = json::parse(openai_error_for({ErrorCode::kTooLong, "too long"}));
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(http_status_for(ErrorCode::kQueueFull), 503);
  EXPECT_EQ(http_status_for(ErrorCode::kInternal), 500);
  json m = json::parse(models_list({"small", "large"}, 100, "revis"));
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][1]["id"], "large");
  EXPECT_STREQ(finish_reason("context"), "length");
  EXPECT_STREQ(finish_reason("eog"), "stop");
}

}  // namespace
}  // namespace revis::node
