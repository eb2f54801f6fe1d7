// The OpenAI API's output controls on a real node with a random-weight
// model: response_format (json_object, json_schema) and grammar make every
// answer a valid sentence, streamed or not; logit_bias and logprobs are
// honoured in OpenAI's shapes; and every field revis cannot honour, or
// honours only when well-formed, gets a 400 naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
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

class ConstrainedApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    node_ = new NodeProcess({"--tier", "small=" + testing::testdata("models/qwen2-Q8_0.gguf").string(), "-t", "2",
                             "-c", "2048"});
    ASSERT_TRUE(node_->wait_ready()) << node_->log();
  }
  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
  }
  static node::HttpResponse post(const std::string& target, const json& body) {
    auto r = node::http_request(node_->endpoint(), "POST", target, body.dump(),
                                {{"Content-Type", "application/json"}}, 120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
  static json chat(const json& extra, const std::string& user = "Describe a thing as JSON.") {
    json body = {{"model", "small"}, {"messages", {{{"role", "user"}, {"content", user}}}}};
    if (extra.is_object()) body.update(extra);
    return body;
  }
  static NodeProcess* node_;
};
NodeProcess* ConstrainedApi::node_ = nullptr;

// A random schema of the shapes structured-output clients send: objects
// with required and optional properties, enums, bounded numbers and
// integers, arrays with minItems/maxItems, nesting. Strings are bounded so
// that a random model's answers end well within max_tokens.
json random_schema(std::mt19937_64& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const int kind = depth >= 2 ? pick(6) : pick(8);
  switch (kind) {
    case 0: return {{"type", "string"}, {"maxLength", 1 + pick(8)}, {"minLength", pick(2)}};
    case 1: {
      json values = json::array();
      for (int i = 0, n = 1 + pick(4); i < n; ++i) values.push_back("v" + std::to_string(pick(100)));
      if (pick(2)) values.push_back(pick(50));
      return {{"enum", values}};
    }
    case 2: {
      const int lo = pick(200) - 100;
      return {{"type", "integer"}, {"minimum", lo}, {"maximum", lo + pick(300)}};
    }
    case 3: {
      const double lo = (pick(2000) - 1000) / 8.0;
      json s = {{"type", "number"}, {"minimum", lo}, {"maximum", lo + 1 + pick(500) / 4.0}};
      if (pick(2)) s.erase("maximum");
      return s;
    }
    case 4: return {{"type", "boolean"}};
    case 5: return pick(2) ? json{{"type", "null"}} : json{{"const", "fixed-" + std::to_string(pick(10))}};
    case 6: {
      const int min_items = pick(3);
      return {{"type", "array"}, {"items", random_schema(rng, depth + 1)}, {"minItems", min_items},
              {"maxItems", min_items + pick(3)}};
    }
    default: {
      json properties = json::object(), required = json::array();
      for (int i = 0, n = 1 + pick(4); i < n; ++i) {
        const std::string name = std::string(1, static_cast<char>('a' + i)) + std::to_string(pick(10));
        properties[name] = random_schema(rng, depth + 1);
        if (pick(3) > 0) required.push_back(name);
      }
      return {{"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
    }
  }
}

json parse_or_fail(const std::string& text, const json& schema) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "not JSON: " << text << "\nschema " << schema.dump() << "\n" << e.what();
    return json::value_t::discarded;
  }
}

TEST_F(ConstrainedApi, HundredJsonSchemaRequestsAllValidate) {
  std::mt19937_64 rng(2026);
  int validated = 0;
  for (int i = 0; i < 100; ++i) {
    json schema = random_schema(rng, 0);
    if (i % 2 == 0 && schema.value("type", "") != "object")  // most real requests want an object
      schema = {{"type", "object"}, {"properties", {{"answer", schema}}}, {"required", {"answer"}}};
    const json format = {{"type", "json_schema"},
                         {"json_schema", {{"name", "thing"}, {"schema", schema}, {"strict", true}}}};
    const bool stream = i % 4 == 3, completions = i % 5 == 4;
    json body = completions ? json{{"prompt", "JSON: "}} : chat({});
    body.update({{"response_format", format}, {"temperature", 1.0}, {"seed", i}, {"max_tokens", 3000},
                 {"stream", stream}});
    auto r = post(completions ? "/v1/completions" : "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body << "\nschema " << schema.dump();
    std::string text, finish;
    if (stream) {
      const testing::StreamedAnswer a = testing::streamed_answer(r.body);
      ASSERT_TRUE(a.done && a.error.is_null()) << r.body;
      text = a.text;
      finish = a.finish_reason;
    } else {
      const json choice = json::parse(r.body)["choices"][0];
      text = completions ? choice["text"] : choice["message"]["content"];
      finish = choice["finish_reason"];
    }
    EXPECT_EQ(finish, "stop") << "request " << i << " ran out of tokens: " << text.substr(0, 300);
    const json value = parse_or_fail(text, schema);
    if (value.is_discarded()) continue;
    std::string why;
    EXPECT_TRUE(testing::schema_accepts(value, schema, schema, &why))
        << "request " << i << ": " << text << "\nschema " << schema.dump() << "\n" << why;
    ++validated;
  }
  EXPECT_EQ(validated, 100);
}

TEST_F(ConstrainedApi, JsonObjectAndGrammar) {
  for (int seed = 0; seed < 5; ++seed) {
    auto r = post("/v1/chat/completions", chat({{"response_format", {{"type", "json_object"}}}, {"seed", seed},
                                                {"temperature", 1.0}, {"max_tokens", 3000}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = json::parse(r.body)["choices"][0];
    if (choice["finish_reason"] != "stop") continue;  // a long object cut at max_tokens proves nothing
    EXPECT_TRUE(json::parse(choice["message"]["content"].get<std::string>()).is_object()) << r.body;
  }
  // llama.cpp's GBNF field, on both endpoints, streamed and not.
  const std::string gbnf = R"g(root ::= "answer: " ("yes" | "no") " (" [0-9] [0-9]? "%)")g";
  for (const char* path : {"/v1/chat/completions", "/v1/completions"})
    for (bool stream : {false, true}) {
      json body = std::string(path) == "/v1/completions" ? json{{"prompt", "Q: "}} : chat({});
      body.update({{"grammar", gbnf}, {"temperature", 1.0}, {"seed", 7}, {"max_tokens", 50}, {"stream", stream}});
      auto r = post(path, body);
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text;
      if (stream) {
        text = testing::streamed_answer(r.body).text;
      } else {
        const json choice = json::parse(r.body)["choices"][0];
        text = choice.contains("message") ? choice["message"]["content"] : choice["text"];
      }
      const bool ok = text.rfind("answer: yes (", 0) == 0 || text.rfind("answer: no (", 0) == 0;
      EXPECT_TRUE(ok && text.back() == ')' && text[text.size() - 2] == '%') << path << " " << stream << ": " << text;
    }
}

TEST_F(ConstrainedApi, LogitBiasIsHonoured) {
  // +100 on one token and -100 on its neighbours: greedy decoding picks it
  // every time.
  const json body = chat({{"max_tokens", 6}, {"temperature", 0}, {"logprobs", true}});
  auto plain = post("/v1/chat/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  json biased_body = body;
  biased_body["logit_bias"] = json::object();
  for (int id = 300; id < 310; ++id) biased_body["logit_bias"][std::to_string(id)] = id == 305 ? 100 : -100;
  auto biased = post("/v1/chat/completions", biased_body);
  ASSERT_EQ(biased.status, 200) << biased.body;
  const json content = json::parse(biased.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u) << biased.body;
  for (const json& t : content) {
    EXPECT_EQ(t["token"], content[0]["token"]) << biased.body;
    EXPECT_GT(t["logprob"].get<double>(), -0.01) << "a +100 bias leaves the others no mass";
  }
  EXPECT_NE(json::parse(biased.body)["choices"][0]["message"]["content"],
            json::parse(plain.body)["choices"][0]["message"]["content"]);
}

TEST_F(ConstrainedApi, LogprobsInOpenAiShapesStreamedAndNot) {
  const json body = chat({{"max_tokens", 8}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 3}});
  auto r = post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  const json& content = choice["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u) << r.body;
  std::string joined;
  for (const json& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
    EXPECT_NEAR(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>(), 1e-5);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    for (const json& b : t["bytes"]) joined.push_back(static_cast<char>(b.get<int>()));
  }
  EXPECT_EQ(joined, choice["message"]["content"]);

  // Streamed: the chunks' entries, in order, are the same.
  json streamed_body = body;
  streamed_body["stream"] = true;
  auto s = post("/v1/chat/completions", streamed_body);
  ASSERT_EQ(s.status, 200);
  json streamed = json::array();
  for (const std::string& data : testing::sse_events(s.body)) {
    if (data == "[DONE]") continue;
    const json e = json::parse(data);
    if (e["choices"].empty() || e["choices"][0]["logprobs"].is_null()) continue;
    for (const json& t : e["choices"][0]["logprobs"]["content"]) streamed.push_back(t);
  }
  EXPECT_EQ(streamed, content);

  // Legacy completions: logprobs is the number of alternatives.
  auto c = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}});
  ASSERT_EQ(c.status, 200) << c.body;
  const json lp = json::parse(c.body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << c.body;
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["top_logprobs"].size(), 5u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  // Without the field, the response keeps "logprobs": null.
  auto none = post("/v1/chat/completions", chat({{"max_tokens", 2}}));
  EXPECT_TRUE(json::parse(none.body)["choices"][0]["logprobs"].is_null());
}

TEST_F(ConstrainedApi, BadOrUnsupportedFieldsAre400sNamingTheField) {
  struct Case {
    json extra;
    std::string names;
    bool at_run = false;  // found when the job runs (needs the model's vocabulary)
  };
  const std::vector<Case> cases = {
      {{{"grammar", "root ::= missing"}}, "grammar"},
      {{{"grammar", 42}}, "grammar"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"response_format", "json"}}, "response_format"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {json::parse(R"({"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})"),
       "response_format.json_schema.schema"},
      {json::parse(R"({"response_format":{"type":"json_schema","json_schema":{"name":"x",
                       "schema":{"type":"string","pattern":"a+"}}}})"),
       "pattern"},
      {{{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"x\""}}, "grammar"},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", 101}}}}, "logit_bias"},
      {{{"logit_bias", {{"99999999", 1}}}}, "logit_bias", true},  // beyond the vocabulary
      {{{"logprobs", "yes"}}, "logprobs"},
      {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"n", 17}}, "n"},
      {{{"tool_choice", "required"}}, "tool_choice"},
      {{{"functions", json::array({{{"name", "f"}}})}}, "functions"},
      {{{"audio", {{"voice", "alloy"}}}}, "audio"},
      {{{"modalities", {"text", "audio"}}}, "modalities"},
  };
  for (const Case& c : cases) {
    for (bool stream : {false, true}) {
      json body = chat(c.extra);
      body["max_tokens"] = 4;
      body["stream"] = stream;
      auto r = post("/v1/chat/completions", body);
      json e;
      if (c.at_run && stream && r.status == 200) {  // the stream was open before the job ran
        e = testing::streamed_answer(r.body).error;
        ASSERT_TRUE(e.is_object()) << r.body;
      } else {
        EXPECT_EQ(r.status, 400) << c.extra.dump() << " stream " << stream << ": " << r.body.substr(0, 300);
        if (r.status != 400) continue;
        e = json::parse(r.body)["error"];
      }
      EXPECT_EQ(e["type"], "invalid_request_error");
      EXPECT_NE(e["message"].get<std::string>().find(c.names), std::string::npos) << e.dump();
    }
  }
  for (const json& extra : {json{{"logprobs", 21}}, json{{"logprobs", true}}, json{{"suffix", "end"}},
                            json{{"best_of", 3}}, json{{"grammar", "root ::= ("}}}) {
    json body = {{"prompt", "Hi"}, {"max_tokens", 2}};
    body.update(extra);
    auto r = post("/v1/completions", body);
    EXPECT_EQ(r.status, 400) << extra.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(extra.begin().key()), std::string::npos) << r.body;
  }
}

}  // namespace
}  // namespace revis
