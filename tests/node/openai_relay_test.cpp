// The OpenAI answer built from a ticket's events: streamed chunks, the
// whole response, errors before and after the stream opened, and a retry
// whose new run must continue the text the client already has.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "node/openai_relay.h"
#include "node/ticket.h"

namespace revis::node {
namespace {

using nlohmann::json;

OpenAiRelay::Shape shape(bool chat, bool stream) {
  return {.chat = chat, .stream = stream, .include_usage = true, .id = "chatcmpl-1", .model = "small", .created = 7};
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
    for (const std::string& e : step.events) {
      if (e == "[DONE]") continue;
      json j = json::parse(e);
      if (j.contains("choices") && !j["choices"].empty()) text += j["choices"][0]["delta"].value("content", "");
    }
  return text;
}

TEST(OpenAiRelay, StreamsChunksThenFinishUsageAndDone) {
  OpenAiRelay relay(shape(true, true));
  std::vector<OpenAiRelay::Step> steps;
  steps.push_back(relay.on_event(accepted_event("chatcmpl-1", 0)));
  EXPECT_FALSE(steps.back().open_stream) << "the header waits for the first token";
  EXPECT_TRUE(steps.back().events.empty());
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 0, "Hel")));
  EXPECT_TRUE(steps.back().open_stream);
  ASSERT_EQ(steps.back().events.size(), 2u);
  EXPECT_EQ(json::parse(steps.back().events[0])["choices"][0]["delta"]["role"], "assistant");
  steps.push_back(relay.on_event(token_event("chatcmpl-1", 1, "lo")));
  EXPECT_FALSE(steps.back().open_stream);
  steps.push_back(relay.on_event(done_event("chatcmpl-1", result("Hello"))));
  const OpenAiRelay::Step& last = steps.back();
  EXPECT_TRUE(last.finished);
  EXPECT_FALSE(last.cancel);
  ASSERT_EQ(last.events.size(), 3u);
  EXPECT_EQ(json::parse(last.events[0])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(last.events[1])["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(last.events[2], "[DONE]");
  EXPECT_EQ(streamed_text(steps), "Hello");
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-1", 2, "late")).events.empty()) << "nothing after the end";
}

TEST(OpenAiRelay, WholeResponseWithoutStreaming) {
  OpenAiRelay relay(shape(false, false));
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
  OpenAiRelay refused(shape(true, true));
  OpenAiRelay::Step step = refused.on_event(error_event("chatcmpl-1", {ErrorCode::kQueueFull, "the queue is full"}));
  ASSERT_TRUE(step.error.has_value());
  EXPECT_EQ(step.error->code, ErrorCode::kQueueFull);
  EXPECT_TRUE(step.events.empty());

  // Accepted, then refused by the node that runs it (the prompt does not
  // fit its context): still an HTTP error, the stream never opened.
  OpenAiRelay too_long(shape(true, true));
  EXPECT_FALSE(too_long.on_event(accepted_event("chatcmpl-1", 0)).open_stream);
  step = too_long.on_event(error_event("chatcmpl-1", {ErrorCode::kTooLong, "the prompt has 812 tokens"}));
  ASSERT_TRUE(step.error.has_value());
  EXPECT_EQ(step.error->code, ErrorCode::kTooLong);
  EXPECT_FALSE(step.open_stream);

  OpenAiRelay failed(shape(true, true));
  failed.on_event(accepted_event("chatcmpl-1", 0));
  failed.on_event(token_event("chatcmpl-1", 0, "Par"));
  step = failed.on_event(error_event("chatcmpl-1", {ErrorCode::kInternal, "gave up after 3 attempts"}));
  EXPECT_FALSE(step.error.has_value());
  ASSERT_EQ(step.events.size(), 2u);
  EXPECT_EQ(json::parse(step.events[0])["error"]["message"], "gave up after 3 attempts");
  EXPECT_EQ(step.events[1], "[DONE]");
  EXPECT_TRUE(step.finished);
}

TEST(OpenAiRelay, ARetryContinuesWhereTheStreamStopped) {
  OpenAiRelay relay(shape(true, true));
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
  EXPECT_EQ(steps.back().events.back(), "[DONE]");
  EXPECT_EQ(json::parse(steps.back().events[0])["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiRelay, ARetryThatDiffersEndsTheStreamWithAnErrorAndCancels) {
  OpenAiRelay relay(shape(true, true));
  relay.on_event(accepted_event("chatcmpl-1", 0));
  relay.on_event(token_event("chatcmpl-1", 0, "The sky"));
  relay.on_event(retry_event("chatcmpl-1", 2, "node b was lost"));
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-1", 0, "The")).events.empty());
  OpenAiRelay::Step step = relay.on_event(token_event("chatcmpl-1", 1, " sea"));
  EXPECT_TRUE(step.cancel);
  EXPECT_TRUE(step.finished);
  ASSERT_EQ(step.events.size(), 2u);
  const std::string message = json::parse(step.events[0])["error"]["message"];
  EXPECT_NE(message.find("node b was lost"), std::string::npos) << message;
  EXPECT_TRUE(relay.finished());

  // A new run that ends before reaching what was sent differs too.
  OpenAiRelay shorter(shape(false, true));
  shorter.on_event(accepted_event("chatcmpl-1", 0));
  shorter.on_event(token_event("chatcmpl-1", 0, "Once upon a time"));
  shorter.on_event(retry_event("chatcmpl-1", 2, "node c was lost"));
  shorter.on_event(token_event("chatcmpl-1", 0, "Once"));
  step = shorter.on_event(done_event("chatcmpl-1", result("Once")));
  EXPECT_TRUE(step.finished);
  ASSERT_FALSE(step.events.empty());
  EXPECT_TRUE(json::parse(step.events[0]).contains("error")) << step.events[0];
}

TEST(OpenAiRelay, IgnoresAnotherTicketsEvents) {
  OpenAiRelay relay(shape(true, true));
  relay.on_event(accepted_event("chatcmpl-1", 0));
  EXPECT_TRUE(relay.on_event(token_event("chatcmpl-0", 5, "stale")).events.empty());
  EXPECT_FALSE(relay.on_event(done_event("chatcmpl-0", result("stale"))).finished);
  EXPECT_FALSE(relay.finished());
}

}  // namespace
}  // namespace revis::node
