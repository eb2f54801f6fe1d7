// OpenAI's Responses API (POST /v1/responses): input items rewritten as a
// chat request, refusals naming the field, conversations continued from
// the store, answers written as response objects and event streams (the
// same output whole and streamed), and curl-shaped requests against a real
// node: text, streaming, function calls, JSON schemas, thinking,
// previous_response_id, GET and DELETE, errors.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "api/responses_api.h"
#include "net/client.h"
#include "node/api_node.h"
#include "support/json_schema_check.h"
#include "support/sse.h"
#include "support/testdata.h"

namespace revis::node {
namespace {

using nlohmann::json;

const json kWeatherFunction = {{"type", "function"},
                           {"name", "get_weather"},
                           {"description", "Weather in a city"},
                           {"parameters",
                            {{"type", "object"},
                             {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                             {"required", {"city"}}}},
                           {"strict", true}};

Outcome<ResponsesRequest> parse(const json& body, const ResponseStore& store = ResponseStore()) {
  return parse_responses_request(body.dump(), store);
}

TEST(ResponsesApi, RewritesInputItemsAsAChatConversation) {
  const json body = {
      {"model", "gpt-5"},
      {"instructions", "Be brief."},
      {"input",
       {{{"role", "developer"}, {"content", "Use tools."}},
        {{"type", "message"}, {"role", "user"},
         {"content", {{{"type", "input_text"}, {"text", "Weather in "}}, {{"type", "input_text"}, {"text", "Paris?"}}}}},
        {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()},
         {"content", {{{"type", "reasoning_text"}, {"text", "I should call the tool."}}}}},
        {{"type", "message"}, {"role", "assistant"}, {"id", "msg_1"}, {"status", "completed"},
         {"content", {{{"type", "output_text"}, {"text", "Let me look."}, {"annotations", json::array()}}}}},
        {{"type", "function_call"}, {"call_id", "call_1"}, {"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}},
        {{"type", "function_call"}, {"call_id", "call_2"}, {"name", "get_weather"}, {"arguments", R"({"city":"Lyon"})"}},
        {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "21C"}},
        {{"type", "function_call_output"}, {"call_id", "call_2"},
         {"output", {{{"type", "input_text"}, {"text", "19C"}}}}},
        {{"role", "user"}, {"content", "And tomorrow?"}}}},
      {"tools", {kWeatherFunction}},
      {"tool_choice", "auto"},
      {"parallel_tool_calls", false},
      {"max_output_tokens", 64},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"reasoning", {{"effort", "minimal"}, {"summary", "auto"}}},
      {"include", {"message.output_text.logprobs", "reasoning.encrypted_content"}},
      {"top_logprobs", 3},
      {"metadata", {{"k", "v"}}},
      {"user", "u1"},
      {"service_tier", "auto"},
      {"store", false}};
  auto r = parse(body);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const OpenAiRequest& chat = r->chat;
  EXPECT_EQ(chat.model, "gpt-5");
  EXPECT_EQ(chat.max_tokens, 64);
  EXPECT_FLOAT_EQ(chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(chat.sampling.top_p, 0.9f);
  EXPECT_FALSE(chat.stream);
  EXPECT_FALSE(chat.tool_use.parallel);
  EXPECT_TRUE(chat.logprobs);
  EXPECT_EQ(chat.top_logprobs, 3);
  EXPECT_EQ(chat.chat_options.kwargs["enable_thinking"], true);
  EXPECT_EQ(chat.chat_options.kwargs["reasoning_effort"], "low") << "minimal is the lowest level templates know";
  ASSERT_EQ(chat.messages.size(), 7u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content, "Be brief.");
  EXPECT_EQ(chat.messages[1].role, "system") << "developer, as chat requests take it";
  EXPECT_EQ(chat.messages[1].content, "Use tools.");
  EXPECT_EQ(chat.messages[2].content, "Weather in Paris?");
  // The reasoning, the message and both calls are one assistant turn.
  EXPECT_EQ(chat.messages[3].role, "assistant");
  EXPECT_EQ(chat.messages[3].content, "Let me look.");
  EXPECT_EQ(chat.messages[3].fields["reasoning_content"], "I should call the tool.");
  ASSERT_EQ(chat.messages[3].fields["tool_calls"].size(), 2u);
  EXPECT_EQ(chat.messages[3].fields["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(chat.messages[3].fields["tool_calls"][1]["function"]["arguments"]["city"], "Lyon");
  EXPECT_EQ(chat.messages[4].role, "tool");
  EXPECT_EQ(chat.messages[4].fields["tool_call_id"], "call_1");
  EXPECT_EQ(chat.messages[4].content, "21C");
  EXPECT_EQ(chat.messages[5].content, "19C");
  EXPECT_EQ(chat.messages[6].role, "user");
  ASSERT_TRUE(chat.chat_options.tools.has_value());
  EXPECT_EQ((*chat.chat_options.tools)[0]["function"]["name"], "get_weather");
  EXPECT_EQ((*chat.chat_options.tools)[0]["function"]["parameters"]["required"][0], "city");
  EXPECT_EQ(chat.tool_use.choice, ToolChoice::kAuto);
  // What a peer gets is the same request.
  auto again = parse_chat_request(r->chat_body);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->messages.size(), chat.messages.size());
  // The conversation to keep is the input as given; the instructions are not part of it.
  EXPECT_EQ(r->conversation, body["input"]);
  EXPECT_FALSE(r->store);
  const json& s = r->settings;
  EXPECT_EQ(s["instructions"], "Be brief.");
  EXPECT_EQ(s["max_output_tokens"], 64);
  EXPECT_EQ(s["parallel_tool_calls"], false);
  EXPECT_EQ(s["reasoning"]["effort"], "minimal");
  EXPECT_EQ(s["tools"][0]["name"], "get_weather");
  EXPECT_EQ(s["text"]["format"]["type"], "text");
  EXPECT_EQ(s["metadata"]["k"], "v");
  EXPECT_EQ(s["store"], false);
}

TEST(ResponsesApi, AStringIsOneUserMessageAndFormatsAreConstraints) {
  auto plain = parse({{"input", "Hi"}, {"stream", true}});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_EQ(plain->chat.messages.size(), 1u);
  EXPECT_EQ(plain->chat.messages[0].role, "user");
  EXPECT_EQ(plain->chat.messages[0].content, "Hi");
  EXPECT_TRUE(plain->chat.stream);
  EXPECT_EQ(plain->chat.grammar, nullptr);
  EXPECT_EQ(plain->conversation, json::parse(R"([{"type":"message","role":"user","content":"Hi"}])"));
  EXPECT_TRUE(plain->store) << "store is the default";
  EXPECT_EQ(plain->settings["temperature"], 0.8) << "the sampler's default, as run";
  EXPECT_EQ(plain->settings["tool_choice"], "auto");

  const json schema = {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}, {"required", {"n"}}};
  for (const json& format : {json{{"type", "json_schema"}, {"name", "n"}, {"schema", schema}, {"strict", true}},
                             json{{"type", "json_object"}}}) {
    auto r = parse({{"input", "Hi"}, {"text", {{"format", format}, {"verbosity", "low"}}}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_NE(r->chat.grammar, nullptr) << format.dump();
    EXPECT_EQ(r->settings["text"]["format"], format);
  }
  auto named = parse({{"input", "Hi"}, {"tools", {kWeatherFunction}}, {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->chat.tool_use.choice, ToolChoice::kNamed);
  EXPECT_EQ(named->chat.tool_use.name, "get_weather");
  // Codex sends reasoning back as a summary with encrypted content, which
  // revis cannot read: the summary stands in for the thinking.
  auto summarised = parse({{"input",
                            {{{"role", "user"}, {"content", "Hi"}},
                             {{"type", "reasoning"}, {"content", nullptr}, {"encrypted_content", "gAAA"},
                              {"summary", {{{"type", "summary_text"}, {"text", "Greet."}},
                                           {{"type", "summary_text"}, {"text", "Briefly."}}}}},
                             {{"type", "message"}, {"role", "assistant"}, {"content", "Hello."}},
                             {{"role", "user"}, {"content", "Again"}}}}});
  ASSERT_TRUE(summarised.ok()) << summarised.error().message;
  ASSERT_EQ(summarised->chat.messages.size(), 3u);
  EXPECT_EQ(summarised->chat.messages[1].fields["reasoning_content"], "Greet.\n\nBriefly.");
  EXPECT_EQ(summarised->chat.messages[1].content, "Hello.");
  auto off = parse({{"input", "Hi"}, {"reasoning", {{"effort", "none"}}}});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(off->chat.chat_options.kwargs["enable_thinking"], false);
  EXPECT_FALSE(off->chat.chat_options.kwargs.contains("reasoning_effort"));
}

TEST(ResponsesApi, RefusesWhatItCannotHonourNamingTheField) {
  const json unenforceable = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"pattern", "^a"}}}}}};
  json bad_tool = kWeatherFunction;
  bad_tool["parameters"] = unenforceable;
  json bad_name = kWeatherFunction;
  bad_name["name"] = "get weather";
  const std::pair<json, const char*> cases[] = {
      {json::object(), "input"},
      {{{"input", 3}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}, "input[0].content[0]"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "f"}}}}}}}}, "input[0].content[0]"},
      {{{"input", {{{"role", "tool"}, {"content", "x"}}}}}, "input[0].role"},
      {{{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{oops"}}}}}, "input[0].arguments"},
      {{{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "[1]"}}}}}, "input[0].arguments"},
      {{{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}, "input[0].call_id"},
      {{{"input", {"Hi", {{"type", "item_reference"}, {"id", "msg_1"}}}}}, "input[0]"},
      {{{"input", {{{"role", "user"}, {"content", "x"}}, {{"type", "web_search_call"}, {"id", "ws"}}}}}, "input[1].type"},
      {{{"input", "x"}, {"tools", {{{"type", "web_search"}}}}}, "tools[0].type"},
      {{{"input", "x"}, {"tools", {bad_tool}}}, "tools[0].parameters"},
      {{{"input", "x"}, {"tools", {bad_name}}}, "tools[0].name"},
      {{{"input", "x"}, {"tools", {kWeatherFunction}}, {"tool_choice", {{"type", "function"}, {"name", "other"}}}}, "tool_choice"},
      {{{"input", "x"}, {"tools", {kWeatherFunction}}, {"tool_choice", {{"type", "allowed_tools"}, {"mode", "auto"}}}},
       "tool_choice.type"},
      {{{"input", "x"}, {"tool_choice", "required"}}, "tool_choice"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "grammar"}}}}}}, "text.format.type"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}}}}}}, "text.format.schema"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "n"}, {"schema", unenforceable}}}}}},
       "text.format.schema"},
      {{{"input", "x"}, {"reasoning", {{"effort", "extreme"}}}}, "reasoning.effort"},
      {{{"input", "x"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"input", "x"}, {"temperature", 3}}, "temperature"},
      {{{"input", "x"}, {"store", "yes"}}, "store"},
      {{{"input", "x"}, {"background", true}}, "background"},
      {{{"input", "x"}, {"truncation", "auto"}}, "truncation"},
      {{{"input", "x"}, {"conversation", "conv_1"}}, "conversation"},
      {{{"input", "x"}, {"prompt", {{"id", "pmpt_1"}}}}, "prompt"},
      {{{"input", "x"}, {"include", "message.output_text.logprobs"}}, "include"},
      {{{"input", "x"}, {"top_logprobs", 21}}, "top_logprobs"},
      {{{"input", "x"}, {"previous_response_id", "resp_unknown"}}, "previous_response_id"},
  };
  for (const auto& [body, names] : cases) {
    auto r = parse(body);
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
    EXPECT_NE(r.error().message.find(names), std::string::npos) << body.dump() << ": " << r.error().message;
  }
}

// An answer of 5 tokens to a prompt of 20, 8 of them cached.
JobResult finished_answer(std::string text, std::string stop_reason) {
  return {.text = std::move(text), .stop_reason = std::move(stop_reason),
          .stats = {.prompt_tokens = 20, .cached_tokens = 8, .generated_tokens = 5}};
}

ResponsesShape shape(ResponseStore* store = nullptr, json conversation = json::array()) {
  return {.id = "resp_1", .model = "small", .created = 1700000000,
          .settings = {{"instructions", "Be brief."}, {"store", store != nullptr}}, .logprobs = false,
          .store = store, .conversation = std::move(conversation)};
}

TEST(ResponsesApi, AResponseWithItsItemsStatusAndUsage) {
  ResponseStore store;
  const json conversation = json::parse(R"([{"type":"message","role":"user","content":"Weather?"}])");
  auto format = responses_format(shape(&store, conversation));
  JobResult r = finished_answer("It is sunny.", "eog");
  r.reasoning = "Look it up.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  const json o = json::parse(format->response({&r, 1}, r.stats));
  EXPECT_EQ(o["id"], "resp_1");
  EXPECT_EQ(o["object"], "response");
  EXPECT_EQ(o["created_at"], 1700000000);
  EXPECT_EQ(o["status"], "completed");
  EXPECT_EQ(o["model"], "small");
  EXPECT_EQ(o["instructions"], "Be brief.") << "the settings are repeated";
  EXPECT_TRUE(o["error"].is_null());
  EXPECT_TRUE(o["incomplete_details"].is_null());
  EXPECT_FALSE(o.contains("output_text")) << "the SDKs compute it; the server sends none";
  ASSERT_EQ(o["output"].size(), 3u);
  EXPECT_EQ(o["output"][0]["type"], "reasoning");
  EXPECT_EQ(o["output"][0]["content"][0]["type"], "reasoning_text");
  EXPECT_EQ(o["output"][0]["content"][0]["text"], "Look it up.");
  EXPECT_EQ(o["output"][1]["type"], "message");
  EXPECT_EQ(o["output"][1]["role"], "assistant");
  EXPECT_EQ(o["output"][1]["status"], "completed");
  EXPECT_EQ(o["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(o["output"][1]["content"][0]["text"], "It is sunny.");
  EXPECT_EQ(o["output"][2]["type"], "function_call");
  EXPECT_EQ(o["output"][2]["call_id"], "call_1");
  EXPECT_EQ(o["output"][2]["name"], "get_weather");
  EXPECT_EQ(json::parse(o["output"][2]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_NE(o["output"][0]["id"], o["output"][1]["id"]);
  EXPECT_EQ(o["usage"]["input_tokens"], 20);
  EXPECT_EQ(o["usage"]["input_tokens_details"]["cached_tokens"], 8);
  EXPECT_EQ(o["usage"]["output_tokens"], 5);
  EXPECT_EQ(o["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
  EXPECT_EQ(o["usage"]["total_tokens"], 25);
  // Kept with its conversation: a continuation follows both.
  auto kept = store.find("resp_1");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->conversation, conversation);
  EXPECT_EQ(kept->output, o["output"]);
  EXPECT_EQ(json::parse(kept->object), o);

  // Cut at max_output_tokens: incomplete; without calls an empty answer is still a message.
  for (const char* reason : {"length", "context"}) {
    JobResult cut = finished_answer("", reason);
    const json c = json::parse(responses_format(shape())->response({&cut, 1}, cut.stats));
    EXPECT_EQ(c["status"], "incomplete");
    EXPECT_EQ(c["incomplete_details"]["reason"], "max_output_tokens");
    ASSERT_EQ(c["output"].size(), 1u);
    EXPECT_EQ(c["output"][0]["status"], "incomplete");
    EXPECT_EQ(c["output"][0]["content"][0]["text"], "");
  }
  JobResult only_call = finished_answer("", "eog");
  only_call.tool_calls = r.tool_calls;
  const json call = json::parse(responses_format(shape())->response({&only_call, 1}, only_call.stats));
  ASSERT_EQ(call["output"].size(), 1u) << "a call alone is no message";
  EXPECT_EQ(call["output"][0]["type"], "function_call");
}

// Codex groups tools in namespace tools: their functions reach the template
// as NAMESPACE__NAME, and the answer's calls carry the namespace apart, as
// the calls sent back in do.
TEST(ResponsesApi, NamespaceToolsAreFunctionsWhoseCallsNameTheirNamespace) {
  json function = kWeatherFunction;
  function.erase("strict");
  const json body = {
      {"input",
       {{{"role", "user"}, {"content", "Weather?"}},
        {{"type", "function_call"}, {"call_id", "c1"}, {"namespace", "meteo"}, {"name", "get_weather"},
         {"arguments", R"({"city":"Oslo"})"}},
        {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "-3C"}}}},
      {"tools", {{{"type", "namespace"}, {"name", "meteo"}, {"description", "Weather tools."}, {"tools", {function}}},
                 kWeatherFunction}}};
  auto r = parse(body);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->chat.chat_options.tools->size(), 2u);
  const auto& flat = (*r->chat.chat_options.tools)[0]["function"];
  EXPECT_EQ(flat["name"], "meteo__get_weather");
  EXPECT_EQ(flat["description"], "(meteo: Weather tools.) Weather in a city");
  EXPECT_EQ((*r->chat.chat_options.tools)[1]["function"]["name"], "get_weather") << "a plain function keeps its name";
  EXPECT_EQ(r->namespaced.at("meteo__get_weather"), (std::pair<std::string, std::string>{"meteo", "get_weather"}));
  const auto& call = r->chat.messages.at(1);
  ASSERT_EQ(call.fields["tool_calls"].size(), 1u);
  EXPECT_EQ(call.fields["tool_calls"][0]["function"]["name"], "meteo__get_weather")
      << "a call sent back in names its namespace";

  ResponsesShape namespaced = shape();
  namespaced.namespaced = r->namespaced;
  JobResult answer = finished_answer("", "eog");
  answer.tool_calls = {{"call_9", "meteo__get_weather", R"({"city":"Oslo"})"}, {"call_10", "get_weather", "{}"}};
  const json whole = json::parse(responses_format(namespaced)->response({&answer, 1}, answer.stats));
  ASSERT_EQ(whole["output"].size(), 2u);
  EXPECT_EQ(whole["output"][0]["namespace"], "meteo");
  EXPECT_EQ(whole["output"][0]["name"], "get_weather");
  EXPECT_FALSE(whole["output"][1].contains("namespace"));
  AnswerFormat::Events events;
  auto streamed = responses_format(namespaced);
  streamed->begin(0, events);
  streamed->end(0, answer, {}, events);
  bool done_named = false;
  for (const SseEvent& e : events)
    if (e.name == "response.function_call_arguments.done" && json::parse(e.data)["item_id"] == whole["output"][0]["id"])
      done_named = json::parse(e.data)["name"] == "get_weather";
  EXPECT_TRUE(done_named) << "the streamed call names the function, not its chat name";

  json long_name = body;
  long_name["tools"][0]["name"] = std::string(60, 'n');
  auto refused = parse(long_name);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("tools[0].tools[0].name"), std::string::npos) << refused.error().message;
}

TEST(ResponsesApi, AStreamNumbersItsEventsAndEndsWithTheWholeResponse) {
  JobResult r = finished_answer("Sunny", "eog");
  r.reasoning = "Hmm.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  ResponseStore store;
  auto format = responses_format(shape(&store));
  AnswerFormat::Events events;
  format->begin(0, events);
  format->reasoning(0, "Hmm", events);
  format->reasoning(0, ".", events);
  format->content(0, "Sun", {}, events);
  format->content(0, "", {}, events);
  format->content(0, "ny", {}, events);
  format->end(0, r, {}, events);
  format->close(r.stats, events);
  std::vector<std::string> names;
  for (size_t i = 0; i < events.size(); ++i) {
    const json data = json::parse(events[i].data);
    names.push_back(events[i].name);
    EXPECT_EQ(data["type"], events[i].name);
    EXPECT_EQ(data["sequence_number"], i);
  }
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(names, expected);
  const json created = json::parse(events[0].data)["response"];
  EXPECT_EQ(created["status"], "in_progress");
  EXPECT_TRUE(created["output"].empty());
  EXPECT_TRUE(created["error"].is_null()) << "the SDK throws on an event whose error is set";
  EXPECT_EQ(json::parse(events[2].data)["item"]["type"], "reasoning");
  EXPECT_EQ(json::parse(events[11].data)["delta"], "Sun");
  EXPECT_EQ(json::parse(events[11].data)["output_index"], 1);
  EXPECT_EQ(json::parse(events[13].data)["text"], "Sunny");
  EXPECT_EQ(json::parse(events[16].data)["item"]["arguments"], "");
  EXPECT_EQ(json::parse(events[18].data)["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(json::parse(events[18].data)["name"], "get_weather");
  const json done = json::parse(events.back().data)["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["usage"]["output_tokens"], 5);
  // The stream's items are those of the whole answer, ids and all.
  const json whole = json::parse(responses_format(shape())->response({&r, 1}, r.stats));
  EXPECT_EQ(done["output"], whole["output"]);
  ASSERT_NE(store.find("resp_1"), nullptr);
  EXPECT_EQ(store.find("resp_1")->output, whole["output"]);

  // Cut short: response.incomplete, the message incomplete.
  AnswerFormat::Events cut;
  auto cut_format = responses_format(shape());
  cut_format->begin(0, cut);
  cut_format->content(0, "Sun", {}, cut);
  cut_format->end(0, finished_answer("Sun", "length"), {}, cut);
  cut_format->close(r.stats, cut);
  EXPECT_EQ(cut.back().name, "response.incomplete");
  EXPECT_EQ(json::parse(cut.back().data)["response"]["output"][0]["status"], "incomplete");

  // A failure after the stream opened: response.failed, never kept.
  ResponseStore failures;
  auto failing = responses_format(shape(&failures));
  AnswerFormat::Events failed;
  failing->begin(0, failed);
  failing->failed({ErrorCode::kInternal, "lost"}, failed);
  EXPECT_EQ(failed.back().name, "response.failed");
  const json f = json::parse(failed.back().data)["response"];
  EXPECT_EQ(f["status"], "failed");
  EXPECT_EQ(f["error"]["message"], "lost");
  EXPECT_EQ(failures.size(), 0u);
}

TEST(ResponsesApi, LogprobsRideOnTheDeltasAndTheText) {
  ResponsesShape with_logprobs = shape();
  with_logprobs.logprobs = true;
  auto format = responses_format(with_logprobs);
  const LogprobEntry a{{"Sun", -0.5f}, {{"Sun", -0.5f}, {"Rain", -1.5f}}}, b{{"ny", -0.1f}, {}};
  AnswerFormat::Events events;
  format->begin(0, events);
  format->content(0, "Sun", std::span(&a, 1), events);
  format->end(0, finished_answer("Sun", "stop"), std::span(&b, 1), events);
  format->close({}, events);
  json delta, done;
  for (const SseEvent& e : events) {
    if (e.name == "response.output_text.delta") delta = json::parse(e.data);
    if (e.name == "response.completed") done = json::parse(e.data)["response"];
  }
  ASSERT_EQ(delta["logprobs"].size(), 1u);
  EXPECT_EQ(delta["logprobs"][0]["token"], "Sun");
  EXPECT_EQ(delta["logprobs"][0]["top_logprobs"][1]["token"], "Rain");
  const json& logprobs = done["output"][0]["content"][0]["logprobs"];
  ASSERT_EQ(logprobs.size(), 2u) << "the entries a delta never carried come at the end";
  EXPECT_EQ(logprobs[1]["token"], "ny");
}

TEST(ResponsesApi, PreviousResponseIdContinuesTheKeptConversation) {
  ResponseStore store;
  auto first = parse({{"instructions", "Be brief."}, {"input", "Weather in Paris?"}, {"tools", {kWeatherFunction}}});
  ASSERT_TRUE(first.ok()) << first.error().message;
  JobResult r = finished_answer("Let me look.", "eog");
  r.reasoning = "Call the tool.";
  r.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}};
  responses_format(shape(&store, first->conversation))->response({&r, 1}, r.stats);

  auto next = parse({{"previous_response_id", "resp_1"},
                     {"input", {{{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "21C"}}}},
                     {"tools", {kWeatherFunction}}},
                    store);
  ASSERT_TRUE(next.ok()) << next.error().message;
  const auto& m = next->chat.messages;
  ASSERT_EQ(m.size(), 3u) << "instructions are not carried over";
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[0].content, "Weather in Paris?");
  EXPECT_EQ(m[1].role, "assistant");
  EXPECT_EQ(m[1].content, "Let me look.");
  EXPECT_EQ(m[1].fields["reasoning_content"], "Call the tool.");
  EXPECT_EQ(m[1].fields["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2].role, "tool");
  EXPECT_EQ(m[2].content, "21C");
  ASSERT_EQ(next->conversation.size(), 5u) << "the question, three output items, the result";
  EXPECT_EQ(next->settings["previous_response_id"], "resp_1");

  EXPECT_EQ(stored_response_request(store, "resp_1", false).status, 200);
  EXPECT_EQ(json::parse(stored_response_request(store, "resp_1", false).body)["id"], "resp_1");
  const StoredAnswer deleted = stored_response_request(store, "resp_1", true);
  EXPECT_EQ(deleted.status, 200);
  EXPECT_EQ(json::parse(deleted.body)["deleted"], true);
  EXPECT_EQ(stored_response_request(store, "resp_1", false).status, 404);
  EXPECT_FALSE(parse({{"previous_response_id", "resp_1"}, {"input", "x"}}, store).ok());
}

TEST(ResponseStore, KeepsTheNewestWithinItsBounds) {
  ResponseStore store(3, 1000);
  for (int i = 0; i < 5; ++i) store.keep("r" + std::to_string(i), {json::array(), json::array(), "{}"});
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.find("r1"), nullptr);
  EXPECT_NE(store.find("r2"), nullptr);
  EXPECT_NE(store.find("r4"), nullptr);
  EXPECT_TRUE(store.forget("r3"));
  EXPECT_FALSE(store.forget("r3"));
  EXPECT_EQ(store.size(), 2u);
  // Bytes: a large response pushes out the old ones; one larger than the bound is not kept.
  store.keep("big", {json::array(), json::array(), std::string(995, 'x')});
  EXPECT_EQ(store.size(), 1u);
  EXPECT_NE(store.find("big"), nullptr);
  store.keep("huge", {json::array(), json::array(), std::string(2000, 'x')});
  EXPECT_EQ(store.find("huge"), nullptr);
  EXPECT_NE(store.find("big"), nullptr);
}

// ---------------------------------------------------------------- a real node

class ResponsesNode : public testing::ApiNode {
 protected:
  // As curl would send it.
  static HttpResponse call(const std::string& method, const std::string& path, const std::string& body = "") {
    auto r = http_request(node_->endpoint(), method, path, body,
                          {{"Content-Type", "application/json"}, {"Authorization", "Bearer s3cret"}}, 120000);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    return *r;
  }
  static HttpResponse post(const json& body) { return call("POST", "/v1/responses", body.dump()); }
  // The response a stream ends with, and the text its deltas carried.
  static std::pair<json, std::string> streamed(json body) {
    body["stream"] = true;
    auto r = post(body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["content-type"], "text/event-stream");
    json last;
    std::string text;
    int64_t sequence = 0;
    for (const auto& [name, data] : testing::named_sse_events(r.body)) {
      EXPECT_EQ(data["type"], name);
      EXPECT_EQ(data["sequence_number"], sequence++);
      if (name == "response.output_text.delta") text += data["delta"].get<std::string>();
      last = data;
    }
    return {last, text};
  }
};

std::string message_text(const json& response) {
  std::string text;
  for (const json& item : response["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"]) text += part["text"].get<std::string>();
  return text;
}

TEST_F(ResponsesNode, AnswersWholeAndStreamedAlike) {
  const json body = {{"model", "gpt-5"}, {"max_output_tokens", 6}, {"temperature", 0},
                     {"instructions", "You are terse."}, {"input", "Name a river."}};
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json o = json::parse(r.body);
  EXPECT_EQ(o["object"], "response");
  EXPECT_EQ(o["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(o["model"], "small");
  EXPECT_EQ(o["status"], "incomplete");
  EXPECT_EQ(o["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(o["usage"]["output_tokens"], 6);
  EXPECT_GT(o["usage"]["input_tokens"].get<int>(), 5);

  const auto [last, text] = streamed(body);
  EXPECT_EQ(last["type"], "response.incomplete");
  EXPECT_EQ(text, message_text(o)) << "greedy: the same text streamed or not";
  EXPECT_EQ(message_text(last["response"]), text);
  EXPECT_EQ(last["response"]["usage"]["input_tokens"], o["usage"]["input_tokens"]);

  // Kept unless store is false.
  EXPECT_EQ(call("GET", "/v1/responses/" + o["id"].get<std::string>()).status, 200);
  json unkept = body;
  unkept["store"] = false;
  const json u = json::parse(post(unkept).body);
  EXPECT_EQ(call("GET", "/v1/responses/" + u["id"].get<std::string>()).status, 404);
}

TEST_F(ResponsesNode, ARequiredCallThenItsOutputContinuesTheConversation) {
  const json body = {{"temperature", 0}, {"input", "Weather in Paris?"}, {"tools", {kWeatherFunction}},
                     {"tool_choice", "required"}};
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json o = json::parse(r.body);
  EXPECT_EQ(o["status"], "completed");
  ASSERT_FALSE(o["output"].empty());
  const json fc = o["output"].back();
  ASSERT_EQ(fc["type"], "function_call") << o.dump();
  EXPECT_EQ(fc["name"], "get_weather");
  const json arguments = json::parse(fc["arguments"].get<std::string>());
  std::string why;
  EXPECT_TRUE(testing::schema_accepts(arguments, kWeatherFunction["parameters"], kWeatherFunction["parameters"], &why)) << why;

  const auto [last, text] = streamed(body);
  EXPECT_EQ(last["type"], "response.completed");
  EXPECT_EQ(last["response"]["output"].back()["arguments"], fc["arguments"]) << "greedy: the same call streamed";

  const json next = {{"previous_response_id", o["id"]},
                     {"max_output_tokens", 4},
                     {"tools", {kWeatherFunction}},
                     {"input", {{{"type", "function_call_output"}, {"call_id", fc["call_id"]}, {"output", "21C"}}}}};
  auto answer = post(next);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const json a = json::parse(answer.body);
  EXPECT_EQ(a["previous_response_id"], o["id"]);
  EXPECT_GT(a["usage"]["input_tokens"].get<int>(), o["usage"]["input_tokens"].get<int>()) << "the call and result came before";

  // Deleted, it cannot be continued.
  EXPECT_EQ(call("DELETE", "/v1/responses/" + o["id"].get<std::string>()).status, 200);
  auto gone = post(next);
  EXPECT_EQ(gone.status, 400);
  EXPECT_NE(json::parse(gone.body)["error"]["message"].get<std::string>().find("previous_response_id"), std::string::npos);
}

TEST_F(ResponsesNode, AJsonSchemaFormatGivesJsonThatValidates) {
  const json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}}}, {"s", {{"type", "string"}, {"maxLength", 5}}}}},
                       {"required", {"n", "s"}},
                       {"additionalProperties", false}};
  const json body = {{"input", "Give me JSON."}, {"max_output_tokens", 80},
                     {"text", {{"format", {{"type", "json_schema"}, {"name", "p"}, {"schema", schema}, {"strict", true}}}}}};
  auto r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json o = json::parse(r.body);
  ASSERT_EQ(o["status"], "completed") << o.dump();
  const json value = json::parse(message_text(o));
  std::string why;
  EXPECT_TRUE(testing::schema_accepts(value, schema, schema, &why)) << why;
}

TEST_F(ResponsesNode, ThinkingIsAReasoningItemUnlessEffortIsNone) {
  for (const std::string effort : {"high", "none"}) {
    const json body = {{"model", "thinker"}, {"max_output_tokens", 6}, {"temperature", 0}, {"input", "Hi"},
                       {"reasoning", {{"effort", effort}}}};
    const json whole = json::parse(post(body).body);
    const json streamed_output = streamed(body).first["response"]["output"];
    ASSERT_FALSE(whole["output"].empty()) << whole.dump();
    ASSERT_EQ(streamed_output.size(), whole["output"].size()) << "greedy: the same items streamed or not";
    const bool thinks = effort != "none";
    EXPECT_EQ(whole["output"][0]["type"] == "reasoning", thinks) << effort << ": " << whole.dump();
    EXPECT_EQ(whole["reasoning"]["effort"], effort);
    if (!thinks) continue;
    const json& reasoning = whole["output"][0]["content"][0]["text"];
    EXPECT_FALSE(reasoning.get<std::string>().empty());
    EXPECT_EQ(streamed_output[0]["content"][0]["text"], reasoning);
  }
}

TEST_F(ResponsesNode, ErrorsAreOpenAiShapedAndComeBeforeAStream) {
  auto refused = post({{"input", "Hi"}, {"tools", {{{"type", "web_search"}}}}, {"stream", true}});
  EXPECT_EQ(refused.status, 400);
  const json e = json::parse(refused.body);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("tools[0].type"), std::string::npos) << refused.body;

  std::string words;
  while (words.size() < 6000) words += "x ";  // more than the 2048 tokens of the context
  auto too_long = post({{"max_output_tokens", 4}, {"stream", true}, {"input", words}});
  EXPECT_EQ(too_long.status, 400) << too_long.body.substr(0, 200);
  EXPECT_EQ(too_long.headers["content-type"], "application/json");
  EXPECT_EQ(json::parse(too_long.body)["error"]["code"], "context_length_exceeded");

  EXPECT_EQ(call("GET", "/v1/responses").status, 405);
  EXPECT_EQ(call("PUT", "/v1/responses/resp_x").status, 405);
  EXPECT_EQ(call("GET", "/v1/responses/resp_x").status, 404);
}

}  // namespace
}  // namespace revis::node
