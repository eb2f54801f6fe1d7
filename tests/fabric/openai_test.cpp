// OpenAI API requests through the fabric, end to end: real nodes, the small
// shared model. A request sent to a busy node runs on an idle peer and its
// tokens stream back from there; one that finds every node busy waits in
// the accepting node's queue until a peer frees up; a peer killed
// mid-answer costs the client nothing (the request runs again elsewhere
// and the stream goes on where it stopped), or, with no attempts left, it
// gets an error that says why. A Responses API request that runs on a peer
// is kept where it was asked.
#include <gtest/gtest.h>

#include <csignal>
#include <future>

#include "fabric/cluster.h"
#include "support/sse.h"

namespace revis {
namespace {

using testing::Blocker;
using testing::Cluster;
using testing::expect_one_at_a_time;
using testing::http_json;
using testing::json;
using testing::TicketClient;
using namespace std::chrono_literals;

node::HttpResponse post(const node::HostPort& node, const std::string& target, const json& body) {
  auto r = node::http_request(node, "POST", target, body.dump(), {{"Content-Type", "application/json"}}, 120000);
  if (!r.ok()) throw std::runtime_error("POST " + target + " " + body.dump() + ": " + r.status().message());
  return *r;
}

uint64_t openai_done(const node::HostPort& node) {
  const json by = http_json(node, "/v1/revis/status")["counters"]["byOutcome"];
  return by.contains("openai") && by["openai"].contains("done") ? by["openai"]["done"].get<uint64_t>() : 0;
}

bool ran(const std::string& log, const std::string& id) { return log.find("ran ticket " + id + " ") != std::string::npos; }

// Waits until node `i` is generating an OpenAI request (at least `tokens`
// tokens in); -1 when none of `nodes` does within the limit.
int generating_openai(Cluster& cluster, const std::vector<int>& nodes, int tokens) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i : nodes) {
      const json current = http_json(cluster.endpoint(i), "/v1/revis/status")["current"];
      if (current.is_object() && current["source"] == "openai" && current["generated"].get<int>() > tokens) return i;
    }
    std::this_thread::sleep_for(2ms);
  }
  return -1;
}

TEST(FabricOpenAi, RequestsToABusyNodeRunOnAnIdlePeer) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.start(0));
  const node::HostPort a = cluster.endpoint(0);
  // The reference answers (greedy), from node a alone.
  const json chat = {{"model", "small"},
                     {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Why do rivers bend?"}}}},
                     {"max_tokens", 24},
                     {"temperature", 0}};
  const json completion = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}};
  auto reference_chat = post(a, "/v1/chat/completions", chat);
  auto reference_completion = post(a, "/v1/completions", completion);
  ASSERT_EQ(reference_chat.status, 200) << reference_chat.body;
  ASSERT_EQ(reference_completion.status, 200) << reference_completion.body;
  const std::string chat_text = json::parse(reference_chat.body)["choices"][0]["message"]["content"];
  const std::string completion_text = json::parse(reference_completion.body)["choices"][0]["text"];
  ASSERT_FALSE(chat_text.empty());

  ASSERT_TRUE(cluster.start(1));
  ASSERT_TRUE(cluster.wait_links(0, 1)) << cluster.node(0).log();
  Blocker blocker(a);
  std::vector<std::string> ids;

  json streaming_chat = chat;
  streaming_chat["stream"] = true;
  streaming_chat["stream_options"] = {{"include_usage", true}};
  auto r = post(a, "/v1/chat/completions", streaming_chat);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  testing::StreamedAnswer s = testing::streamed_answer(r.body);
  EXPECT_TRUE(s.done) << r.body;
  EXPECT_TRUE(s.error.is_null()) << r.body;
  EXPECT_EQ(s.text, chat_text) << "the peer streams the same answer a gave";
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.usage["completion_tokens"], 24);
  ids.push_back(s.id);

  r = post(a, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], chat_text);
  EXPECT_EQ(j["model"], json::parse(reference_chat.body)["model"]);
  ids.push_back(j["id"]);

  json streaming_completion = completion;
  streaming_completion["stream"] = true;
  r = post(a, "/v1/completions", streaming_completion);
  ASSERT_EQ(r.status, 200) << r.body;
  s = testing::streamed_answer(r.body);
  EXPECT_TRUE(s.done && s.error.is_null()) << r.body;
  EXPECT_EQ(s.text, completion_text);
  ids.push_back(s.id);

  r = post(a, "/v1/completions", completion);
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], completion_text);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  ids.push_back(j["id"]);

  EXPECT_TRUE(blocker.release()) << "node a was busy the whole time";
  // Where they ran: each response's id in b's log of runs, none in a's.
  const std::string log_a = cluster.logs(0), log_b = cluster.logs(1);
  for (const std::string& id : ids) {
    EXPECT_TRUE(ran(log_b, id)) << id << " ran on b:\n" << log_b;
    EXPECT_FALSE(ran(log_a, id)) << id;
  }
  EXPECT_EQ(openai_done(cluster.endpoint(1)), 4u);
  EXPECT_EQ(openai_done(a), 2u) << "only the two reference answers";
  expect_one_at_a_time("a", testing::runs_in_log(log_a));
  expect_one_at_a_time("b", testing::runs_in_log(log_b));
}

// The Responses API through the fabric: a response that runs on a peer is
// kept on the node the client asked, which continues it by
// previous_response_id (the peer gets the whole conversation as a chat
// request).
TEST(FabricOpenAi, AResponseRunOnAPeerIsKeptWhereItWasAsked) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.start(0));
  ASSERT_TRUE(cluster.start(1));
  ASSERT_TRUE(cluster.wait_links(0, 1)) << cluster.node(0).log();
  const node::HostPort a = cluster.endpoint(0), b = cluster.endpoint(1);
  Blocker blocker(a);
  auto r = post(a, "/v1/responses", {{"model", "small"}, {"input", "Why do rivers bend?"}, {"max_output_tokens", 8}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json first = json::parse(r.body);
  const std::string id = first["id"];
  r = post(a, "/v1/responses",
           {{"model", "small"}, {"previous_response_id", id}, {"input", "And lakes?"}, {"max_output_tokens", 4},
            {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = testing::named_sse_events(r.body);
  ASSERT_FALSE(events.empty()) << r.body;
  EXPECT_EQ(events.back().first, "response.incomplete") << r.body;
  const json second = events.back().second["response"];
  EXPECT_GT(second["usage"]["input_tokens"].get<int>(), first["usage"]["input_tokens"].get<int>())
      << "the first turn is in the prompt";
  EXPECT_TRUE(blocker.release()) << "node a was busy the whole time";
  const std::string log_b = cluster.logs(1);
  EXPECT_TRUE(ran(log_b, id)) << log_b;
  EXPECT_TRUE(ran(log_b, second["id"])) << log_b;
  auto kept = [](const node::HostPort& node, const std::string& id) {
    auto got = node::http_request(node, "GET", "/v1/responses/" + id, "", {}, 5000);
    return got.ok() ? got->status : 0;
  };
  EXPECT_EQ(kept(a, id), 200);
  EXPECT_EQ(kept(b, id), 404) << "kept where the client asked, not where it ran";
}

TEST(FabricOpenAi, WaitsInTheAcceptingNodesQueueUntilAPeerIsFree) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.start_all());
  ASSERT_TRUE(cluster.wait_links(0, 1));
  Blocker busy_a(cluster.endpoint(0)), busy_b(cluster.endpoint(1));
  auto answer = std::async(std::launch::async, [&] {
    return post(cluster.endpoint(0), "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "Wait for me."}}}}, {"max_tokens", 8}, {"temperature", 0}});
  });
  bool queued = false;
  for (int i = 0; i < 500 && !queued; ++i) {
    queued = http_json(cluster.endpoint(0), "/v1/revis/status")["queue"]["length"] == 1;
    if (!queued) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(queued) << "with every node busy the request waits in a's queue";
  EXPECT_TRUE(busy_b.release());  // b frees up first: the request leaves a's queue for it
  const node::HttpResponse r = answer.get();
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = json::parse(r.body)["id"];
  EXPECT_TRUE(busy_a.release()) << "node a was still busy";
  EXPECT_TRUE(ran(cluster.logs(1), id)) << cluster.logs(1);
  EXPECT_FALSE(ran(cluster.logs(0), id));
}

TEST(FabricOpenAi, PeerKilledMidStreamTheAnswerGoesOnFromAnotherNode) {
  Cluster cluster(3);
  ASSERT_TRUE(cluster.start_all());
  ASSERT_TRUE(cluster.wait_links(0, 2));
  Blocker blocker(cluster.endpoint(0));
  // Sampled, without a seed from the client: the accepting node draws one
  // and every run of the request uses it. A new run with another seed would
  // contradict the text already streamed and end the answer in an error.
  auto answer = std::async(std::launch::async, [&] {
    return post(cluster.endpoint(0), "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "Tell me a long story."}}}},
                 {"max_tokens", 1500},
                 {"temperature", 1.0},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}});
  });
  const int victim = generating_openai(cluster, {1, 2}, 20);
  ASSERT_GE(victim, 1) << "no peer ran the request";
  cluster.node(victim).signal(SIGKILL);
  const node::HttpResponse r = answer.get();
  ASSERT_EQ(r.status, 200) << r.body;
  const testing::StreamedAnswer s = testing::streamed_answer(r.body);
  EXPECT_TRUE(s.done) << r.body;
  EXPECT_TRUE(s.error.is_null()) << s.error.dump();
  EXPECT_FALSE(s.finish_reason.empty());
  EXPECT_GT(s.usage["completion_tokens"].get<int>(), 20);
  const int survivor = victim == 1 ? 2 : 1;
  EXPECT_TRUE(ran(cluster.logs(survivor), s.id)) << cluster.logs(survivor);
  EXPECT_NE(cluster.logs(0).find("ticket " + s.id + ": node " + Cluster::name(victim) + " was lost"), std::string::npos)
      << cluster.logs(0);
  EXPECT_TRUE(blocker.release());
  expect_one_at_a_time(Cluster::name(survivor), testing::runs_in_log(cluster.logs(survivor)));
}

TEST(FabricOpenAi, PeerKilledWithNoAttemptsLeftIsAClearError) {
  Cluster cluster(2, {"--max-attempts", "1"});
  ASSERT_TRUE(cluster.start_all());
  ASSERT_TRUE(cluster.wait_links(0, 1));
  Blocker blocker(cluster.endpoint(0));
  auto answer = std::async(std::launch::async, [&] {
    return post(cluster.endpoint(0), "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "Go on."}}}}, {"max_tokens", 1500}, {"temperature", 0}});
  });
  ASSERT_EQ(generating_openai(cluster, {1}, 2), 1);
  cluster.node(1).signal(SIGKILL);
  const node::HttpResponse r = answer.get();
  EXPECT_EQ(r.status, 500) << r.body;
  const json error = json::parse(r.body)["error"];
  EXPECT_EQ(error["code"], "internal");
  const std::string message = error["message"];
  EXPECT_NE(message.find("gave up after 1 attempts"), std::string::npos) << message;
  EXPECT_NE(message.find("node b was lost"), std::string::npos) << message;
  EXPECT_TRUE(blocker.release());
}

}  // namespace
}  // namespace revis
