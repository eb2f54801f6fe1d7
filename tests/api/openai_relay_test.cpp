// The OpenAI answer built from a ticket's events: streamed chunks, the
// whole response, errors before and after the stream opened, and a retry
// whose new run must continue the text the client already has.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/openai_api.h"
#include "api/openai_relay.h"
#include "protocol/ticket.h"

namespace revis::node {
namespace {

using nlohmann::json;

OpenAiRelay relay_for(bool chat, bool stream, size_t choices = 1) {
  return OpenAiRelay({.stream = stream, .choices = choices, .id = "chatcmpl-1"},
                     openai_format({.chat = chat, .id = "chatcmpl-1", .model = "small", .created = 7, .include_usage = true}));
}

JobResult result(const std::string& text) {
  JobResult r;
  r.text = text;
  r.stop_reason = "length";
  r.stats.prompt_tokens = 11;
  r.stats.cached_tokens = 3;
  r.stats.generated_tokens = 4;
  return r;
}

// The text a client assembles from the chunks of one or more steps.
std::string streamed_text(const std::vector<OpenAiRelay::Step>& steps) {
  std::string text;
  for (const auto& step : steps)
    for (const SseEvent& e : step.events) {
      if (e.data == "[DONE]") continue;
      json j = json::parse(e.data);
      if (j.contains("choices") && !j["choices"].empty()) text += j["choices"][0]["delta"].value("content", "");
    }
  return text;
}

TEST(OpenAiRelay, StreamsChunksThenFinishUsageAndDone) {
  OpenAiRelay relay = relay_for(true, true);
  std::vector<OpenAiRelay::Step> steps;
  steps.push_back(relay.on_event(accepted_event("chatcmpl-1", 0)));
  EXPECT_FALSE(steps.back().open_stream) << "the header waits for the first token";
  EXPECT_TRUE(steps.back().events.empty());
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 0, "Hel")));
  EXPECT_TRUE(steps.back().open_stream);
  ASSERT_EQ(steps.back().events.size(), 2u);
  EXPECT_EQ(json::parse(steps.back().events[0].data)["choices"][0]["delta"]["role"], "assistant");
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 1, "lo")));
  EXPECT_FALSE(steps.back().open_stream);
  steps.push_back(relay.on_event(done_event("chatcmpl-1", result("Hello"))));
  const OpenAiRelay::Step& last = steps.back();
  EXPECT_TRUE(last.finished);
  EXPECT_FALSE(last.cancel);
  ASSERT_EQ(last.events.size(), 3u);
  EXPECT_EQ(json::parse(last.events[0].data)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(last.events[1].data)["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(last.events[2].data, "[DONE]");
  EXPECT_EQ(streamed_text(steps), "Hello");
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-1", 2, "late")).events.empty()) << "nothing after the end";
}

TEST(OpenAiRelay, WholeResponseWithoutStreaming) {
  OpenAiRelay relay = relay_for(false, false);
  EXPECT_FALSE(relay.on_event(accepted_event("chatcmpl-1", 2)).open_stream);
  // A retry is invisible: only the final run's result is answered.
  relay.on_event(retry_event("chatcmpl-1", 2, "node b was lost"));
  OpenAiRelay::Step step = relay.on_event(done_event("chatcmpl-1", result("Once upon")));
  ASSERT_TRUE(step.response.has_value());
  json j = json::parse(*step.response);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Once upon");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["model"], "small");
}

TEST(OpenAiRelay, ErrorBeforeTheStreamIsAnHttpErrorAfterItAnEvent) {
  OpenAiRelay refused = relay_for(true, true);
  OpenAiRelay::Step step = refused.on_event(error_event("chatcmpl-1", {ErrorCode::kQueueFull, "the queue is full"}));
  ASSERT_TRUE(step.error.has_value());
  EXPECT_EQ(step.error->code, ErrorCode::kQueueFull);
  EXPECT_TRUE(step.events.empty());

  // Accepted, then refused by the node that runs it (the prompt does not
  // fit its context): still an HTTP error, the stream never opened.
  OpenAiRelay too_long = relay_for(true, true);
  EXPECT_FALSE(too_long.on_event(accepted_event("chatcmpl-1", 0)).open_stream);
  step = too_long.on_event(error_event("chatcmpl-1", {ErrorCode::kTooLong, "the prompt has 812 tokens"}));
  ASSERT_TRUE(step.error.has_value());
  EXPECT_EQ(step.error->code, ErrorCode::kTooLong);
  EXPECT_FALSE(step.open_stream);

  OpenAiRelay failed = relay_for(true, true);
  failed.on_event(accepted_event("chatcmpl-1", 0));
  failed.on_event(token_event("chatcmpl-1", 0, "Par"));
  step = failed.on_event(error_event("chatcmpl-1", {ErrorCode::kInternal, "gave up after 3 attempts"}));
  EXPECT_FALSE(step.error.has_value());
  ASSERT_EQ(step.events.size(), 2u);
  EXPECT_EQ(json::parse(step.events[0].data)["error"]["message"], "gave up after 3 attempts");
  EXPECT_EQ(step.events[1].data, "[DONE]");
  EXPECT_TRUE(step.finished);
}

TEST(OpenAiRelay, ARetryContinuesWhereTheStreamStopped) {
  OpenAiRelay relay = relay_for(true, true);
  std::vector<OpenAiRelay::Step> steps;
  steps.push_back(relay.on_event(accepted_event("chatcmpl-1", 0)));
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 0, "The sky")));
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 1, " is")));
  steps.push_back(relay.on_event(retry_event("chatcmpl-1", 2, "node b was lost")));
  // The new run's pieces are cut differently; what was sent is swallowed.
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 0, "The")));
  EXPECT_TRUE(steps.back().events.empty());
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 1, " sky i")));
  EXPECT_TRUE(steps.back().events.empty());
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 2, "s blue")));
  ASSERT_EQ(steps.back().events.size(), 1u) << "only the new part goes out";
  steps.push_back(relay.on_event(done_event("chatcmpl-1", result("The sky is blue"))));
  EXPECT_TRUE(steps.back().finished);
  EXPECT_EQ(streamed_text(steps), "The sky is blue");
  EXPECT_EQ(steps.back().events.back().data, "[DONE]");
  EXPECT_EQ(json::parse(steps.back().events[0].data)["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiRelay, ARetryThatDiffersEndsTheStreamWithAnErrorAndCancels) {
  OpenAiRelay relay = relay_for(true, true);
  relay.on_event(accepted_event("chatcmpl-1", 0));
  relay.on_event(token_event("chatcmpl-1", 0, "The sky"));
  relay.on_event(retry_event("chatcmpl-1", 2, "node b was lost"));
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-1", 0, "The")).events.empty());
  OpenAiRelay::Step step = relay.on_event(token_event("chatcmpl-1", 1, " sea"));
  EXPECT_TRUE(step.cancel);
  EXPECT_TRUE(step.finished);
  ASSERT_EQ(step.events.size(), 2u);
  const std::string message = json::parse(step.events[0].data)["error"]["message"];
  EXPECT_NE(message.find("node b was lost"), std::string::npos) << message;
  EXPECT_TRUE(relay.finished());

  // A new run that ends before reaching what was sent differs too.
  OpenAiRelay shorter = relay_for(false, true);
  shorter.on_event(accepted_event("chatcmpl-1", 0));
  shorter.on_event(token_event("chatcmpl-1", 0, "Once upon a time"));
  shorter.on_event(retry_event("chatcmpl-1", 2, "node c was lost"));
  shorter.on_event(token_event("chatcmpl-1", 0, "Once"));
  step = shorter.on_event(done_event("chatcmpl-1", result("Once")));
  EXPECT_TRUE(step.finished);
  ASSERT_FALSE(step.events.empty());
  EXPECT_TRUE(json::parse(step.events[0].data).contains("error")) << step.events[0].data;
}

TEST(OpenAiRelay, IgnoresAnotherTicketsEvents) {
  OpenAiRelay relay = relay_for(true, true);
  relay.on_event(accepted_event("chatcmpl-1", 0));
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-0", 5, "stale")).events.empty());
  EXPECT_FALSE(relay.on_event(done_event("chatcmpl-0", result("stale"))).finished);
  EXPECT_FALSE(relay.finished());
}

// n choices: one ticket after another, each asked for when the one before
// is done; the stream's chunks carry their choice's index, the usage counts
// the prompt once and every choice's tokens.
TEST(OpenAiRelay, ChoicesRunOneAfterAnotherAndStreamWithTheirIndex) {
  OpenAiRelay relay = relay_for(true, true, 3);
  EXPECT_EQ(relay.ticket_id(0), "chatcmpl-1.0");
  EXPECT_EQ(relay.ticket_id(2), "chatcmpl-1.2");
  EXPECT_EQ(relay_for(true, true).ticket_id(0), "chatcmpl-1") << "one choice: the response's own id";
  std::vector<OpenAiRelay::Step> steps;
  for (size_t k = 0; k < 3; ++k) {
    const std::string id = relay.ticket_id(k);
    EXPECT_EQ(relay.current_choice(), k);
    steps.push_back(relay.on_event(token_event(id, 0, "choice " + std::to_string(k))));
    EXPECT_EQ(steps.back().open_stream, k == 0) << "one header for the whole stream";
    ASSERT_EQ(steps.back().events.size(), 2u);
    for (const SseEvent& e : steps.back().events) EXPECT_EQ(json::parse(e.data)["choices"][0]["index"], k);
    EXPECT_EQ(json::parse(steps.back().events[0].data)["choices"][0]["delta"]["role"], "assistant");
    // A late event of the choice before changes nothing.
    if (k > 0) EXPECT_TRUE(relay.on_event(token_event(relay.ticket_id(k - 1), 9, "late")).events.empty());
    steps.push_back(relay.on_event(done_event(id, result("choice " + std::to_string(k)))));
    const OpenAiRelay::Step& done = steps.back();
    if (k < 2) {
      ASSERT_TRUE(done.next_choice.has_value());
      EXPECT_EQ(*done.next_choice, k + 1);
      EXPECT_FALSE(done.finished);
      ASSERT_EQ(done.events.size(), 1u) << "the finish chunk, no [DONE] yet";
    } else {
      EXPECT_FALSE(done.next_choice.has_value());
      EXPECT_TRUE(done.finished);
      ASSERT_EQ(done.events.size(), 3u);
      EXPECT_EQ(done.events[2].data, "[DONE]");
      const json usage = json::parse(done.events[1].data)["usage"];
      EXPECT_EQ(usage["prompt_tokens"], 11);
      EXPECT_EQ(usage["completion_tokens"], 12);
    }
    EXPECT_EQ(json::parse(done.events[0].data)["choices"][0]["index"], k);
    EXPECT_EQ(json::parse(done.events[0].data)["choices"][0]["finish_reason"], "length");
  }
}

TEST(OpenAiRelay, ChoicesInOneResponseAndAFailedChoiceFailsTheRequest) {
  OpenAiRelay relay = relay_for(false, false, 2);
  OpenAiRelay::Step step = relay.on_event(done_event(relay.ticket_id(0), result("first")));
  EXPECT_FALSE(step.response.has_value());
  EXPECT_EQ(step.next_choice, 1u);
  step = relay.on_event(done_event(relay.ticket_id(1), result("second")));
  ASSERT_TRUE(step.response.has_value());
  const json j = json::parse(*step.response);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], "first");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["text"], "second");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 11);
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(j["usage"]["total_tokens"], 19);

  OpenAiRelay failing = relay_for(true, false, 2);
  failing.on_event(done_event(failing.ticket_id(0), result("first")));
  step = failing.on_event(error_event(failing.ticket_id(1), {ErrorCode::kQueueFull, "the queue is full"}));
  EXPECT_TRUE(step.finished);
  ASSERT_TRUE(step.error.has_value());
  EXPECT_EQ(step.error->code, ErrorCode::kQueueFull);
}

}  // namespace
}  // namespace revis::node
