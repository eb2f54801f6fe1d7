// revis serve --broker against a real nats-server (docs/scale-out.md): sim
// nodes pull tickets a test client publishes, exactly one result per
// ticket, through node deaths, broker restarts, poison and duplicate
// tickets, and a node with another catalogue; a real node with slots holds
// as many tickets as it has slots.
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
    if (replicas_ == 1) {
      servers_.push_back(std::make_unique<NatsServer>());
    } else {
      // A NATS cluster on loopback: every server routes to the others.
      std::vector<int> ports, routes;
      for (int i = 0; i < replicas_; ++i) ports.push_back(testing::free_port()), routes.push_back(testing::free_port());
      for (int i = 0; i < replicas_; ++i) {
        std::string others;
        for (int j = 0; j < replicas_; ++j)
          if (j != i) others += (others.empty() ? "" : ",") + std::string("nats://127.0.0.1:") + std::to_string(routes[j]);
        servers_.push_back(std::make_unique<NatsServer>(
            std::vector<std::string>{"--cluster_name", "revis", "--server_name", "s" + std::to_string(i), "--cluster",
                                     "nats://127.0.0.1:" + std::to_string(routes[i]), "--routes", others},
            ports[i]));
      }
    }
    server_ = servers_[0].get();
    for (const auto& s : servers_) urls_ += (urls_.empty() ? "" : ",") + s->url();
    std::ofstream(dir_.file("tasks.toml")) << kClusterTasks;
    BrokerOptions o;
    o.servers = urls_;
    o.name = "test client";
    auto conn = Connection::connect(o);
    ASSERT_TRUE(conn.ok()) << conn.status().message();
    client_ = std::move(*conn);
    StreamSettings streams;
    streams.replicas = replicas_;
    // A new cluster elects its JetStream leader first.
    Result<std::string> made = Status::error("not tried");
    for (int i = 0; i < 100 && !made.ok(); ++i) {
      made = ensure_streams(*client_, streams);
      if (!made.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(made.ok()) << made.status().message();
  }

  // A sim node on the broker; `more` adds flags (another --catalog).
  NodeProcess& start_node(const std::string& name, double tok_s, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--engine", "sim", "--name", name, "--broker", urls_,
                                     "--broker-replicas", std::to_string(replicas_),
                                     "--broker-ack-wait-ms", std::to_string(ack_wait_ms_),
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

  // Tickets the nodes ran and acked, waiting (bounded) for `n`: a node
  // counts one after its ack, a moment after the result is stored.
  uint64_t total_done(uint64_t n) {
    uint64_t ran = 0;
    for (int i = 0; i < 250; ++i) {
      ran = 0;
      for (auto& node : nodes_) ran += broker_status(*node)["counters"]["done"].get<uint64_t>();
      if (ran >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ran;
  }

  void publish(const std::string& id, const std::string& task, const std::string& text = "hello", bool streaming = false) {
    const json t = {{"type", "ticket"}, {"ticketID", id}, {"taskType", task}, {"isStreaming", streaming}, {"args", {{"text", text}}}};
    Status s = client_->publish(ticket_subject(task), t.dump(), id);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // The results of `ids` stored now (added to `found`).
  void collect(const std::vector<std::string>& ids, std::map<std::string, json>& found) {
    for (const std::string& id : ids) {
      if (found.count(id)) continue;
      auto r = client_->last_message(kResultStream, result_subject(id));
      if (r.ok() && *r) found[id] = json::parse(**r);
    }
  }

  // Every id's result from REVIS_RESULTS, waiting up to `limit` for all.
  std::map<std::string, json> results(const std::vector<std::string>& ids, std::chrono::seconds limit) {
    std::map<std::string, json> found;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (found.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
      collect(ids, found);
      if (found.size() < ids.size()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return found;
  }

  // The node running ticket `id` now, waiting for one (bounded); null if none.
  NodeProcess* running(const std::string& id) {
    for (int i = 0; i < 250; ++i) {
      for (auto& n : nodes_)
        if (const json current = testing::http_json(n->endpoint(), "/v1/revis/status")["current"];
            current.is_object() && current.value("label", "") == id)
          return n.get();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return nullptr;
  }

  // Kills a node (SIGKILL) and forgets it: a dead node has no status.
  void kill(NodeProcess* node) {
    node->signal(SIGKILL);
    std::erase_if(nodes_, [node](const auto& n) { return n.get() == node; });
  }

  // Waits (bounded) until the counter `name` of `node` reaches `n`; its value.
  static uint64_t counter(NodeProcess& node, const std::string& name, uint64_t n) {
    uint64_t v = 0;
    for (int i = 0; i < 250 && v < n; ++i) {
      v = broker_status(node)["counters"][name].get<uint64_t>();
      if (v < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return v;
  }

  uint64_t stored(const char* stream) {
    auto n = stream_messages(*client_, stream);
    EXPECT_TRUE(n.ok()) << n.status().message();
    return n.ok() ? *n : 0;
  }

  int replicas_ = 1;  // 1: one server; 3: a cluster of three, streams on all
  int ack_wait_ms_ = kAckWaitMs;  // of the nodes started from now on
  testing::TempDir dir_;
  std::vector<std::unique_ptr<NatsServer>> servers_;
  NatsServer* server_ = nullptr;  // the first
  std::string urls_;
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
  EXPECT_EQ(total_done(300), 300u);          // and none ran twice
  EXPECT_EQ(stored(kTicketStream), 0u);      // every ticket acknowledged
  for (auto& n : nodes_) {
    const json b = broker_status(*n);
    EXPECT_EQ(b["counters"]["duplicates"], 0) << b.dump();
    testing::expect_one_at_a_time(n->log(), testing::runs_in_log(n->log()));
  }
}

// A node with N slots holds up to N unacknowledged tickets, runs them in one
// batch, and each still ends with one result.
TEST_F(BrokerCluster, ANodeWithSlotsHoldsThatManyTicketsAtOnce) {
  nodes_.push_back(std::make_unique<NodeProcess>(std::vector<std::string>{
      "-m", testing::testdata("models/qwen2-Q8_0.gguf").string(), "-t", "1", "--parallel", "3", "--name", "slots",
      "--broker", urls_, "--broker-ack-wait-ms", std::to_string(ack_wait_ms_), "--catalog", dir_.file("tasks.toml")}));
  NodeProcess& node = *nodes_.back();
  ASSERT_TRUE(node.wait_ready()) << node.log();
  ASSERT_TRUE(wait_pulling(node)) << node.log();
  const std::vector<std::string> ids = ticket_ids("slot-", 9);
  for (const std::string& id : ids) publish(id, "hold");  // until the context is full
  int most = 0;
  std::map<std::string, json> found;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (found.size() < ids.size() && std::chrono::steady_clock::now() < deadline) {
    auto stats = consumer_stats(*client_, "hold");
    ASSERT_TRUE(stats.ok());
    EXPECT_LE(stats->ack_pending, 3) << "never more tickets held than slots";
    most = std::max(most, static_cast<int>(stats->ack_pending));
    collect(ids, found);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(found.size(), ids.size()) << node.log();
  for (const auto& [id, event] : found) EXPECT_EQ(event["type"], "done") << event.dump();
  EXPECT_GE(most, 2) << "the node never held two tickets at once:\n" << node.log();
  EXPECT_EQ(stored(kResultStream), ids.size());
  EXPECT_EQ(total_done(ids.size()), ids.size());
  EXPECT_EQ(stored(kTicketStream), 0u);
  const std::vector<testing::LoggedRun> runs = testing::runs_in_log(node.log());
  ASSERT_EQ(runs.size(), ids.size()) << "none ran twice";
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
  nodes_.erase(nodes_.begin());  // dead: no status to ask
  start_node("b", 3000);
  auto found = results({"long-1", "long-2"}, std::chrono::seconds(30));
  ASSERT_EQ(found.size(), 2u);
  for (const auto& [id, event] : found) {
    EXPECT_EQ(event["type"], "done") << event.dump();
    EXPECT_EQ(event["stats"]["node"], "b");
  }
  EXPECT_EQ(stored(kResultStream), 2u);
  EXPECT_EQ(total_done(2), 2u);
  EXPECT_EQ(stored(kTicketStream), 0u);
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
  // An ack wait longer than the outage (docs/scale-out.md): a result a node
  // finished while the broker was down is stored before the ticket could be
  // redelivered.
  ack_wait_ms_ = 10000;
  for (const char* name : {"a", "b"}) ASSERT_TRUE(wait_pulling(start_node(name, 1000)));
  const std::vector<std::string> ids = ticket_ids("r", 40);
  for (const std::string& id : ids) publish(id, "work");
  ASSERT_EQ(results({ids[3]}, std::chrono::seconds(20)).size(), 1u);
  std::map<std::string, json> before;  // what a client could have read before the restart
  collect(ids, before);
  ASSERT_TRUE(server_->restart());  // SIGTERM: file storage keeps both streams
  for (int i = 0; i < 400 && !client_->connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  auto found = results(ids, std::chrono::seconds(60));
  EXPECT_EQ(found.size(), ids.size());
  for (const auto& [id, event] : found) EXPECT_EQ(event["type"], "done") << event.dump();
  EXPECT_EQ(stored(kResultStream), ids.size());
  for (const auto& [id, event] : before) EXPECT_EQ(found[id], event) << "the result of " << id << " changed";
  // Nothing ran twice: the runs the nodes log (every finished run, its
  // result stored or not; a node keeps a result the stopped broker could
  // not take and stores it once it is back) are one per ticket, and each
  // stored result is that run's.
  std::map<std::string, std::vector<std::string>> ran_on;  // ticketID -> nodes
  for (const auto& n : nodes_)
    for (const auto& run : testing::runs_in_log(n->log())) ran_on[run.ticket].push_back(n == nodes_[0] ? "a" : "b");
  for (const std::string& id : ids) {
    ASSERT_EQ(ran_on[id].size(), 1u) << id << " ran on " << json(ran_on[id]).dump() << "\n" << nodes_[0]->log() << "\n" << nodes_[1]->log();
    EXPECT_EQ(found[id]["stats"]["node"], ran_on[id][0]) << id;
  }
  for (auto& n : nodes_) EXPECT_TRUE(wait_pulling(*n)) << n->log();
}

TEST_F(BrokerCluster, CancelAtARelayingNodeStopsTheRunOnAnother) {
  NodeProcess& a = start_node("a", 300);  // "long": 2 s
  ASSERT_TRUE(wait_pulling(a));
  // b relays its clients' tickets but runs none: another catalogue.
  std::ofstream(dir_.file("other.toml")) << kClusterTasks << "\n[tasks.extra]\ntier = \"small\"\nuser = \"{{text}}\"\nrequired = [\"text\"]\n";
  NodeProcess& b = start_node("b", 300, {"--catalog", dir_.file("other.toml")});
  auto ws = node::WsClient::connect(b.endpoint(), "/v1/revis/stream", "", 10000);
  ASSERT_TRUE(ws.ok()) << ws.status().message();
  const json t = {{"type", "ticket"}, {"ticketID", "c-1"}, {"taskType", "long"}, {"isStreaming", true}, {"args", {{"text", "hi"}}}};
  ASSERT_TRUE((*ws)->send(t.dump()).ok());
  // Tokens arrive: it runs (on a).
  json event = json::object();
  for (int i = 0; i < 100 && event.value("type", "") != "token"; ++i) {
    auto m = (*ws)->receive(10000);
    ASSERT_TRUE(m.ok()) << m.status().message();
    event = json::parse(*m);
  }
  ASSERT_EQ(event["type"], "token") << event.dump();
  ASSERT_TRUE((*ws)->send(json{{"type", "cancel"}, {"ticketID", "c-1"}}.dump()).ok());
  for (int i = 0; i < 1000 && event["type"] == "token"; ++i) {
    auto m = (*ws)->receive(10000);
    ASSERT_TRUE(m.ok()) << m.status().message();
    event = json::parse(*m);
  }
  EXPECT_EQ(event["type"], "error") << event.dump();
  EXPECT_EQ(event["code"], "cancelled") << event.dump();
  // The run on a stopped, ended cancelled and acked: not redelivered.
  EXPECT_EQ(counter(a, "cancelled", 1), 1u) << a.log();
  EXPECT_EQ(broker_status(a)["counters"]["done"], 0);
  EXPECT_TRUE(testing::runs_in_log(a.log()).empty()) << a.log();
  EXPECT_NE(a.log().find("ticket c-1 cancelled by its client"), std::string::npos) << a.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(kAckWaitMs * 2));  // a redelivery would have come by now
  EXPECT_EQ(broker_status(a)["counters"]["pulled"], 1);
  EXPECT_EQ(stored(kTicketStream), 0u);
  EXPECT_EQ(stored(kResultStream), 1u);
  EXPECT_EQ(results({"c-1"}, std::chrono::seconds(1))["c-1"]["code"], "cancelled");
}

// On a ticket subject "type" is implied: the original protocol's four
// fields make a ticket that runs; a "type" that is there is still checked.
TEST_F(BrokerCluster, FourFieldTicketWithoutTypeRuns) {
  NodeProcess& a = start_node("a", 2000);
  ASSERT_TRUE(wait_pulling(a));
  const json four = {{"ticketID", "four"}, {"taskType", "work"}, {"isStreaming", false}, {"args", {{"text", "hello"}}}};
  ASSERT_TRUE(client_->publish(ticket_subject("work"), four.dump(), "four").ok());
  json odd = four;
  odd["ticketID"] = "not-a-ticket";
  odd["type"] = "nonsense";
  ASSERT_TRUE(client_->publish(ticket_subject("work"), odd.dump(), "not-a-ticket").ok());
  auto found = results({"four", "not-a-ticket"}, std::chrono::seconds(20));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found["four"]["type"], "done") << found["four"].dump();
  EXPECT_FALSE(found["four"]["text"].get<std::string>().empty()) << found["four"].dump();
  EXPECT_EQ(found["not-a-ticket"]["type"], "error") << found["not-a-ticket"].dump();
  EXPECT_EQ(found["not-a-ticket"]["code"], "bad_request") << found["not-a-ticket"].dump();
  EXPECT_EQ(counter(a, "done", 1), 1u) << broker_status(a).dump();
}

TEST_F(BrokerCluster, TicketPastMaxDeliverGetsOneErrorResult) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(wait_pulling(start_node(name, 300, {"--broker-max-deliver", "1"})));
  publish("doomed", "long");  // 2 s
  NodeProcess* runner = running("doomed");
  ASSERT_NE(runner, nullptr);
  kill(runner);  // its one delivery never ends: JetStream gives up after the ack wait
  NodeProcess& survivor = *nodes_[0];
  auto found = results({"doomed"}, std::chrono::seconds(20));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found["doomed"]["type"], "error") << found["doomed"].dump();
  EXPECT_EQ(found["doomed"]["code"], "internal") << found["doomed"].dump();
  EXPECT_NE(found["doomed"]["message"].get<std::string>().find("max_deliver"), std::string::npos) << found["doomed"].dump();
  EXPECT_EQ(counter(survivor, "givenUp", 1), 1u) << survivor.log();
  EXPECT_EQ(broker_status(survivor)["counters"]["pulled"], 0);  // never redelivered
  EXPECT_EQ(stored(kResultStream), 1u);
  EXPECT_EQ(stored(kTicketStream), 0u);  // and gone from the work queue
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
  EXPECT_EQ(total_done(2), 2u);
  EXPECT_EQ(stored(kResultStream), 2u);
  // revis status shows the broker link and the consumers.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the node refreshes them every second
  r = testing::run_revis("status " + node);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": connected"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat.completions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done 2"), std::string::npos) << r.out;
}

// Events of one ticket as a client reads them, up to its final event.
std::vector<json> events_until_final(node::WsClient& ws) {
  std::vector<json> events;
  while (events.empty() || events.back()["type"] == "token" || events.back()["type"] == "accepted") {
    auto m = ws.receive(10000);
    if (!m.ok()) {
      ADD_FAILURE() << m.status().message();
      break;
    }
    events.push_back(json::parse(*m));
  }
  return events;
}

// The token texts of `events`, checking that their seq runs on from `first`.
std::string token_text(const std::vector<json>& events, int64_t first) {
  std::string text;
  for (const json& e : events) {
    if (e["type"] != "token") continue;
    EXPECT_EQ(e["seq"], first++) << e.dump();
    text += e["text"].get<std::string>();
  }
  return text;
}

TEST_F(BrokerCluster, ClientsOfOneNodeSendingOneTicketIdShareOneRun) {
  NodeProcess& a = start_node("a", 200);  // "long": 3 s
  ASSERT_TRUE(wait_pulling(a));
  std::vector<std::unique_ptr<node::WsClient>> ws;
  for (int i = 0; i < 3; ++i) {
    auto c = node::WsClient::connect(a.endpoint(), "/v1/revis/stream", "", 10000);
    ASSERT_TRUE(c.ok()) << c.status().message();
    ws.push_back(std::move(*c));
  }
  const json t = {{"type", "ticket"}, {"ticketID", "twin"}, {"taskType", "long"}, {"isStreaming", true}, {"args", {{"text", "hi"}}}};
  ASSERT_TRUE(ws[0]->send(t.dump()).ok());
  std::vector<json> first;  // until a few tokens have come: it runs
  while (std::count_if(first.begin(), first.end(), [](const json& e) { return e["type"] == "token"; }) < 5) {
    auto m = ws[0]->receive(10000);
    ASSERT_TRUE(m.ok()) << m.status().message();
    first.push_back(json::parse(*m));
  }
  // The same ticket from a second client, and a resume from a third that
  // saw its tokens up to seq 2.
  ASSERT_TRUE(ws[1]->send(t.dump()).ok());
  ASSERT_TRUE(ws[2]->send(json{{"type", "resume"}, {"ticketID", "twin"}, {"attempt", 1}, {"afterSeq", 2}}.dump()).ok());
  for (const json& e : events_until_final(*ws[0])) first.push_back(e);
  const std::vector<json> second = events_until_final(*ws[1]);
  const std::vector<json> third = events_until_final(*ws[2]);
  ASSERT_EQ(first.back()["type"], "done") << first.back().dump();
  ASSERT_EQ(second.back()["type"], "done") << second.back().dump();
  ASSERT_EQ(third.back()["type"], "done") << third.back().dump();
  EXPECT_EQ(second.front()["type"], "accepted");
  // Each client has every token once, in order, and the one result.
  const std::string text = first.back()["text"];
  EXPECT_EQ(token_text(first, 0), text);
  EXPECT_EQ(token_text(second, 0), text);
  const std::string resumed = token_text(third, 3);
  EXPECT_EQ(text.substr(text.size() - resumed.size()), resumed);
  EXPECT_EQ(second.back(), first.back());
  EXPECT_EQ(third.back(), first.back());
  // One run: pulled and done once, one stored result.
  EXPECT_EQ(total_done(1), 1u);
  EXPECT_EQ(broker_status(a)["counters"]["pulled"], 1);
  EXPECT_EQ(stored(kResultStream), 1u);
}

TEST_F(BrokerCluster, BatchThroughTheBrokerInInputOrderAndARerunCollects) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(wait_pulling(start_node(name, 4000)));
  std::ofstream in(dir_.file("in.jsonl"));
  for (int i = 0; i < 40; ++i) in << json{{"taskType", "work"}, {"args", {{"text", "line " + std::to_string(i)}}}}.dump() << "\n";
  in.close();
  const std::string args = "batch " + dir_.file("in.jsonl") + " --broker " + server_->url() + " --concurrency 64 -o ";
  auto first = testing::run_revis(args + dir_.file("out1.jsonl"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("ran on: a "), std::string::npos) << first.err;
  EXPECT_NE(first.err.find(", b "), std::string::npos) << first.err;
  auto second = testing::run_revis(args + dir_.file("out2.jsonl"));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  std::ifstream out1(dir_.file("out1.jsonl")), out2(dir_.file("out2.jsonl"));
  std::string l1, l2;
  for (int line = 1; std::getline(out1, l1); ++line) {
    ASSERT_TRUE(std::getline(out2, l2));
    const json r1 = json::parse(l1), r2 = json::parse(l2);
    EXPECT_EQ(r1["line"], line);
    EXPECT_EQ(r1["status"], "done");
    EXPECT_EQ(r1["ticketID"], r2["ticketID"]);  // the same tickets, collected, not run again
    EXPECT_EQ(r1["text"], r2["text"]);
    EXPECT_EQ(r1["stats"]["startedMs"], r2["stats"]["startedMs"]);
  }
  EXPECT_EQ(stored(kResultStream), 40u);
  EXPECT_EQ(total_done(40), 40u);
  auto one = testing::run_revis("submit --broker " + server_->url() + " --task work --arg text=hi --stream --id s-1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto stored_one = results({"s-1"}, std::chrono::seconds(5));
  ASSERT_EQ(stored_one.size(), 1u);
  EXPECT_EQ(one.out, stored_one["s-1"]["text"].get<std::string>() + "\n");  // the streamed tokens make the text
}

class BrokerOnNatsCluster : public BrokerCluster {
 protected:
  BrokerOnNatsCluster() { replicas_ = 3; }
};

TEST_F(BrokerOnNatsCluster, KillingOneServerMidBatchLosesNoTicket) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(wait_pulling(start_node(name, 1000)));
  const std::vector<std::string> ids = ticket_ids("k", 40);
  for (const std::string& id : ids) publish(id, "work");
  ASSERT_EQ(results({ids[3]}, std::chrono::seconds(20)).size(), 1u);
  servers_[0]->stop(SIGKILL);
  auto found = results(ids, std::chrono::seconds(60));
  EXPECT_EQ(found.size(), ids.size());
  for (const auto& [id, event] : found) EXPECT_EQ(event["type"], "done") << event.dump();
  EXPECT_EQ(stored(kResultStream), ids.size());
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
