// Ollama's API (/api/chat, /api/generate, /api/embed, /api/tags, ...):
// requests rewritten as OpenAI ones, options mapped to sampling, refusals
// naming the field, answers as Ollama's objects and NDJSON lines; then
// against a real node, with Anthropic's count_tokens, whose count must be
// the prompt the answer reports.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "api/anthropic_api.h"
#include "api/ollama_api.h"
#include "net/client.h"
#include "node/api_node.h"

namespace revis::node {
namespace {

using nlohmann::json;

json user(const std::string& content) { return {{"role", "user"}, {"content", content}}; }

const json kWeatherTool = {{"type", "function"},
                           {"function",
                            {{"name", "get_weather"},
                             {"description", "Weather in a city"},
                             {"parameters",
                              {{"type", "object"},
                               {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                               {"required", {"city"}}}}}}};

TEST(OllamaApi, AChatWithToolsThinkingAndOptionsIsAChatRequest) {
  const json body = {
      {"model", "qwen2.5:7b"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        user("Weather in Paris and Rome?"),
        {{"role", "assistant"},
         {"content", ""},
         {"thinking", "Two cities, two calls."},
         {"tool_calls",
          {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}},
           {{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Rome"}}}}}}}}},
        {{"role", "tool"}, {"content", "21C"}, {"tool_name", "get_weather"}},
        {{"role", "tool"}, {"content", "25C"}, {"tool_name", "get_weather"}}}},
      {"tools", {kWeatherTool}},
      {"think", false},
      {"keep_alive", "5m"},
      {"options",
       {{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 7}, {"min_p", 0.1}, {"seed", 42}, {"num_predict", 33},
        {"stop", {"END"}}, {"repeat_penalty", 1.2}, {"repeat_last_n", 16}, {"presence_penalty", 0.5},
        {"frequency_penalty", 0.25}, {"num_ctx", 1024}, {"num_gpu", 99}, {"num_thread", 8}, {"invented", true}}}};
  auto r = parse_ollama_chat(body.dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "qwen2.5:7b");
  EXPECT_TRUE(r->stream) << "Ollama streams unless told not to";
  EXPECT_FALSE(r->load_only);
  EXPECT_EQ(r->num_ctx, 1024);
  const OpenAiRequest& chat = r->chat;
  EXPECT_TRUE(chat.chat);
  EXPECT_TRUE(chat.stream);
  EXPECT_FLOAT_EQ(chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(chat.sampling.top_p, 0.9f);
  EXPECT_EQ(chat.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(chat.sampling.min_p, 0.1f);
  EXPECT_EQ(chat.sampling.seed, 42u);
  EXPECT_TRUE(chat.seed_given);
  EXPECT_EQ(chat.max_tokens, 33);
  EXPECT_EQ(chat.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(chat.sampling.repeat_penalty, 1.2f);
  EXPECT_EQ(chat.sampling.repeat_last_n, 16);
  EXPECT_FLOAT_EQ(chat.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(chat.sampling.frequency_penalty, 0.25f);
  EXPECT_EQ(chat.chat_options.kwargs["enable_thinking"], false);
  ASSERT_EQ(chat.messages.size(), 5u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[2].fields["reasoning_content"], "Two cities, two calls.");
  const auto& calls = chat.messages[2].fields["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1]["function"]["arguments"]["city"], "Rome");
  // Ollama's calls carry no ids: the results answer them in order.
  EXPECT_EQ(chat.messages[3].fields["tool_call_id"], calls[0]["id"]);
  EXPECT_EQ(chat.messages[4].fields["tool_call_id"], calls[1]["id"]);
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);
  EXPECT_EQ(chat.messages[4].fields["name"], "get_weather");
  ASSERT_TRUE(chat.chat_options.tools.has_value());
  EXPECT_EQ((*chat.chat_options.tools)[0]["function"]["name"], "get_weather");
  EXPECT_EQ(chat.tool_use.choice, ToolChoice::kAuto) << "Ollama's API has no tool_choice";

  // The body a peer would run is the same request.
  auto again = parse_chat_request(r->chat_body);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->max_tokens, 33);
  EXPECT_EQ(again->sampling.repeat_last_n, 16);
  EXPECT_EQ(again->messages.size(), 5u);
}

TEST(OllamaApi, FormatAndThinkAndDefaults) {
  auto json_mode = parse_ollama_chat(json{{"messages", {user("x")}}, {"format", "json"}, {"stream", false}}.dump());
  ASSERT_TRUE(json_mode.ok()) << json_mode.error().message;
  EXPECT_TRUE(json_mode->chat.grammar != nullptr);
  EXPECT_FALSE(json_mode->stream);
  EXPECT_EQ(json_mode->chat.max_tokens, 0) << "no num_predict: until the context is full, as Ollama's -1";
  EXPECT_FALSE(json_mode->chat.seed_given);
  auto random_seed = parse_ollama_chat(json{{"messages", {user("x")}}, {"options", {{"seed", -1}}}}.dump());
  ASSERT_TRUE(random_seed.ok()) << random_seed.error().message;
  EXPECT_FALSE(random_seed->chat.seed_given) << "Ollama's seed -1 is a random seed";

  const json schema = {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}, {"required", {"n"}}};
  auto schema_mode = parse_ollama_chat(json{{"messages", {user("x")}}, {"format", schema}, {"think", "high"}}.dump());
  ASSERT_TRUE(schema_mode.ok()) << schema_mode.error().message;
  EXPECT_TRUE(schema_mode->chat.grammar != nullptr);
  EXPECT_EQ(schema_mode->chat.chat_options.kwargs["enable_thinking"], true);
  EXPECT_EQ(schema_mode->chat.chat_options.kwargs["reasoning_effort"], "high");

  auto generate = parse_ollama_generate(
      json{{"model", "m"}, {"prompt", "Why?"}, {"system", "Be kind."}, {"options", {{"num_predict", -2}}}}.dump());
  ASSERT_TRUE(generate.ok()) << generate.error().message;
  EXPECT_TRUE(generate->chat.chat);
  ASSERT_EQ(generate->chat.messages.size(), 2u);
  EXPECT_EQ(generate->chat.messages[0].content, "Be kind.");
  EXPECT_EQ(generate->chat.messages[1].content, "Why?");

  auto raw = parse_ollama_generate(json{{"prompt", "<|im_start|>user\nhi"}, {"raw", true}, {"system", "ignored"}}.dump());
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  EXPECT_FALSE(raw->chat.chat) << "raw: a completions request, the prompt as it is";
  EXPECT_EQ(raw->chat.prompt, "<|im_start|>user\nhi");
  EXPECT_GT(raw->chat.max_tokens, 1 << 20) << "no num_predict: no limit but the context";
  auto completion = parse_completion_request(raw->chat_body);
  ASSERT_TRUE(completion.ok()) << completion.error().message;
  EXPECT_EQ(completion->prompt, raw->chat.prompt);

  // Ollama's way to load a model: nothing to answer.
  EXPECT_TRUE(parse_ollama_chat(R"({"model":"m"})")->load_only);
  EXPECT_TRUE(parse_ollama_chat(R"({"model":"m","messages":[]})")->load_only);
  EXPECT_TRUE(parse_ollama_generate(R"({"model":"m"})")->load_only);

  OllamaRequest ctx;
  ctx.num_ctx = 4096;
  EXPECT_FALSE(check_num_ctx(ctx, 4096).has_value());
  EXPECT_FALSE(check_num_ctx(ctx, 0).has_value()) << "unknown context: nothing to check against";
  auto over = check_num_ctx(ctx, 2048);
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(over->code, ErrorCode::kBadRequest);
  EXPECT_NE(over->message.find("num_ctx"), std::string::npos) << over->message;
  EXPECT_NE(over->message.find("2048"), std::string::npos) << over->message;
}

TEST(OllamaApi, RefusesWhatItCannotHonourNamingTheField) {
  const std::pair<json, const char*> chat_cases[] = {
      {{{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}}}}, "messages[0].images"},
      {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content"},
      {{{"messages", {user("x")}}, {"format", "yaml"}}, "format"},
      {{{"messages", {user("x")}}, {"format", {{"type", "string"}, {"pattern", "^a"}}}}, "format"},
      {{{"messages", {user("x")}}, {"think", "very"}}, "think"},
      {{{"messages", {user("x")}}, {"keep_alive", {{"minutes", 5}}}}, "keep_alive"},
      {{{"messages", {user("x")}}, {"stream", "yes"}}, "stream"},
      {{{"messages", {user("x")}}, {"options", {{"temperature", 3}}}}, "options.temperature"},
      {{{"messages", {user("x")}}, {"options", {{"temperature", "hot"}}}}, "options.temperature"},
      {{{"messages", {user("x")}}, {"options", {{"num_predict", 0}}}}, "options.num_predict"},
      {{{"messages", {user("x")}}, {"options", {{"num_ctx", -1}}}}, "options.num_ctx"},
      {{{"messages", {user("x")}}, {"options", {{"mirostat", 2}}}}, "options.mirostat"},
      {{{"messages", {user("x")}}, {"options", {{"typical_p", 0.5}}}}, "options.typical_p"},
      {{{"messages", {user("x")}}, {"options", {{"stop", 5}}}}, "options.stop"},
      {{{"messages", {user("x")}}, {"options", "hot"}}, "options"},
      {{{"messages", {user("x")}}, {"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}},
       "tools[0].function.name"},
      {{{"messages",
         {{{"role", "assistant"}, {"content", ""}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "x"}}}}}}}}}},
       "messages[0].tool_calls[0].function.arguments"},
  };
  for (const auto& [body, names] : chat_cases) {
    auto r = parse_ollama_chat(body.dump());
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
    EXPECT_NE(r.error().message.find(names), std::string::npos) << names << ": " << r.error().message;
  }
  const std::pair<json, const char*> generate_cases[] = {
      {{{"prompt", "x"}, {"images", {"aGk="}}}, "images"},
      {{{"prompt", "x"}, {"template", "{{ .Prompt }}"}}, "template"},
      {{{"prompt", "x"}, {"context", {1, 2, 3}}}, "context"},
      {{{"prompt", "x"}, {"suffix", "end"}}, "suffix"},
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", "x"}, {"raw", "yes"}}, "raw"},
      {{{"prompt", "x"}, {"raw", true}, {"options", {{"tfs_z", 0.9}}}}, "options.tfs_z"},
  };
  for (const auto& [body, names] : generate_cases) {
    auto r = parse_ollama_generate(body.dump());
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_NE(r.error().message.find(names), std::string::npos) << names << ": " << r.error().message;
  }
  EXPECT_NE(parse_ollama_embed(R"({"input":[1,2]})", false).error().message.find("input"), std::string::npos);
  EXPECT_NE(parse_ollama_embed(R"({"prompt":""})", true).error().message.find("prompt"), std::string::npos);
  EXPECT_NE(parse_ollama_embed(R"({"input":"a","dimensions":8})", false).error().message.find("dimensions"),
            std::string::npos);
  auto embed = parse_ollama_embed(R"({"model":"m","input":["a","b"],"truncate":true,"keep_alive":300})", false);
  ASSERT_TRUE(embed.ok()) << embed.error().message;
  EXPECT_EQ(embed->embed.inputs.size(), 2u);
  EXPECT_EQ(embed->embed.model, "m");
  EXPECT_EQ(json::parse(ollama_error_for({ErrorCode::kQueueFull, "busy"})), json({{"error", "busy"}}));
}

JobResult answer(std::string text, std::string stop_reason) {
  JobResult r;
  r.text = std::move(text);
  r.stop_reason = std::move(stop_reason);
  r.stats.prompt_tokens = 20;
  r.stats.generated_tokens = 5;
  r.stats.total_ms = 12.5;
  r.stats.prefill_ms = 2;
  r.stats.generate_ms = 10;
  return r;
}

TEST(OllamaApi, AChatAnswerWholeAndAsNdjsonLines) {
  auto format = ollama_format(true, "small");
  EXPECT_EQ(format->framing(), StreamFraming::kNdjson);
  JobResult r = answer("Sunny", "eog");
  r.reasoning = "Look it up.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  const json whole = json::parse(format->response({&r, 1}, r.stats));
  EXPECT_EQ(whole["model"], "small");
  EXPECT_TRUE(whole["done"].get<bool>());
  EXPECT_EQ(whole["done_reason"], "stop");
  EXPECT_EQ(whole["message"]["role"], "assistant");
  EXPECT_EQ(whole["message"]["content"], "Sunny");
  EXPECT_EQ(whole["message"]["thinking"], "Look it up.");
  EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["arguments"], json({{"city", "Paris"}}))
      << "Ollama's arguments are an object";
  EXPECT_EQ(whole["prompt_eval_count"], 20);
  EXPECT_EQ(whole["eval_count"], 5);
  EXPECT_EQ(whole["total_duration"], 12500000) << "durations in ns";
  EXPECT_EQ(whole["eval_duration"], 10000000);
  const std::string created = whole["created_at"];
  EXPECT_EQ(created.size(), 30u) << created;
  EXPECT_EQ(created.back(), 'Z');

  AnswerFormat::Events events;
  format->begin(0, events);
  format->reasoning(0, "Look", events);
  format->content(0, "Sun", {}, events);
  format->content(0, "", {}, events);
  format->content(0, "ny", {}, events);
  format->end(0, r, {}, events);
  format->close(r.stats, events);
  ASSERT_EQ(events.size(), 5u);
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_TRUE(events[i].name.empty());
    EXPECT_EQ(events[i].data.find('\n'), std::string::npos) << "one object a line";
    const json line = json::parse(events[i].data);
    EXPECT_EQ(line["done"], i + 1 == events.size()) << events[i].data;
    text += line["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(json::parse(events[0].data)["message"]["thinking"], "Look");
  EXPECT_EQ(text, "Sunny");
  EXPECT_EQ(json::parse(events[3].data)["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  const json last = json::parse(events[4].data);
  EXPECT_EQ(last["done_reason"], "stop");
  EXPECT_EQ(last["eval_count"], 5);

  EXPECT_EQ(json::parse(format->response(std::vector<JobResult>{answer("a", "length")}, {}))["done_reason"], "length");
  EXPECT_EQ(json::parse(format->response(std::vector<JobResult>{answer("a", "context")}, {}))["done_reason"], "length");
  AnswerFormat::Events failed;
  format->failed({ErrorCode::kInternal, "lost"}, failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(json::parse(failed[0].data), json({{"error", "lost"}}));
}

TEST(OllamaApi, AGenerateAnswerAndALoad) {
  auto format = ollama_format(false, "small");
  JobResult r = answer("Because.", "stop");
  r.reasoning = "Hmm.";
  const json whole = json::parse(format->response({&r, 1}, r.stats));
  EXPECT_EQ(whole["response"], "Because.");
  EXPECT_EQ(whole["thinking"], "Hmm.");
  EXPECT_FALSE(whole.contains("message"));
  AnswerFormat::Events events;
  format->content(0, "Be", {}, events);
  format->end(0, r, {}, events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(json::parse(events[0].data)["response"], "Be");
  EXPECT_EQ(json::parse(events[1].data)["response"], "");
  EXPECT_TRUE(json::parse(events[1].data)["done"].get<bool>());

  const json load = json::parse(ollama_load_response(true, "small"));
  EXPECT_EQ(load["done_reason"], "load");
  EXPECT_TRUE(load["done"].get<bool>());
  EXPECT_EQ(load["message"]["content"], "");
}

TEST(OllamaApi, EmbeddingsAnswers) {
  JobResult r;
  r.embeddings = {{0.5f, -0.25f}, {1.0f, 0.0f}};
  r.stats.prompt_tokens = 4;
  const json embed = json::parse(ollama_embed_format("small", false)->response({&r, 1}, r.stats));
  EXPECT_EQ(embed["model"], "small");
  EXPECT_EQ(embed["embeddings"], json({{0.5, -0.25}, {1.0, 0.0}}));
  EXPECT_EQ(embed["prompt_eval_count"], 4);
  const json legacy = json::parse(ollama_embed_format("small", true)->response({&r, 1}, r.stats));
  EXPECT_EQ(legacy, json({{"embedding", {0.5, -0.25}}}));
}

// ---------------------------------------------------------------- a real node

// The objects of an NDJSON body, one a line.
std::vector<json> lines_of(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

class OllamaNode : public testing::ApiNode {
 protected:
  static HttpResponse call(const std::string& method, const std::string& path, const std::string& body = "",
                           const std::string& token = "s3cret") {
    auto r = http_request(node_->endpoint(), method, path, body,
                          {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + token}}, 120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
  static HttpResponse post(const std::string& path, const json& body) { return call("POST", path, body.dump()); }
};

// First: no request has loaded tier "thinker" yet.
TEST_F(OllamaNode, AModelNotLoadedYetIsListedAndCountedFor) {
  const json tags = json::parse(call("GET", "/api/tags").body);
  ASSERT_EQ(tags["models"].size(), 2u) << tags.dump();
  const json& thinker = tags["models"][1];
  EXPECT_EQ(thinker["name"], "thinker");
  EXPECT_EQ(thinker["details"]["family"], "") << "known once loaded";
  EXPECT_EQ(thinker["digest"].get<std::string>().size(), 64u) << "`ollama list` slices 12 digits of it";
  EXPECT_NE(thinker["digest"], tags["models"][0]["digest"]);
  EXPECT_EQ(tags["models"][0]["details"]["family"], "qwen2") << "the default tier is loaded at start";
  const json ps = json::parse(call("GET", "/api/ps").body);
  ASSERT_EQ(ps["models"].size(), 1u) << ps.dump();
  EXPECT_EQ(ps["models"][0]["name"], "small");

  // Counting tokens for it runs the request for one token, which loads it.
  const json request = {{"model", "thinker"}, {"messages", {user("Name a river.")}}, {"max_tokens", 300}};
  auto counted = post("/v1/messages/count_tokens", request);
  ASSERT_EQ(counted.status, 200) << counted.body;
  const json usage = json::parse(post("/v1/messages", request).body)["usage"];
  EXPECT_EQ(json::parse(counted.body)["input_tokens"],
            usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>());
  EXPECT_EQ(json::parse(call("GET", "/api/ps").body)["models"].size(), 2u);
}

TEST_F(OllamaNode, ChatStreamsNdjsonWithTheSameGreedyText) {
  const json body = {{"model", "small"},
                     {"messages", {{{"role", "system"}, {"content", "You are terse."}}, user("Name a river.")}},
                     {"options", {{"temperature", 0}, {"num_predict", 6}}}};
  auto streamed = post("/api/chat", body);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.headers["content-type"], "application/x-ndjson");
  const std::vector<json> lines = lines_of(streamed.body);
  ASSERT_GE(lines.size(), 2u) << streamed.body;
  std::string text;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_FALSE(lines[i]["done"].get<bool>());
    EXPECT_EQ(lines[i]["model"], "small");
    text += lines[i]["message"]["content"].get<std::string>();
  }
  const json& last = lines.back();
  EXPECT_TRUE(last["done"].get<bool>());
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["eval_count"], 6);
  EXPECT_GT(last["prompt_eval_count"].get<int>(), 5);
  EXPECT_GT(last["total_duration"].get<int64_t>(), 0);

  json whole_body = body;
  whole_body["stream"] = false;
  auto whole = post("/api/chat", whole_body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.headers["content-type"], "application/json");
  const json answer = json::parse(whole.body);
  EXPECT_EQ(answer["message"]["content"], text) << "greedy: the same text streamed or not";
  EXPECT_EQ(answer["prompt_eval_count"], last["prompt_eval_count"]);
  EXPECT_EQ(answer["done_reason"], "length");
}

TEST_F(OllamaNode, FormatConstrainsTheAnswerToTheSchema) {
  const json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
                       {"required", {"n"}}};
  for (const char* path : {"/api/chat", "/api/generate"}) {
    json body = {{"format", schema}, {"stream", false}, {"options", {{"temperature", 1.0}, {"seed", 7}}}};
    if (std::string(path) == "/api/chat") body["messages"] = json::array({user("A number?")});
    else body["prompt"] = "A number?";
    auto r = post(path, body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json answer = json::parse(r.body);
    const std::string text = std::string(path) == "/api/chat" ? answer["message"]["content"] : answer["response"];
    const json value = json::parse(text);
    ASSERT_TRUE(value["n"].is_number_integer()) << text;
    EXPECT_LE(value["n"].get<int>(), 99);
    EXPECT_EQ(answer["done_reason"], "stop") << "the grammar ended the answer";
  }
}

TEST_F(OllamaNode, GenerateRawAndThinking) {
  auto raw = post("/api/generate",
                  {{"prompt", "Once upon a time"}, {"raw", true}, {"stream", false}, {"options", {{"num_predict", 3}}}});
  ASSERT_EQ(raw.status, 200) << raw.body;
  const json r = json::parse(raw.body);
  EXPECT_EQ(r["eval_count"], 3);
  EXPECT_LT(r["prompt_eval_count"].get<int>(), 10) << "the prompt as it is, no template around it";

  auto thinking = post("/api/chat", {{"model", "thinker"}, {"messages", {user("Hi")}}, {"stream", false},
                                     {"options", {{"num_predict", 6}, {"temperature", 1.0}}}});
  const json t = json::parse(thinking.body);
  EXPECT_FALSE(t["message"].value("thinking", "").empty()) << thinking.body;
  auto generated = post("/api/generate", {{"model", "thinker"}, {"prompt", "Hi"},
                                          {"options", {{"num_predict", 6}, {"temperature", 1.0}}}});
  std::string streamed_thinking;
  for (const json& line : lines_of(generated.body)) streamed_thinking += line.value("thinking", "");
  EXPECT_FALSE(streamed_thinking.empty()) << generated.body;
  auto off = post("/api/chat", {{"model", "thinker"}, {"messages", {user("Hi")}}, {"stream", false}, {"think", false},
                                {"options", {{"num_predict", 6}}}});
  EXPECT_FALSE(json::parse(off.body)["message"].contains("thinking")) << off.body;
}

TEST_F(OllamaNode, ModelsVersionShowPsAndEmbed) {
  const json tags = json::parse(call("GET", "/api/tags").body);
  ASSERT_EQ(tags["models"].size(), 2u) << tags.dump();
  EXPECT_EQ(tags["models"][0]["name"], "small");
  EXPECT_EQ(tags["models"][0]["details"]["format"], "gguf");
  EXPECT_GT(tags["models"][0]["size"].get<uint64_t>(), 0u);
  for (const json& m : tags["models"])
    EXPECT_EQ(m["digest"].get<std::string>().size(), 64u) << "loaded or not, `ollama list` slices 12 digits of it";
  EXPECT_FALSE(json::parse(call("GET", "/api/version").body)["version"].get<std::string>().empty());

  const json show = json::parse(post("/api/show", {{"model", "small"}}).body);
  EXPECT_EQ(show["details"]["family"], "qwen2") << show.dump();
  EXPECT_EQ(show["details"]["quantization_level"], "Q8_0");
  EXPECT_NE(show["template"].get<std::string>().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(show["parameters"], "num_ctx 2048");
  EXPECT_NE(std::find(show["capabilities"].begin(), show["capabilities"].end(), "tools"), show["capabilities"].end());
  const json ps = json::parse(call("GET", "/api/ps").body);
  bool small_loaded = false;
  for (const json& m : ps["models"]) small_loaded = small_loaded || m["name"] == "small";
  EXPECT_TRUE(small_loaded) << ps.dump();

  const json embed = json::parse(post("/api/embed", {{"input", {"a river", "a mountain"}}}).body);
  ASSERT_EQ(embed["embeddings"].size(), 2u) << embed.dump();
  EXPECT_EQ(embed["embeddings"][0].size(), 256u) << "the model's width";
  const json legacy = json::parse(post("/api/embeddings", {{"prompt", "a river"}}).body);
  EXPECT_EQ(legacy["embedding"], embed["embeddings"][0]) << "the same text, the same vector";
}

TEST_F(OllamaNode, ErrorsAreOllamaShaped) {
  auto bad = post("/api/chat", {{"messages", {user("x")}}, {"options", {{"num_ctx", 100000}}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(json::parse(bad.body)["error"].get<std::string>().find("num_ctx"), std::string::npos) << bad.body;
  auto pull = post("/api/pull", {{"model", "llama3"}});
  EXPECT_EQ(pull.status, 400);
  EXPECT_NE(json::parse(pull.body)["error"].get<std::string>().find("/api/pull"), std::string::npos);
  auto unknown = call("GET", "/api/nothing");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_TRUE(json::parse(unknown.body)["error"].is_string());
  auto wrong_token = call("GET", "/api/tags", "", "nope");
  EXPECT_EQ(wrong_token.status, 401);
  EXPECT_TRUE(json::parse(wrong_token.body)["error"].is_string()) << wrong_token.body;
  auto method = call("GET", "/api/chat");
  EXPECT_EQ(method.status, 405);
  EXPECT_TRUE(json::parse(method.body)["error"].is_string());
  std::string words;
  for (int i = 0; i < 3000; ++i) words += "x ";  // more than the 2048 tokens of the context
  auto too_long = post("/api/chat", {{"messages", {user(words)}}});
  EXPECT_EQ(too_long.status, 400) << "refused before the stream opens";
  EXPECT_TRUE(json::parse(too_long.body)["error"].is_string());
  auto load = post("/api/generate", {{"model", "small"}});
  EXPECT_EQ(json::parse(load.body)["done_reason"], "load");
  EXPECT_EQ(call("HEAD", "/").status, 200) << "Ollama's clients check a server is up with HEAD /";
}

TEST_F(OllamaNode, CountTokensIsThePromptTheAnswerReports) {
  const json tools = {{{"name", "get_weather"},
                       {"description", "Weather in a city"},
                       {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}};
  const json request = {{"model", "small"}, {"system", "You are terse."}, {"messages", {user("Name a river.")}}};
  json with_tools = request;
  with_tools["tools"] = tools;
  int plain = 0;
  for (const json& body : {request, with_tools}) {
    auto counted = post("/v1/messages/count_tokens", body);
    ASSERT_EQ(counted.status, 200) << counted.body;
    const int input_tokens = json::parse(counted.body)["input_tokens"];
    json create = body;
    create["max_tokens"] = 1;
    const json usage = json::parse(post("/v1/messages", create).body)["usage"];
    // A prefix resumed from the cache is counted apart in the answer.
    EXPECT_EQ(input_tokens, usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>())
        << body.dump();
    if (plain == 0) plain = input_tokens;
    else EXPECT_GT(input_tokens, plain + 20) << "the tools are rendered into the prompt";
  }
  // The same conversation through Ollama's API renders the same prompt.
  auto ollama = post("/api/chat", {{"model", "small"}, {"stream", false},
                                   {"messages", {{{"role", "system"}, {"content", "You are terse."}}, user("Name a river.")}},
                                   {"options", {{"num_predict", 1}}}});
  EXPECT_EQ(json::parse(ollama.body)["prompt_eval_count"], plain);

  auto refused = post("/v1/messages/count_tokens", {{"messages", json::array()}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(json::parse(refused.body)["error"]["type"], "invalid_request_error");
}

}  // namespace
}  // namespace revis::node
