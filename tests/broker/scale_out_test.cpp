// revis serve --broker against a real nats-server (docs/scale-out.md): sim
// nodes pull tickets a test client publishes, exactly one result per
// ticket, through node deaths, broker restarts, poison and duplicate
// tickets, and a node with another catalogue.
#include <gtest/gtest.h>

#include <set>

#include "broker/nats_server.h"
#include "broker/streams.h"
#include "fabric/cluster.h"
#include "node/node_process.h"
#include "support/run_command.h"

namespace revis::broker {
namespace {

using nlohmann::json;
using testing::NatsServer;
using testing::NodeProcess;

// The cluster tests' tasks (fabric/cluster.h): "work" is 48 tokens, "long" 600.
using testing::kClusterTasks;

constexpr int kAckWaitMs = 1000;

class BrokerCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    REVIS_REQUIRE_NATS_SERVER();
    server_ = std::make_unique<NatsServer>();
    std::ofstream(dir_.file("tasks.toml")) << kClusterTasks;
    BrokerOptions o;
    o.servers = server_->url();
    o.name = "test client";
    auto conn = Connection::connect(o);
    ASSERT_TRUE(conn.ok()) << conn.status().message();
    client_ = std::move(*conn);
    ASSERT_TRUE(ensure_streams(*client_, {}).ok());
  }

  // A sim node on the broker; `more` adds flags (another --catalog).
  NodeProcess& start_node(const std::string& name, double tok_s, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--engine", "sim", "--name", name, "--broker", server_->url(),
                                     "--broker-ack-wait-ms", std::to_string(kAckWaitMs),
                                     "--sim-tokens-per-s", std::to_string(tok_s), "--sim-prefill-tokens-per-s", "100000"};
    if (std::find(more.begin(), more.end(), "--catalog") == more.end()) more.insert(more.end(), {"--catalog", dir_.file("tasks.toml")});
    args.insert(args.end(), more.begin(), more.end());
    nodes_.push_back(std::make_unique<NodeProcess>(args));
    EXPECT_TRUE(nodes_.back()->wait_ready()) << nodes_.back()->log();
    return *nodes_.back();
  }

  // Waits until the node pulls (its consumers are set up) or says why not.
  static json broker_status(NodeProcess& node) { return testing::http_json(node.endpoint(), "/v1/revis/status")["broker"]; }
  static bool wait_pulling(NodeProcess& node) {
    for (int i = 0; i < 500; ++i) {
      const json b = broker_status(node);
      if (b["connected"] == true && b["refusal"].is_null() && !b["consumers"].empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void publish(const std::string& id, const std::string& task, const std::string& text = "hello", bool streaming = false) {
    const json t = {{"type", "ticket"}, {"ticketID", id}, {"taskType", task}, {"isStreaming", streaming}, {"args", {{"text", text}}}};
    Status s = client_->publish(ticket_subject(task), t.dump(), id);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // Every id's result from REVIS_RESULTS, waiting up to `limit` for all.
  std::map<std::string, json> results(const std::vector<std::string>& ids, std::chrono::seconds limit) {
    std::map<std::string, json> found;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (found.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
      for (const std::string& id : ids) {
        if (found.count(id)) continue;
        auto r = client_->last_message(kResultStream, result_subject(id));
        if (r.ok() && *r) found[id] = json::parse(**r);
      }
      if (found.size() < ids.size()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return found;
  }

  uint64_t stored(const char* stream) {
    auto n = stream_messages(*client_, stream);
    EXPECT_TRUE(n.ok()) << n.status().message();
    return n.ok() ? *n : 0;
  }

  testing::TempDir dir_;
  std::unique_ptr<NatsServer> server_;
  std::unique_ptr<Connection> client_;
  std::vector<std::unique_ptr<NodeProcess>> nodes_;
};

std::vector<std::string> ticket_ids(const std::string& prefix, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i));
  return ids;
}

TEST_F(BrokerCluster, ThreeNodesThreeHundredTicketsEachExactlyOnce) {
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(wait_pulling(start_node(name, 4000)));
  const std::vector<std::string> ids = ticket_ids("t", 300);
  for (const std::string& id : ids) publish(id, "work");
  auto found = results(ids, std::chrono::seconds(90));
  ASSERT_EQ(found.size(), ids.size());
  std::map<std::string, int> per_node;
  for (const auto& [id, event] : found) {
    EXPECT_EQ(event["type"], "done") << event.dump();
    EXPECT_EQ(event["ticketID"], id);
    ++per_node[event["stats"]["node"].get<std::string>()];
  }
  EXPECT_EQ(per_node.size(), 3u) << "tickets went to " << json(per_node).dump();
  EXPECT_EQ(stored(kResultStream), 300u);  // one result per ticket, none twice
  EXPECT_EQ(stored(kTicketStream), 0u);    // every ticket acknowledged
  uint64_t ran = 0;
  for (auto& n : nodes_) {
    const json b = broker_status(*n);
    ran += b["counters"]["done"].get<uint64_t>();
    EXPECT_EQ(b["counters"]["duplicates"], 0) << b.dump();
    testing::expect_one_at_a_time(n->log(), testing::runs_in_log(n->log()));
  }
  EXPECT_EQ(ran, 300u);  // and none ran twice
}

TEST_F(BrokerCluster, BusyNodeHoldsOneTicketAndKilledNodesTicketCompletesElsewhereOnce) {
  NodeProcess& a = start_node("a", 300);  // "long": 2 s
  ASSERT_TRUE(wait_pulling(a));
  publish("long-1", "long");
  publish("long-2", "long");
  // a busy node never holds a second unacknowledged ticket
  for (int i = 0; i < 20; ++i) {
    auto stats = consumer_stats(*client_, "long");
    ASSERT_TRUE(stats.ok());
    EXPECT_LE(stats->ack_pending, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(testing::http_json(a.endpoint(), "/v1/revis/status")["current"]["label"], "long-1");
  a.signal(SIGKILL);
  NodeProcess& b = start_node("b", 3000);
  auto found = results({"long-1", "long-2"}, std::chrono::seconds(30));
  ASSERT_EQ(found.size(), 2u);
  for (const auto& [id, event] : found) {
    EXPECT_EQ(event["type"], "done") << event.dump();
    EXPECT_EQ(event["stats"]["node"], "b");
  }
  EXPECT_EQ(stored(kResultStream), 2u);
  EXPECT_EQ(stored(kTicketStream), 0u);
  EXPECT_EQ(broker_status(b)["counters"]["done"], 2);
}

TEST_F(BrokerCluster, PoisonTicketOneErrorNeverRedeliveredAndDuplicateIdRunsOnce) {
  NodeProcess& a = start_node("a", 2000);
  ASSERT_TRUE(wait_pulling(a));
  // No "text": a required argument is missing.
  const json bad = {{"type", "ticket"}, {"ticketID", "poison"}, {"taskType", "work"}, {"isStreaming", false}, {"args", json::object()}};
  ASSERT_TRUE(client_->publish(ticket_subject("work"), bad.dump(), "poison").ok());
  ASSERT_TRUE(client_->publish(ticket_subject("work"), "{not json", "garbage").ok());
  publish("twice", "work");
  publish("twice", "work", "another text, same Nats-Msg-Id");
  auto found = results({"poison", "twice"}, std::chrono::seconds(20));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found["poison"]["type"], "error");
  EXPECT_EQ(found["poison"]["code"], "missing_arg") << found["poison"].dump();
  EXPECT_EQ(found["twice"]["type"], "done");
  std::this_thread::sleep_for(std::chrono::milliseconds(kAckWaitMs * 2));  // a redelivery would have come by now
  const json b = broker_status(a);
  EXPECT_EQ(b["counters"]["pulled"], 3) << b.dump();  // poison, garbage, twice: each once
  EXPECT_EQ(b["counters"]["terminated"], 2) << b.dump();
  EXPECT_EQ(b["counters"]["done"], 1) << b.dump();
  EXPECT_EQ(stored(kTicketStream), 0u);
  EXPECT_EQ(stored(kResultStream), 2u);
}

TEST_F(BrokerCluster, BrokerRestartMidBatchLosesNothingAndNodesReconnect) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(wait_pulling(start_node(name, 1000)));
  const std::vector<std::string> ids = ticket_ids("r", 40);
  for (const std::string& id : ids) publish(id, "work");
  ASSERT_EQ(results({ids[3]}, std::chrono::seconds(20)).size(), 1u);
  ASSERT_TRUE(server_->restart());  // SIGTERM: file storage keeps both streams
  for (int i = 0; i < 400 && !client_->connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  auto found = results(ids, std::chrono::seconds(60));
  EXPECT_EQ(found.size(), ids.size());
  for (const auto& [id, event] : found) EXPECT_EQ(event["type"], "done") << event.dump();
  EXPECT_EQ(stored(kResultStream), ids.size());
  for (auto& n : nodes_) EXPECT_TRUE(wait_pulling(*n)) << n->log();
}

TEST_F(BrokerCluster, NodeWithAnotherCatalogueRefusesToPull) {
  NodeProcess& a = start_node("a", 2000);
  ASSERT_TRUE(wait_pulling(a));
  std::ofstream(dir_.file("other.toml")) << kClusterTasks << "\n[tasks.extra]\ntier = \"small\"\nuser = \"{{text}}\"\nrequired = [\"text\"]\n";
  NodeProcess& b = start_node("b", 2000, {"--catalog", dir_.file("other.toml")});
  json status;
  for (int i = 0; i < 200 && !status["refusal"].is_string(); ++i) {
    status = broker_status(b);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(status["refusal"].is_string()) << status.dump();
  EXPECT_NE(status["refusal"].get<std::string>().find("catalogue"), std::string::npos) << status.dump();
  EXPECT_NE(b.log().find("not pulling"), std::string::npos);
  const std::vector<std::string> ids = ticket_ids("c", 20);
  for (const std::string& id : ids) publish(id, "work");
  auto found = results(ids, std::chrono::seconds(30));
  ASSERT_EQ(found.size(), ids.size());
  for (const auto& [id, event] : found) EXPECT_EQ(event["stats"]["node"], "a");
  EXPECT_EQ(broker_status(b)["counters"]["pulled"], 0);
  const auto metrics = node::http_request(b.endpoint(), "GET", "/metrics", "", {}, 5000);
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("revis_broker_pulling 0"), std::string::npos);
}

TEST_F(BrokerCluster, NodeRelaysItsClientsTicketsThroughTheBroker) {
  NodeProcess& a = start_node("a", 2000);
  ASSERT_TRUE(wait_pulling(a));
  const std::string node = "--node 127.0.0.1:" + std::to_string(a.port());
  auto r = testing::run_revis("submit " + node + " --task work --arg text=hi --id ws-1 --stream --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // It went through the broker: its result is stored there.
  auto found = results({"ws-1"}, std::chrono::seconds(5));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found["ws-1"]["stats"]["node"], "a");
  // The same ticketID again is that result, not a second run.
  r = testing::run_revis("submit " + node + " --task work --arg text=hi --id ws-1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["stats"]["startedMs"], found["ws-1"]["stats"]["startedMs"]);
  // An OpenAI request too.
  auto chat = node::http_request(a.endpoint(), "POST", "/v1/chat/completions",
                                 R"({"model":"small","messages":[{"role":"user","content":"hi"}],"max_tokens":5})", {}, 10000);
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(json::parse(chat->body)["usage"]["completion_tokens"], 5);
  EXPECT_EQ(broker_status(a)["counters"]["done"], 2);
  EXPECT_EQ(stored(kResultStream), 2u);
}

TEST_F(BrokerCluster, WithoutItsBrokerANodeServesItsClientsAlone) {
  server_->stop(SIGKILL);
  NodeProcess& a = start_node("a", 2000);
  auto r = testing::run_revis("submit --node 127.0.0.1:" + std::to_string(a.port()) + " --task work --arg text=hi --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["stats"]["node"], "a");
  EXPECT_EQ(broker_status(a)["connected"], false);
}

}  // namespace
}  // namespace revis::broker
