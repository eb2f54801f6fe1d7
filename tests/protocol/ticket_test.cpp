// Parsing what clients send on /v1/revis/stream, and the events the node
// sends back.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/ticket.h"

namespace revis::node {
namespace {

using nlohmann::json;

constexpr size_t kLimit = 4096;

RejectedMessage rejected(const std::string& text, size_t limit = kLimit) {
  auto r = parse_client_message(text, limit);
  EXPECT_TRUE(std::holds_alternative<RejectedMessage>(r)) << text;
  return std::holds_alternative<RejectedMessage>(r) ? std::get<RejectedMessage>(r) : RejectedMessage{};
}

TEST(Ticket, ParsesAFullTicket) {
  auto r = parse_client_message(
      R"({"type":"ticket","ticketID":"5f0c-11","taskType":"translate","isStreaming":true,)"
      R"("args":{"text":"hola","to":"English"},"catalog":"sha256:ab"})",
      kLimit);
  ASSERT_TRUE(std::holds_alternative<ClientMessage>(r));
  const Ticket& t = std::get<Ticket>(std::get<ClientMessage>(r));
  EXPECT_EQ(t.id, "5f0c-11");
  EXPECT_EQ(t.task, "translate");
  EXPECT_TRUE(t.streaming);
  EXPECT_EQ(t.args.at("to"), "English");
  EXPECT_EQ(*t.catalog, "sha256:ab");
}

TEST(Ticket, DefaultsAndCancel) {
  auto r = parse_client_message(R"({"type":"ticket","ticketID":"a","taskType":"chat"})", kLimit);
  ASSERT_TRUE(std::holds_alternative<ClientMessage>(r));
  const Ticket& t = std::get<Ticket>(std::get<ClientMessage>(r));
  EXPECT_FALSE(t.streaming);
  EXPECT_TRUE(t.args.empty());
  EXPECT_FALSE(t.catalog);
  auto c = parse_client_message(R"({"type":"cancel","ticketID":"a"})", kLimit);
  ASSERT_TRUE(std::holds_alternative<ClientMessage>(c));
  EXPECT_EQ(std::get<CancelRequest>(std::get<ClientMessage>(c)).id, "a");
}

// An OpenAI request a peer's dispatcher forwards: it survives the trip as
// is, and only a forwarded ticket may carry one.
TEST(Ticket, OpenAiCallRoundTripsAndNeedsForwardedBy) {
  Ticket t;
  t.id = "chatcmpl-9";
  t.task = kOpenAiChatTask;
  t.streaming = true;
  t.forwarded_by = "a";
  t.openai = OpenAiCall{R"({"messages":[{"role":"user","content":"Hi \"there\""}],"seed":null})", "small",
                        18446744073709551557ull};
  auto r = parse_client_message(ticket_message(t), kLimit);
  ASSERT_TRUE(std::holds_alternative<ClientMessage>(r)) << ticket_message(t);
  const Ticket& back = std::get<Ticket>(std::get<ClientMessage>(r));
  ASSERT_TRUE(back.openai.has_value());
  EXPECT_EQ(back.openai->body, t.openai->body);
  EXPECT_EQ(back.openai->tier, "small");
  EXPECT_EQ(back.openai->seed, 18446744073709551557ull);
  EXPECT_EQ(back.task, "chat.completions");
  EXPECT_EQ(*back.forwarded_by, "a");

  const std::string call = R"("openai":{"body":"{}","tier":"small","seed":1})";
  EXPECT_NE(rejected(R"({"type":"ticket","ticketID":"x","taskType":"completions",)" + call + "}").error.message.find("forwardedBy"),
            std::string::npos);
  EXPECT_NE(rejected(R"({"type":"ticket","ticketID":"x","taskType":"chat","forwardedBy":"a",)" + call + "}")
                .error.message.find("chat.completions, completions or embeddings"),
            std::string::npos);
  EXPECT_NE(rejected(R"({"type":"ticket","ticketID":"x","taskType":"completions","forwardedBy":"a",)"
                     R"("openai":{"body":"{}","tier":"small","seed":-1}})")
                .error.message.find("openai.seed"),
            std::string::npos);
  EXPECT_NE(rejected(R"({"type":"ticket","ticketID":"x","taskType":"completions","forwardedBy":"a",)"
                     R"("openai":{"body":"{}","seed":1}})")
                .error.message.find("tier"),
            std::string::npos);
}

TEST(Ticket, EveryMalformationIsABadRequestNamingTheField) {
  struct Case {
    std::string text, expect;
    bool has_id;
  } cases[] = {
      {"{not json", "not valid JSON", false},
      {"[1,2]", "JSON object", false},
      {"\"ticket\"", "JSON object", false},
      {R"({"ticketID":"a","taskType":"x"})", "\"type\"", true},
      {R"({"type":7,"ticketID":"a"})", "\"type\" must be a string", true},
      {R"({"type":"order","ticketID":"a"})", "unknown message type", true},
      {R"({"type":"ticket","taskType":"x"})", "ticketID", false},
      {R"({"type":"ticket","ticketID":5,"taskType":"x"})", "\"ticketID\" must be a string", false},
      {R"({"type":"ticket","ticketID":"","taskType":"x"})", "1..128", false},
      {R"({"type":"ticket","ticketID":"has space","taskType":"x"})", "1..128", false},
      {R"({"type":"ticket","ticketID":"a"})", "taskType", true},
      {R"({"type":"ticket","ticketID":"a","taskType":["x"]})", "taskType", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","isStreaming":"yes"})", "isStreaming", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":"text"})", "\"args\" must be an object", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"n":3}})", "args.n must be a string", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"n":null}})", "args.n must be a string", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"n":{"m":"1"}}})", "args.n", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","catalog":1})", "catalog", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","model":"gpt"})", "unknown field \"model\"", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","temperature":0})", "unknown field", true},
      {R"({"type":"cancel","ticketID":"a","reason":"x"})", "unknown field", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","taskType":"y"})", "appears twice", true},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"t":"1","t":"2"}})", "appears twice", true},
      {std::string(R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"t":")") + "\xff\xfe" + "\"}}",
       "UTF-8", false},
      {R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"t":"\ud800"}})", "not valid JSON", false},
      {std::string(100, '[') + std::string(100, ']'), "nests deeper", false},
  };
  for (const Case& c : cases) {
    const RejectedMessage r = rejected(c.text);
    EXPECT_EQ(r.error.code, ErrorCode::kBadRequest) << c.text;
    EXPECT_NE(r.error.message.find(c.expect), std::string::npos) << c.text << " -> " << r.error.message;
    EXPECT_EQ(r.ticket_id.has_value(), c.has_id) << c.text;
    if (c.has_id) {
      EXPECT_EQ(*r.ticket_id, "a");
    }
  }
}

TEST(Ticket, OversizedMessagesAreTooLong) {
  const std::string big = R"({"type":"ticket","ticketID":"big-1","taskType":"summarize","args":{"text":")" +
                          std::string(5000, 'x') + "\"}}";
  RejectedMessage r = rejected(big);
  EXPECT_EQ(r.error.code, ErrorCode::kTooLong);
  ASSERT_TRUE(r.ticket_id);
  EXPECT_EQ(*r.ticket_id, "big-1") << "the client learns which ticket was too long";
  r = rejected(std::string(5000, 'x'));
  EXPECT_EQ(r.error.code, ErrorCode::kTooLong);
  EXPECT_FALSE(r.ticket_id);
  // Exactly at the limit is fine.
  std::string at_limit = R"({"type":"ticket","ticketID":"a","taskType":"x","args":{"t":")";
  at_limit += std::string(kLimit - at_limit.size() - 3, 'y') + "\"}}";
  ASSERT_EQ(at_limit.size(), kLimit);
  EXPECT_TRUE(std::holds_alternative<ClientMessage>(parse_client_message(at_limit, kLimit)));
}

TEST(Ticket, IdsAreBounded) {
  EXPECT_TRUE(valid_ticket_id("3f1e2d3c-aaaa-4bbb-8ccc-123456789abc"));
  EXPECT_TRUE(valid_ticket_id(std::string(128, 'a')));
  EXPECT_FALSE(valid_ticket_id(std::string(129, 'a')));
  EXPECT_FALSE(valid_ticket_id("a/b"));
  EXPECT_FALSE(valid_ticket_id("\"quote"));
}

TEST(Ticket, EventsAreWellFormedJson) {
  json a = json::parse(accepted_event("t1", 3).text());
  EXPECT_EQ(a["type"], "accepted");
  EXPECT_EQ(a["position"], 3);
  json tok = json::parse(token_event("t1", 7, "h\xc3\xa9").text());
  EXPECT_EQ(tok["seq"], 7);
  EXPECT_EQ(tok["text"], "h\xc3\xa9");
  // Invalid UTF-8 can never reach a client as broken JSON.
  EXPECT_TRUE(json::parse(token_event("t1", 8, "\xff").text()).is_object());
  JobResult r;
  r.text = "hi";
  r.stop_reason = "eog";
  r.stats.prompt_tokens = 5;
  r.stats.node = "n1";
  r.stats.model_digest = "sha256:00";
  r.stats.catalog_digest = "sha256:11";
  json d = json::parse(done_event("t1", r).text());
  EXPECT_EQ(d["type"], "done");
  EXPECT_EQ(d["text"], "hi");
  EXPECT_EQ(d["stopReason"], "eog");
  for (const char* key : {"promptTokens", "generatedTokens", "prefillTokPerSec", "genTokPerSec", "queueWaitMs", "node",
                          "modelDigest", "catalog", "ttftMs", "prefillMs"})
    EXPECT_TRUE(d["stats"].contains(key)) << key;
  json e = json::parse(error_event(std::nullopt, {ErrorCode::kQueueFull, "full"}).text());
  EXPECT_TRUE(e["ticketID"].is_null());
  EXPECT_EQ(e["code"], "queue_full");
}

// An event read from its text (a peer's, the broker's) says what the event
// made here says through its values, so the readers need not know which
// they were given.
TEST(Ticket, AnEventReadFromItsTextHasTheValuesItWasMadeOf) {
  JobResult r;
  r.text = "It is 4.";
  r.reasoning = "2 + 2";
  r.tool_calls = {{"call_1", "add", R"({"a":2,"b":2})"}};
  r.stop_reason = "stop";
  r.stop_sequence = "\n\n";
  r.logprobs = {{{"It", -0.25f}, {{"It", -0.25f}, {"The", -1.5f}}}};
  r.embeddings = {{0.5f, -0.25f}};
  r.stats.prompt_tokens = 12;
  r.stats.cached_tokens = 4;
  r.stats.generated_tokens = 3;
  r.stats.draft_tokens = 2;
  r.stats.accepted_tokens = 1;
  r.stats.total_ms = 12.5;
  r.stats.node = "n1";
  const TicketEvent made = done_event("t1", r);
  const TicketEvent read = TicketEvent::read(made.text());
  EXPECT_EQ(read.text(), made.text());
  ASSERT_EQ(read.type(), TicketEvent::Type::kDone);
  EXPECT_EQ(read.ticket_id(), "t1");
  const JobResult& back = read.result();
  EXPECT_EQ(back.text, r.text);
  EXPECT_EQ(back.reasoning, r.reasoning);
  ASSERT_EQ(back.tool_calls.size(), 1u);
  EXPECT_EQ(back.tool_calls[0].arguments, r.tool_calls[0].arguments);
  EXPECT_EQ(back.stop_sequence, r.stop_sequence);
  ASSERT_EQ(back.logprobs.size(), 1u);
  EXPECT_EQ(back.logprobs[0].top.size(), 2u);
  EXPECT_EQ(back.embeddings, r.embeddings);
  EXPECT_EQ(back.stats.cached_tokens, 4);
  EXPECT_EQ(back.stats.accepted_tokens, 1);
  EXPECT_EQ(back.stats.total_ms, 12.5);
  EXPECT_EQ(back.stats.node, "n1");

  const TicketEvent thinking = TicketEvent::read(token_event("t1", 5, "hmm", {}, true).text());
  EXPECT_EQ(thinking.type(), TicketEvent::Type::kToken);
  EXPECT_EQ(thinking.seq(), 5u);
  EXPECT_TRUE(thinking.reasoning());
  EXPECT_EQ(thinking.piece(), "hmm");
  const TicketEvent failed = TicketEvent::read(error_event(std::nullopt, {ErrorCode::kQueueFull, "full"}).text());
  EXPECT_EQ(failed.type(), TicketEvent::Type::kError);
  EXPECT_EQ(failed.ticket_id(), "");
  EXPECT_EQ(failed.error().code, ErrorCode::kQueueFull);
  EXPECT_EQ(failed.error().message, "full");
  const TicketEvent again = TicketEvent::read(retry_event("t1", 3, "node b was lost").text());
  EXPECT_EQ(again.attempt(), 3);
  EXPECT_EQ(again.reason(), "node b was lost");
  EXPECT_EQ(TicketEvent::read("not json").type(), TicketEvent::Type::kOther);
  EXPECT_EQ(TicketEvent::other(R"({"type":"peer","ticketID":"t1"})").ticket_id(), "");
  EXPECT_TRUE(TicketEvent().empty());
}

TEST(ErrorCodes, NamesRoundTrip) {
  for (const char* name : {"bad_request", "unknown_task", "missing_arg", "too_long", "queue_full", "model_unavailable",
                           "cancelled", "internal", "catalog_mismatch"}) {
    auto code = error_code_from_name(name);
    ASSERT_TRUE(code) << name;
    EXPECT_STREQ(error_code_name(*code), name);
  }
  EXPECT_FALSE(error_code_from_name("oops"));
}

}  // namespace
}  // namespace revis::node
