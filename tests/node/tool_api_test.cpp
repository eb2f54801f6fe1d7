// Tool calls through the OpenAI API on a real node with a random-weight
// model, one tier per family's template (Hermes/Qwen, Llama 3, Mistral,
// DeepSeek R1): tool_choice "required" and a named function give a call in
// the family's syntax whose arguments validate against the tool's schema,
// streamed (delta.tool_calls) and not (message.tool_calls); a conversation
// with the call and its result (role "tool") goes back in.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/json_schema_check.h"
#include "support/sse.h"
#include "support/testdata.h"

namespace revis {
namespace {

using nlohmann::json;
using testing::NodeProcess;

const char* const kFamilies[] = {"hermes", "llama3",    "mistral",   "deepseek",    "xml-function",
                                 "glm",    "kimi",      "command-r", "functionary", "harmony"};

class ToolApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("revis-tool-api-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    const std::string model = testing::testdata("models/qwen2-Q8_0.gguf").string();
    const std::string templates = testing::testdata("chat/templates").string() + "/";
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
    std::ofstream config(*dir_ / "node.toml");
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
  static node::HttpResponse post(const json& body) {
    auto r = node::http_request(node_->endpoint(), "POST", "/v1/chat/completions", body.dump(),
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
// ids) and the tool's result, sent back as a client does.
TEST_F(ToolApi, ACallAndItsResultGoBackIn) {
  for (const char* family : kFamilies) {
    auto first = post(request(family, "required", 11, false));
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

}  // namespace
}  // namespace revis
