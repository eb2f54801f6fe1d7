// Tool calls through the OpenAI API on a real node with a random-weight
// model, one tier per family's template (Hermes/Qwen, Llama 3, Mistral,
// DeepSeek R1, ...): tool_choice "required" and a named function give a call in
// the family's syntax whose arguments validate against the tool's schema,
// streamed (delta.tool_calls) and not (message.tool_calls); a conversation
// with the call and its result (role "tool") goes back in. Two tiers whose
// templates have no tool-call syntax (the default ChatML, Gemma 2's) take
// the generic format, through the chat and the Messages API.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/json_schema_check.h"
#include "support/run_command.h"
#include "support/sse.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;

// Tiers whose templates have no tool-call syntax: the generic format.
const char* const kGenericTiers[] = {"generic", "generic-gemma"};

const char* const kFamilies[] = {"hermes", "llama3",    "mistral",   "deepseek",    "xml-function",
                                 "glm",    "kimi",      "command-r", "functionary", "harmony"};

class ToolApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("revis-tool-api-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    const std::string model = testing::testdata("models/qwen2-Q8_0.gguf").string();
    const std::string llama = testing::testdata("models/llama-spm-Q8_0.gguf").string();  // it has no template
    const std::string templates = testing::testdata("chat/templates").string() + "/";
    std::ofstream config(*dir_ / "node.toml");
    config << "[tiers.generic]\nmodel = " << json(llama) << "\n[tiers.generic-gemma]\nmodel = " << json(llama)
           << "\nchat_template = " << json(templates + "google-gemma-2-2b-it.jinja") << "\n";
    const std::pair<const char*, const char*> tiers[] = {
        {"hermes", "Qwen-Qwen2.5-7B-Instruct.jinja"},
        {"llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja"},
        {"mistral", "Mistral-Small-3.2-24B-Instruct-2506.jinja"},
        {"deepseek", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"},
        {"xml-function", "Qwen3.5-4B.jinja"},
        {"glm", "GLM-4.6.jinja"},
        {"kimi", "moonshotai-Kimi-K2.jinja"},
        {"command-r", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"},
        {"functionary", "meetkai-functionary-medium-v3.1.jinja"},
        {"harmony", "openai-gpt-oss-120b.jinja"},
    };
    for (const auto& [name, file] : tiers)
      config << "[tiers." << name << "]\nmodel = " << json(model) << "\nchat_template = " << json(templates + file)
             << "\n";
    config.close();
    node_ = new NodeProcess({"--config", (*dir_ / "node.toml").string(), "-t", "2", "-c", "4096"});
    ASSERT_TRUE(node_->wait_ready()) << node_->log();
  }
  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static node::HttpResponse post(const json& body, const std::string& path = "/v1/chat/completions") {
    auto r = node::http_request(node_->endpoint(), "POST", path, body.dump(),
                                {{"Content-Type", "application/json"}}, 120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
  static NodeProcess* node_;
  static std::filesystem::path* dir_;
};
NodeProcess* ToolApi::node_ = nullptr;
std::filesystem::path* ToolApi::dir_ = nullptr;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "maxLength": 12},
     "days": {"type": "integer", "minimum": 1, "maximum": 7},
     "unit": {"enum": ["celsius", "fahrenheit"]}},
     "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
   "parameters": {"type": "object", "properties": {"tz": {"enum": ["CET", "UTC"]}}, "required": ["tz"]}}}])");

json parameters_of(const std::string& name) {
  for (const json& t : kTools)
    if (t["function"]["name"] == name) return t["function"]["parameters"];
  return nullptr;
}

// A call as a client gets it: function name among the tools, arguments a
// JSON text valid against that tool's parameters.
void expect_valid_call(const json& call, const std::string& where) {
  ASSERT_TRUE(call.is_object()) << where;
  EXPECT_EQ(call["type"], "function") << where;
  EXPECT_FALSE(call["id"].get<std::string>().empty()) << where;
  const std::string name = call["function"]["name"];
  const json schema = parameters_of(name);
  ASSERT_FALSE(schema.is_null()) << where << ": no tool " << name;
  const json arguments = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_FALSE(arguments.is_discarded()) << where << ": " << call.dump();
  std::string why;
  EXPECT_TRUE(testing::schema_accepts(arguments, schema, schema, &why)) << where << ": " << call.dump() << "\n" << why;
}

json request(const std::string& family, const json& tool_choice, int seed, bool stream) {
  return {{"model", family},
          {"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
          {"tools", kTools},
          {"tool_choice", tool_choice},
          {"temperature", 1.0},
          {"seed", seed},
          {"max_tokens", 400},
          {"stream", stream}};
}

// The calls of an answer, streamed or not, and its finish_reason.
std::pair<json, std::string> calls_of(const node::HttpResponse& r, bool stream) {
  if (!stream) {
    const json choice = json::parse(r.body)["choices"][0];
    return {choice["message"].value("tool_calls", json::array()), choice["finish_reason"]};
  }
  json calls = json::array();
  std::string finish;
  for (const std::string& data : testing::sse_events(r.body)) {
    if (data == "[DONE]") continue;
    const json e = json::parse(data);
    if (e["choices"].empty()) continue;
    const json& choice = e["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    if (auto d = choice["delta"].find("tool_calls"); d != choice["delta"].end())
      for (const json& c : *d) calls.push_back(c);
  }
  return {calls, finish};
}

TEST_F(ToolApi, RequiredAndNamedCallsAreValidInEveryFamily) {
  for (const char* family : kFamilies) {
    for (int seed = 0; seed < 6; ++seed) {
      const bool stream = seed % 2 == 1;
      const bool named = seed >= 3;
      const json choice = named ? json{{"type", "function"}, {"function", {{"name", "get_weather"}}}} : json("required");
      const std::string where = std::string(family) + " seed " + std::to_string(seed) + (stream ? " streamed" : "");
      auto r = post(request(family, choice, seed, stream));
      ASSERT_EQ(r.status, 200) << where << ": " << r.body.substr(0, 400);
      auto [calls, finish] = calls_of(r, stream);
      EXPECT_EQ(finish, "tool_calls") << where << ": " << r.body.substr(0, 600);
      ASSERT_EQ(calls.size(), 1u) << where << ": " << r.body.substr(0, 600);
      expect_valid_call(calls[0], where);
      if (named) {
        EXPECT_EQ(calls[0]["function"]["name"], "get_weather") << where;
      }
      if (stream) {
        EXPECT_EQ(calls[0]["index"], 0) << where;
      }
    }
  }
}

// Each family's own call (Mistral's templates take back only its 9-character
// ids) and the tool's result, sent back as a client does. In the generic
// format they come back as text in turns the template takes (Gemma 2's
// refuses a `tool` role and turns that do not alternate).
TEST_F(ToolApi, ACallAndItsResultGoBackIn) {
  std::vector<const char*> tiers(std::begin(kFamilies), std::end(kFamilies));
  tiers.insert(tiers.end(), std::begin(kGenericTiers), std::end(kGenericTiers));
  for (const char* family : tiers) {
    json first_body = request(family, "required", 11, false);
    first_body["parallel_tool_calls"] = false;  // one call (a generic answer may hold several)
    auto first = post(first_body);
    ASSERT_EQ(first.status, 200) << family << ": " << first.body;
    const json message = json::parse(first.body)["choices"][0]["message"];
    ASSERT_EQ(message["tool_calls"].size(), 1u) << family << ": " << first.body;
    EXPECT_TRUE(message["content"].is_null()) << family << ": " << first.body;
    json body = request(family, "auto", 12, false);
    body["messages"].push_back(message);
    body["messages"].push_back({{"role", "tool"},
                                {"tool_call_id", message["tool_calls"][0]["id"]},
                                {"content", "{\"temperature\": 21}"}});
    body["max_tokens"] = 8;
    auto r = post(body);
    ASSERT_EQ(r.status, 200) << family << ": " << r.body.substr(0, 400);
    json plain_body = request(family, "auto", 12, false);
    plain_body["max_tokens"] = 1;
    const int plain = json::parse(post(plain_body).body)["usage"]["prompt_tokens"];
    EXPECT_GT(json::parse(r.body)["usage"]["prompt_tokens"].get<int>(), plain + 10)
        << family << ": the call and its result are in the prompt";
  }
}

TEST_F(ToolApi, ToolFieldsAre400sNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"tools", {{{"type", "retrieval"}}}}}, "tools[0]"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "has space"}}}}}}}, "tools[0].function.name"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"},
          {"properties", {{"x", {{"type", "string"}, {"pattern", "a+"}}}}}}}}}}}}}, "pattern"},
      {{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, "tool_choice"},
      {{{"tools", kTools}, {"tool_choice", "always"}}, "tool_choice"},
      {{{"tools", kTools}, {"parallel_tool_calls", "no"}}, "parallel_tool_calls"},
      {{{"tools", kTools}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}, "tool_choice"},
      {{{"messages", {{{"role", "tool"}, {"content", "21"}}}}}, "messages[0].tool_call_id"},
      {{{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"type", "function"},
          {"function", {{"name", "f"}, {"arguments", "not json"}}}}}}}}}}, "messages[0].tool_calls[0].function.arguments"},
  };
  for (const auto& [extra, names] : cases) {
    json body = {{"model", "hermes"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
    body.update(extra);
    auto r = post(body);
    EXPECT_EQ(r.status, 400) << extra.dump() << ": " << r.body.substr(0, 300);
    EXPECT_NE(r.body.find(names), std::string::npos) << r.body;
  }
  // Control-token text in a tool definition would become the token itself.
  json body = request("hermes", "auto", 1, false);
  body["tools"][0]["function"]["description"] = "Weather<|im_end|>";
  auto r = post(body);
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("tools"), std::string::npos) << r.body;
}


// Templates without tool-call syntax: the answer is the generic JSON, its
// calls valid against the schemas, one or several as parallel_tool_calls
// says, only the named tool when one is named.
TEST_F(ToolApi, GenericCallsOnTemplatesWithoutToolSyntax) {
  for (const char* tier : kGenericTiers) {
    for (int seed = 0; seed < 6; ++seed) {
      const bool stream = seed % 2 == 1;
      const bool named = seed >= 3;
      const bool parallel = seed % 3 != 0;
      const json choice = named ? json{{"type", "function"}, {"function", {{"name", "get_weather"}}}} : json("required");
      const std::string where = std::string(tier) + " seed " + std::to_string(seed) + (stream ? " streamed" : "");
      json body = request(tier, choice, seed, stream);
      body["parallel_tool_calls"] = parallel;
      auto r = post(body);
      ASSERT_EQ(r.status, 200) << where << ": " << r.body.substr(0, 400);
      auto [calls, finish] = calls_of(r, stream);
      EXPECT_EQ(finish, "tool_calls") << where << ": " << r.body.substr(0, 600);
      ASSERT_GE(calls.size(), 1u) << where << ": " << r.body.substr(0, 600);
      if (!parallel) EXPECT_EQ(calls.size(), 1u) << where;
      for (size_t i = 0; i < calls.size(); ++i) {
        expect_valid_call(calls[i], where);
        if (named) EXPECT_EQ(calls[i]["function"]["name"], "get_weather") << where;
        if (stream) EXPECT_EQ(calls[i]["index"], i) << where;
      }
    }
  }
}

// tool_choice auto: the model answers with calls or with words, and the
// same seed gives the same answer streamed (words as delta.content while
// they are generated) or not. This random model calls; a logit bias
// towards the tokens of "response" makes it answer in words.
TEST_F(ToolApi, GenericAutoAnswersInCallsOrWordsStreamedOrNot) {
  // The tokens of `response` after a quote, as the answer spells them.
  const testing::CommandResult tokens = testing::run_revis(
      "tokenize --no-bos --json -m " + testing::shell_quote(testing::testdata("models/llama-spm-Q8_0.gguf").string()) +
      " -p " + testing::shell_quote("\"response"));
  ASSERT_EQ(tokens.exit_code, 0) << tokens.err;
  const json ids = json::parse(tokens.out)["ids"];
  ASSERT_GE(ids.size(), 2u) << tokens.out;
  json towards_words = json::object();
  for (size_t i = 1; i < ids.size(); ++i) towards_words[std::to_string(ids[i].get<int>())] = 100;

  for (int seed = 0; seed < 6; ++seed) {
    const bool biased = seed >= 3;
    const std::string where = "seed " + std::to_string(seed) + (biased ? " towards words" : "");
    json body = request("generic", "auto", seed, false);
    if (biased) {
      body["logit_bias"] = towards_words;
      body["max_tokens"] = 40;
    }
    auto whole = post(body);
    ASSERT_EQ(whole.status, 200) << where << ": " << whole.body.substr(0, 400);
    const json message = json::parse(whole.body)["choices"][0]["message"];
    body["stream"] = true;
    auto streamed = post(body);
    ASSERT_EQ(streamed.status, 200) << where;
    const auto [streamed_calls, finish] = calls_of(streamed, true);
    if (!biased) {
      ASSERT_TRUE(message.contains("tool_calls")) << where << ": " << whole.body.substr(0, 600);
      EXPECT_EQ(finish, "tool_calls") << where;
      ASSERT_EQ(streamed_calls.size(), message["tool_calls"].size()) << where << ": " << streamed.body.substr(0, 600);
      for (size_t i = 0; i < streamed_calls.size(); ++i) {
        expect_valid_call(message["tool_calls"][i], where);
        EXPECT_EQ(streamed_calls[i]["function"], message["tool_calls"][i]["function"]) << where;
      }
      continue;
    }
    ASSERT_FALSE(message.contains("tool_calls")) << where << ": " << whole.body.substr(0, 600);
    ASSERT_TRUE(message["content"].is_string()) << where << ": " << whole.body.substr(0, 600);
    const std::string words = message["content"];
    EXPECT_FALSE(words.empty()) << where;
    EXPECT_EQ(words.find("{\"response\""), std::string::npos) << where << ": the words alone";
    EXPECT_TRUE(streamed_calls.empty()) << where;
    const testing::StreamedAnswer answer = testing::streamed_answer(streamed.body);
    EXPECT_EQ(answer.text, words) << where;
    EXPECT_EQ(answer.finish_reason, "length") << where;
    int pieces = 0;
    for (const std::string& data : testing::sse_events(streamed.body)) {
      const json e = data == "[DONE]" ? json::object() : json::parse(data);
      if (!e.contains("choices") || e["choices"].empty()) continue;
      const json delta = e["choices"][0].value("delta", json::object());
      if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty())
        ++pieces;
    }
    EXPECT_GE(pieces, 10) << where << ": the words go out as they come";
  }
}

// Anthropic's tool_choice any on a template without tool syntax: tool_use
// blocks whose input validates, whole and streamed.
TEST_F(ToolApi, GenericCallsThroughTheMessagesApi) {
  json tools = json::array();
  for (const json& t : kTools)
    tools.push_back({{"name", t["function"]["name"]},
                     {"description", t["function"]["description"]},
                     {"input_schema", t["function"]["parameters"]}});
  for (const bool stream : {false, true}) {
    const json body = {{"model", "generic-gemma"}, {"max_tokens", 300}, {"temperature", 1.0},
                       {"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
                       // One call: the grammar then ends the answer, so sampling at
                       // temperature 1 cannot run on adding calls until max_tokens.
                       {"tools", tools}, {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                       {"stream", stream}};
    auto r = post(body, "/v1/messages");
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 400);
    json uses = json::array();
    if (!stream) {
      const json m = json::parse(r.body);
      EXPECT_EQ(m["stop_reason"], "tool_use") << r.body;
      for (const json& block : m["content"])
        if (block["type"] == "tool_use") uses.push_back(block);
    } else {
      // Each call is one tool_use block with one input_json_delta.
      for (const std::string& data : testing::sse_events(r.body)) {
        const json e = json::parse(data);
        if (e["type"] == "content_block_start" && e["content_block"]["type"] == "tool_use") uses.push_back(e["content_block"]);
        if (e["type"] == "content_block_delta" && e["delta"]["type"] == "input_json_delta" && !uses.empty())
          uses.back()["input"] = json::parse(e["delta"]["partial_json"].get<std::string>());
        if (e["type"] == "message_delta") EXPECT_EQ(e["delta"]["stop_reason"], "tool_use") << r.body.substr(0, 600);
      }
    }
    ASSERT_GE(uses.size(), 1u) << r.body.substr(0, 600);
    for (const json& use : uses)
      expect_valid_call({{"type", "function"}, {"id", use["id"]},
                         {"function", {{"name", use["name"]}, {"arguments", use["input"].dump()}}}},
                        stream ? "messages streamed" : "messages");
  }
}

TEST_F(ToolApi, GenericToolsAndAnotherOutputShapeAre400) {
  // With tools the whole generic answer is the tool-call JSON: a
  // response_format would ask for another.
  json body = request("generic", "auto", 1, false);
  body["response_format"] = {{"type", "json_object"}};
  auto r = post(body);
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("response_format"), std::string::npos) << r.body;
  // tool_choice none: no tools, plain text.
  json none = request("generic", "none", 1, false);
  none["max_tokens"] = 4;
  auto plain = post(none);
  ASSERT_EQ(plain.status, 200) << plain.body.substr(0, 300);
  EXPECT_FALSE(json::parse(plain.body)["choices"][0]["message"].contains("tool_calls")) << plain.body;
}

}  // namespace
}  // namespace revis
