// The fabric end to end: real nodes on loopback ports, the small shared
// qwen2 model, tickets sent to one node and spread over all of them; nodes
// killed and restarted under load. Every test checks the client's side of
// exactly-once (one terminal event per ticket, none lost) and, from each
// node's own log of start/end times, that no node ran more jobs at once than
// it has slots (one unless a test gives more).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <set>

#include "fabric/cluster.h"
#include "support/run_command.h"

namespace revis {
namespace {

using testing::Cluster;
using testing::expect_one_at_a_time;
using testing::http_json;
using testing::json;
using testing::LoggedRun;
using testing::TicketClient;
using testing::TicketView;
using namespace std::chrono_literals;

std::vector<std::string> ids(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

// Every ticket ended exactly once, with `done`, and its streamed text (after
// the last retry) is the result's text.
void expect_all_done_once(TicketClient& client, const std::vector<std::string>& tickets) {
  for (const std::string& id : tickets) {
    const TicketView& v = client.tickets[id];
    EXPECT_EQ(v.problem, "") << id;
    ASSERT_EQ(v.terminals, 1) << id;
    ASSERT_EQ(v.terminal["type"], "done") << id << ": " << v.terminal.dump();
    EXPECT_EQ(v.text, v.terminal["text"].get<std::string>()) << id << ": the stream is the result";
  }
}

TEST(Cluster, FiftyTicketsToOneNodeSpreadOverThree) {
  Cluster cluster(3);
  ASSERT_TRUE(cluster.start_all());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster.wait_links(i, 2)) << cluster.node(i).log();

  TicketClient client(cluster.endpoint(0));
  const std::vector<std::string> tickets = ids("s-", 50);
  for (const std::string& id : tickets) client.ticket(id, "work", "Ticket " + id + " says hello.");
  ASSERT_TRUE(client.until_all_ended(tickets));
  expect_all_done_once(client, tickets);

  std::map<std::string, int> by_node;
  for (const std::string& id : tickets) ++by_node[client.tickets[id].terminal["stats"]["node"].get<std::string>()];
  std::printf("50 tickets to node a ran on: a %d, b %d, c %d\n", by_node["a"], by_node["b"], by_node["c"]);
  for (const char* n : {"a", "b", "c"}) EXPECT_GE(by_node[n], 3) << "node " << n << " took part";

  std::set<std::string> ran;
  size_t total_runs = 0;
  for (int i = 0; i < 3; ++i) {
    const std::vector<LoggedRun> runs = testing::runs_in_log(cluster.logs(i));
    EXPECT_EQ(runs.size(), static_cast<size_t>(by_node[Cluster::name(i)])) << "each node's log lists what it ran";
    expect_one_at_a_time(Cluster::name(i), runs);
    total_runs += runs.size();
    for (const LoggedRun& r : runs) ran.insert(r.ticket);
  }
  EXPECT_EQ(total_runs, tickets.size()) << "nothing ran twice";
  EXPECT_EQ(ran.size(), tickets.size());

  // The cluster view: every node, its state, links, heartbeats.
  json view = http_json(cluster.endpoint(0), "/v1/revis/cluster");
  ASSERT_EQ(view["nodes"].size(), 3u) << view.dump();
  std::set<std::string> names;
  for (const json& n : view["nodes"]) {
    names.insert(n["name"].get<std::string>());
    auto has = [](const json& list, const char* tier) { return std::find(list.begin(), list.end(), tier) != list.end(); };
    EXPECT_TRUE(has(n["tiers"], "small")) << n.dump();
    EXPECT_TRUE(has(n["loaded"], "small")) << "the model is loaded: " << n.dump();
    EXPECT_TRUE(n["catalogMatches"].get<bool>());
    if (!n["self"].get<bool>()) {
      EXPECT_EQ(n["link"], "up");
      EXPECT_LT(n["lastHeartbeatMsAgo"].get<double>(), 2000.0) << n.dump();
      EXPECT_GT(n["tokPerSec"].get<double>(), 0.0) << "it ran tickets: " << n.dump();
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "b", "c"}));
  auto status = testing::run_revis("status --node " + cluster.address(0));
  EXPECT_EQ(status.exit_code, 0) << status.err;
  for (const int i : {1, 2}) EXPECT_NE(status.out.find(cluster.address(i)), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("cluster seen from a"), std::string::npos) << status.out;
}

TEST(Cluster, PeerWithAnotherCatalogueIsListedButGetsNoTickets) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.start(0));
  std::ofstream(cluster.dir().file("other.toml")) << testing::kClusterTasks << "\n[tasks.extra]\ntier = \"small\"\nuser = \"x\"\n";
  ASSERT_TRUE(cluster.start(1, {"--catalog", cluster.dir().file("other.toml")}));
  ASSERT_TRUE(cluster.wait_links(0, 1));
  json view = http_json(cluster.endpoint(0), "/v1/revis/cluster");
  ASSERT_EQ(view["nodes"].size(), 2u);
  EXPECT_FALSE(view["nodes"][1]["catalogMatches"].get<bool>()) << view.dump();
  TicketClient client(cluster.endpoint(0));
  const std::vector<std::string> tickets = ids("m-", 8);
  for (const std::string& id : tickets) client.ticket(id, "work", "x");
  ASSERT_TRUE(client.until_all_ended(tickets));
  expect_all_done_once(client, tickets);
  for (const std::string& id : tickets) EXPECT_EQ(client.tickets[id].terminal["stats"]["node"], "a");
  EXPECT_TRUE(testing::runs_in_log(cluster.logs(1)).empty());
}

TEST(Cluster, TicketForATierOnlyAPeerServesRunsThere) {
  Cluster cluster(2);
  ASSERT_TRUE(cluster.start(1));
  ASSERT_TRUE(cluster.start(0, {"--tier", "small=" + testing::testdata("models/qwen2-Q8_0.gguf").string()}));
  ASSERT_TRUE(cluster.wait_links(0, 1));
  TicketClient client(cluster.endpoint(0));
  const std::vector<std::string> tickets = ids("big-", 6);
  for (const std::string& id : tickets) client.ticket(id, "bigwork", "Large " + id);
  ASSERT_TRUE(client.until_all_ended(tickets)) << cluster.node(0).log();
  expect_all_done_once(client, tickets);
  for (const std::string& id : tickets) EXPECT_EQ(client.tickets[id].terminal["stats"]["node"], "b") << "a serves no tier large";
  EXPECT_TRUE(testing::runs_in_log(cluster.logs(0)).empty());

  // With the only node that serves it gone, the ticket is refused at once.
  cluster.node(1).signal(SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool down = false;
  while (!down && std::chrono::steady_clock::now() < deadline) {
    for (const json& n : http_json(cluster.endpoint(0), "/v1/revis/cluster")["nodes"].get<std::vector<json>>())
      down = down || (!n["self"].get<bool>() && n["link"] == "down");
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(down);
  client.ticket("big-late", "bigwork", "x");
  ASSERT_TRUE(client.until_all_ended({"big-late"}));
  EXPECT_EQ(client.tickets["big-late"].terminal["code"], "model_unavailable") << client.tickets["big-late"].terminal.dump();
}

TEST(Cluster, KillNineMidGenerationRunsTheTicketElsewhere) {
  Cluster cluster(3);
  ASSERT_TRUE(cluster.start_all());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster.wait_links(i, 2));
  TicketClient client(cluster.endpoint(0));
  const std::vector<std::string> tickets = ids("k-", 9);
  for (const std::string& id : tickets) client.ticket(id, "long", "Ticket " + id);

  // Wait until node b is generating one of them, then kill it outright.
  std::string victim;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (victim.empty() && std::chrono::steady_clock::now() < deadline) {
    json s = http_json(cluster.endpoint(1), "/v1/revis/status");
    if (s["current"].is_object() && s["current"]["generated"].get<int>() > 2) victim = s["current"]["label"];
    else std::this_thread::sleep_for(5ms);
  }
  ASSERT_FALSE(victim.empty()) << "node b never ran a ticket";
  cluster.node(1).signal(SIGKILL);

  ASSERT_TRUE(client.until_all_ended(tickets)) << cluster.node(0).log();
  expect_all_done_once(client, tickets);
  const TicketView& v = client.tickets[victim];
  bool retried = false;
  for (const json& e : v.events) retried = retried || (e["type"] == "retry" && e["attempt"] == 2);
  EXPECT_TRUE(retried) << "the client heard that " << victim << " ran again";
  EXPECT_NE(v.terminal["stats"]["node"], "b");
  for (const std::string& id : tickets) EXPECT_LE(client.tickets[id].attempt, 2) << id;
  for (int i : {0, 2}) expect_one_at_a_time(Cluster::name(i), testing::runs_in_log(cluster.logs(i)));

  json view = http_json(cluster.endpoint(0), "/v1/revis/cluster");
  for (const json& n : view["nodes"]) {
    if (n["address"] == cluster.address(1)) {
      EXPECT_EQ(n["link"], "down") << n.dump();
    }
  }
}

TEST(Cluster, RestartOfTheAcceptingNodeLosesNothing) {
  Cluster cluster(3);
  const std::string journal = cluster.dir().file("a.journal");
  ASSERT_TRUE(cluster.start(0, {"--journal", journal}));
  ASSERT_TRUE(cluster.start(1));
  ASSERT_TRUE(cluster.start(2));
  ASSERT_TRUE(cluster.wait_links(0, 2));
  const std::vector<std::string> tickets = ids("r-", 12);
  std::map<std::string, json> results;
  {
    TicketClient client(cluster.endpoint(0));
    for (const std::string& id : tickets) client.ticket(id, "long", "Restart " + id, false);
    int done = 0;
    while (done < 3 && client.pump()) {
      done = 0;
      for (auto& [id, v] : client.tickets) done += v.terminals;
    }
    cluster.node(0).signal(SIGKILL);
    while (client.pump(2000)) {
    }
    for (auto& [id, v] : client.tickets) {
      EXPECT_LE(v.terminals, 1);
      if (v.terminals) results[id] = v.terminal;
    }
  }
  ASSERT_GE(results.size(), 3u);
  ASSERT_LT(results.size(), tickets.size()) << "the kill came mid-batch";
  cluster.node(0).wait_exit(5s);
  ASSERT_TRUE(cluster.start(0, {"--journal", journal})) << cluster.node(0).log();
  EXPECT_NE(cluster.node(0).log().find("unfinished ticket(s) resumed"), std::string::npos) << cluster.node(0).log();

  // The client reconnects: it resumes what it has no result for, and sends
  // one finished ticket again, as a client unsure of it would.
  TicketClient again(cluster.endpoint(0));
  std::vector<std::string> waiting;
  for (const std::string& id : tickets)
    if (!results.count(id)) {
      again.send({{"type", "resume"}, {"ticketID", id}, {"attempt", 0}, {"afterSeq", -1}});
      waiting.push_back(id);
    }
  const std::string finished_before = results.begin()->first;
  again.ticket(finished_before, "long", "Restart " + finished_before, false);
  waiting.push_back(finished_before);
  ASSERT_TRUE(again.until_all_ended(waiting)) << cluster.node(0).log();
  for (const std::string& id : waiting) {
    const TicketView& v = again.tickets[id];
    EXPECT_EQ(v.problem, "") << id;
    ASSERT_EQ(v.terminals, 1) << id;
    EXPECT_EQ(v.terminal["type"], "done") << id << ": " << v.terminal.dump();
  }
  EXPECT_EQ(again.tickets[finished_before].terminal, results[finished_before]) << "the stored result, not a second run";
  std::set<std::string> ran;
  for (int i = 0; i < 3; ++i) {
    const std::vector<LoggedRun> runs = testing::runs_in_log(cluster.logs(i));
    for (const LoggedRun& r : runs) ran.insert(r.ticket);
  }
  for (const std::string& id : tickets) EXPECT_TRUE(ran.count(id)) << id << " ran somewhere";
  expect_one_at_a_time("a", testing::runs_in_log(cluster.node(0).log()));
}

TEST(Cluster, StreamResumesFromLastSeqAfterReconnect) {
  Cluster cluster(1, {"--resume-window-ms", "20000"});
  ASSERT_TRUE(cluster.start(0));
  std::string before;
  int64_t last_seq = -1;
  {
    TicketClient client(cluster.endpoint(0));
    client.ticket("res-1", "long", "Resume me.");
    while (client.tickets["res-1"].last_seq < 5) ASSERT_TRUE(client.pump());
    before = client.tickets["res-1"].text;
    last_seq = client.tickets["res-1"].last_seq;
    client.abort();  // the connection is lost mid-stream
  }
  TicketClient client(cluster.endpoint(0));
  client.send({{"type", "resume"}, {"ticketID", "res-1"}, {"attempt", 1}, {"afterSeq", last_seq}});
  client.tickets["res-1"].last_seq = last_seq;
  ASSERT_TRUE(client.until_all_ended({"res-1"}));
  const TicketView& v = client.tickets["res-1"];
  EXPECT_EQ(v.problem, "") << "the resumed stream continues at seq " << last_seq + 1;
  ASSERT_EQ(v.terminal["type"], "done") << v.terminal.dump();
  EXPECT_EQ(before + v.text, v.terminal["text"].get<std::string>());
  EXPECT_EQ(v.terminal["stats"]["generatedTokens"], 600);

  client.send({{"type", "resume"}, {"ticketID", "never-sent"}});
  ASSERT_TRUE(client.pump());
  EXPECT_EQ(client.tickets["never-sent"].terminal["code"], "unknown_ticket");
  // A resume after the end replays the rest and the result once more.
  const int64_t final_seq = v.last_seq;
  const size_t seen = v.events.size();
  client.send({{"type", "resume"}, {"ticketID", "res-1"}, {"attempt", 1}, {"afterSeq", final_seq - 1}});
  ASSERT_TRUE(client.pump());
  ASSERT_TRUE(client.pump());
  const std::vector<json>& events = client.tickets["res-1"].events;
  ASSERT_EQ(events.size(), seen + 2);
  EXPECT_EQ(events[seen]["type"], "token");
  EXPECT_EQ(events[seen]["seq"], final_seq);
  EXPECT_EQ(events[seen + 1], v.terminal);
}

// Prefix-aware placement: with both nodes idle, a ticket goes to the node
// whose KV checkpoints hold its prompt, although the other has been idle
// longer and would be chosen otherwise (as the control ticket shows).
TEST(Cluster, TicketGoesToTheNodeHoldingItsPromptPrefix) {
  Cluster cluster(2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.start(i, {"--kv-dir", cluster.dir().file("kv-" + Cluster::name(i))}));
  ASSERT_TRUE(cluster.wait_links(0, 1));
  // Long enough to be saved as a checkpoint when its job ends (512 tokens).
  auto long_text = [](const std::string& topic) {
    std::string text;
    for (int i = 1; i <= 120; ++i) text += "The " + topic + " number " + std::to_string(i) + " bends. ";
    return text;
  };
  const std::string text = long_text("river");
  {
    TicketClient b(cluster.endpoint(1));  // pinned to b: forwardedBy
    b.become_peer();
    b.send({{"type", "ticket"}, {"ticketID", "warm"}, {"taskType", "work"}, {"args", {{"text", text}}}, {"forwardedBy", "test"}});
    ASSERT_TRUE(b.until_all_ended({"warm"}));
    ASSERT_EQ(b.tickets["warm"].terminal["type"], "done") << b.tickets["warm"].terminal.dump();
    ASSERT_GE(b.tickets["warm"].terminal["stats"]["promptTokens"].get<int>(), 512);
  }
  // a hears of b's checkpoint with b's next state.
  bool published = false;
  for (int i = 0; i < 500 && !published; ++i) {
    const json view = http_json(cluster.endpoint(0), "/v1/revis/cluster");
    for (const json& n : view["nodes"])
      published = published || (n["name"] == "b" && n.contains("kvPrefixes") && n["kvPrefixes"].contains("small") &&
                                !n["kvPrefixes"]["small"].empty());
    if (!published) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(published) << "b publishes the prefixes of its checkpoint";

  TicketClient client(cluster.endpoint(0));
  client.ticket("same", "work", text, false);
  ASSERT_TRUE(client.until_all_ended({"same"}));
  const json same = client.tickets["same"].terminal;
  ASSERT_EQ(same["type"], "done") << same.dump();
  EXPECT_EQ(same["stats"]["node"], "b") << "b holds the prompt's prefix";
  EXPECT_GE(same["stats"]["cachedTokens"].get<int>(), 512) << same.dump();

  client.ticket("other", "work", long_text("mountain"), false);
  ASSERT_TRUE(client.until_all_ended({"other"}));
  EXPECT_EQ(client.tickets["other"].terminal["stats"]["node"], "a") << "no prefix anywhere: the node idle longest";
}

// A forwarded ticket starts at once or not at all: the sender chose this
// node from a state that may be stale, and keeps the ticket in its own line.
TEST(Cluster, ForwardedTicketToABusyNodeIsRefusedAsBusy) {
  Cluster cluster(1);
  ASSERT_TRUE(cluster.start(0));
  testing::Blocker busy(cluster.endpoint(0));
  TicketClient client(cluster.endpoint(0));
  client.become_peer();
  client.send({{"type", "ticket"}, {"ticketID", "late"}, {"taskType", "work"}, {"args", {{"text", "Me too."}}}, {"forwardedBy", "test"}});
  ASSERT_TRUE(client.until_all_ended({"late"}));
  const json& refusal = client.tickets["late"].terminal;
  EXPECT_EQ(refusal["code"], "queue_full") << refusal.dump();
  EXPECT_NE(refusal["message"].get<std::string>().find("busy"), std::string::npos) << refusal.dump();
  EXPECT_TRUE(busy.release()) << "the running ticket is untouched";
  EXPECT_EQ(cluster.logs(0).find("ran ticket late "), std::string::npos);
}

// The most of `runs` that overlapped in time.
int most_at_once(const std::vector<LoggedRun>& runs) {
  int most = 0;
  for (const LoggedRun& r : runs) {
    int at_once = 0;
    for (const LoggedRun& other : runs) at_once += other.started_ms <= r.started_ms && r.started_ms < other.finished_ms;
    most = std::max(most, at_once);
  }
  return most;
}

// 3N tickets to a node with N slots: each ends once, with what a one-slot
// node gives it, and the node ran several at a time, never more than N.
TEST(Cluster, ANodeWithSlotsGivesEachTicketWhatOneSlotGives) {
  const std::vector<std::string> tickets = ids("n-", 9);
  std::map<std::string, json> by_slots[2];
  for (int slots : {1, 3}) {
    Cluster cluster(1, {"--parallel", std::to_string(slots)});
    ASSERT_TRUE(cluster.start(0));
    const json status = http_json(cluster.endpoint(0), "/v1/revis/status");
    EXPECT_EQ(status["slots"]["total"], slots) << status.dump();
    TicketClient client(cluster.endpoint(0));
    for (const std::string& id : tickets) client.ticket(id, "work", "Ticket " + id + " has " + id + " to say.");
    ASSERT_TRUE(client.until_all_ended(tickets));
    expect_all_done_once(client, tickets);
    for (const std::string& id : tickets) by_slots[slots == 3][id] = client.tickets[id].terminal;
    const std::vector<LoggedRun> runs = testing::runs_in_log(cluster.logs(0));
    EXPECT_EQ(runs.size(), tickets.size()) << "nothing ran twice";
    if (slots == 1) expect_one_at_a_time("a", runs);
    else EXPECT_GE(most_at_once(runs), 2) << "the slots never shared a forward pass";
    EXPECT_LE(most_at_once(runs), slots);
  }
  for (const std::string& id : tickets) {
    EXPECT_EQ(by_slots[1][id]["text"], by_slots[0][id]["text"]) << id;
    EXPECT_EQ(by_slots[1][id]["stats"]["generatedTokens"], by_slots[0][id]["stats"]["generatedTokens"]) << id;
    EXPECT_EQ(by_slots[1][id]["stats"]["promptTokens"], by_slots[0][id]["stats"]["promptTokens"]) << id;
  }
}

// A peer killed while it runs a batch: each of its tickets runs again
// elsewhere, once, and every ticket ends once.
TEST(Cluster, PeerKilledMidBatchItsTicketsRunElsewhereOnce) {
  Cluster cluster(2, {"--parallel", "3"});
  ASSERT_TRUE(cluster.start_all());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.wait_links(i, 1));
  TicketClient client(cluster.endpoint(0));
  const std::vector<std::string> tickets = ids("kb-", 9);
  for (const std::string& id : tickets) client.ticket(id, "long", "Ticket " + id);

  // Wait until node b is generating two of them at once, then kill it outright.
  std::set<std::string> victims;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (victims.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    victims.clear();
    const json s = http_json(cluster.endpoint(1), "/v1/revis/status");
    for (const json& job : s["running"])
      if (job["generated"].get<int>() > 2) victims.insert(job["label"].get<std::string>());
    if (victims.size() < 2) std::this_thread::sleep_for(5ms);
  }
  ASSERT_GE(victims.size(), 2u) << "node b never ran two tickets at once";
  cluster.node(1).signal(SIGKILL);

  ASSERT_TRUE(client.until_all_ended(tickets)) << cluster.node(0).log();
  expect_all_done_once(client, tickets);
  for (const std::string& victim : victims) {
    const TicketView& v = client.tickets[victim];
    bool retried = false;
    for (const json& e : v.events) retried = retried || (e["type"] == "retry" && e["attempt"] == 2);
    EXPECT_TRUE(retried) << "the client heard that " << victim << " ran again";
    EXPECT_EQ(v.terminal["stats"]["node"], "a") << victim;
  }
  for (const std::string& id : tickets) EXPECT_LE(client.tickets[id].attempt, 2) << id;
  const std::vector<LoggedRun> runs = testing::runs_in_log(cluster.logs(0));
  EXPECT_LE(most_at_once(runs), 3);
  std::set<std::string> ran_on_a;
  for (const LoggedRun& r : runs) EXPECT_TRUE(ran_on_a.insert(r.ticket).second) << r.ticket << " ran twice on a";
}

TEST(Demo, RunsABatchAcrossTwoLocalNodes) {
  testing::TempDir tmp;
  auto r = testing::run_revis("demo -n 4 --tickets 8 --exit --cache-dir " + testing::shell_quote(tmp.path().string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t where = r.err.find("where the 8 tickets ran:");
  ASSERT_NE(where, std::string::npos) << r.err;
  const std::string line = r.err.substr(where, r.err.find('\n', where) - where);
  EXPECT_NE(line.find("demo-1"), std::string::npos) << line;
  EXPECT_NE(line.find("demo-2"), std::string::npos) << "both nodes ran tickets: " << line;
  EXPECT_NE(r.err.find("cluster seen from demo-1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace revis
