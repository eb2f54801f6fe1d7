// Real `revis serve` nodes on loopback ports that know each other as peers,
// for the fabric's integration tests; and a ticket client that records
// every event per ticket and checks the stream rules as they arrive.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "net/client.h"
#include "node/node_process.h"
#include "support/testdata.h"

namespace revis::testing {

using nlohmann::json;

// Tasks for the cluster tests; greedy decoding, so this random model never
// stops early and each ticket's length is its max_tokens.
inline const char* kClusterTasks = R"(
[tasks.work]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 48

[tasks.long]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 600

[tasks.hold]                 # runs until the context is full: keeps a node busy
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 1048576

[tasks.bigwork]
tier = "large"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 48
)";

// A port nothing listens on now (the kernel's pick), for a node that must
// keep its address across a restart or be named as a peer before it starts.
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

inline json http_json(const node::HostPort& node, const std::string& target) {
  auto r = node::http_request(node, "GET", target, "", {}, 10000);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return json::parse(r->body);
}

// One entry per job a node ran to the end, from its log ("ran ticket ...").
struct LoggedRun {
  std::string ticket;
  double started_ms = 0, finished_ms = 0;
};

inline std::vector<LoggedRun> runs_in_log(const std::string& log) {
  static const std::regex line(R"(ran ticket (\S+) exec \d+ from ([0-9.]+) ms to ([0-9.]+) ms)");
  std::vector<LoggedRun> runs;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    runs.push_back({(*it)[1].str(), std::stod((*it)[2].str()), std::stod((*it)[3].str())});
  return runs;
}

// One inference per machine: each node's runs, in start order, never overlap.
inline void expect_one_at_a_time(const std::string& node, std::vector<LoggedRun> runs) {
  std::sort(runs.begin(), runs.end(), [](const LoggedRun& a, const LoggedRun& b) { return a.started_ms < b.started_ms; });
  for (size_t i = 1; i < runs.size(); ++i)
    EXPECT_GE(runs[i].started_ms, runs[i - 1].finished_ms)
        << "node " << node << " ran " << runs[i].ticket << " while " << runs[i - 1].ticket << " was running";
}

// How the nodes of a Cluster come to know each other.
enum class Peering {
  kNamed,  // each names all the others with --peer
  kFound,  // none names any: they find each other on their own (--discover)
};

// N nodes on the same model and catalogue, each a peer of all the others.
class Cluster {
 public:
  explicit Cluster(int n, std::vector<std::string> extra = {}, Peering peering = Peering::kNamed)
      : extra_(std::move(extra)), peering_(peering) {
    std::ofstream(dir_.file("tasks.toml")) << kClusterTasks;
    for (int i = 0; i < n; ++i) ports_.push_back(free_port());
    nodes_.resize(n);
    retired_.resize(n);
  }

  static std::string name(int i) { return std::string(1, static_cast<char>('a' + i)); }
  int size() const { return static_cast<int>(ports_.size()); }
  NodeProcess& node(int i) { return *nodes_[i]; }
  node::HostPort endpoint(int i) const { return {"127.0.0.1", ports_[i]}; }
  std::string address(int i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  const TempDir& dir() const { return dir_; }

  // `more` may name its own --catalog instead of the shared one,
  // --tier NAME=PATH instead of the model for every tier, and --parallel
  // (one slot unless the cluster's or the node's arguments say).
  std::vector<std::string> args(int i, const std::vector<std::string>& more = {}) const {
    std::vector<std::string> a = {"-t", "1", "--name", name(i), "--heartbeat-ms", "500"};
    auto names = [&](const char* flag) {
      return std::find(more.begin(), more.end(), flag) != more.end() ||
             std::find(extra_.begin(), extra_.end(), flag) != extra_.end();
    };
    if (!names("--parallel")) a.insert(a.end(), {"--parallel", "1"});
    if (std::find(more.begin(), more.end(), "--tier") == more.end())
      a.insert(a.end(), {"-m", testdata("models/qwen2-Q8_0.gguf").string()});
    if (std::find(more.begin(), more.end(), "--catalog") == more.end()) a.insert(a.end(), {"--catalog", dir_.file("tasks.toml")});
    for (int j = 0; j < size() && peering_ == Peering::kNamed; ++j)
      if (j != i) a.insert(a.end(), {"--peer", address(j)});
    a.insert(a.end(), extra_.begin(), extra_.end());
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  // Starts node i (again: the one before is kept, stopped, for its log).
  bool start(int i, const std::vector<std::string>& more = {}) {
    if (nodes_[i]) retired_[i].push_back(std::move(nodes_[i]));
    nodes_[i] = std::make_unique<NodeProcess>(args(i, more), ports_[i]);
    return nodes_[i]->wait_ready();
  }

  bool start_all() {
    for (int i = 0; i < size(); ++i)
      if (!start(i)) return false;
    return true;
  }

  // Waits until node i sees `peers` peers with their links up and state known.
  bool wait_links(int i, int peers, std::chrono::seconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int up = 0;
      const json view = http_json(endpoint(i), "/v1/revis/cluster");
      for (const json& n : view["nodes"])
        up += n["link"] == "up" && n["name"].is_string();  // peers only: the node itself is "self"
      if (up >= peers) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Every log of node i, the earlier processes' first.
  std::string logs(int i) const {
    std::string all;
    for (const auto& r : retired_[i]) all += r->log();
    return all + nodes_[i]->log();
  }

 private:
  TempDir dir_;
  std::vector<std::string> extra_;
  Peering peering_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<NodeProcess>> nodes_;
  std::vector<std::vector<std::unique_ptr<NodeProcess>>> retired_;
};

// What one ticket's client saw.
struct TicketView {
  std::vector<json> events;
  int terminals = 0;
  json terminal;
  std::string text;  // streamed text of the current attempt
  int attempt = 1;
  int64_t last_seq = -1;
  std::string problem;  // a broken stream rule, if any
};

// A WebSocket connection to a node that files every event under its
// ticket and checks: seq counts up from 0 and restarts after `retry`;
// nothing follows the terminal event.
class TicketClient {
 public:
  explicit TicketClient(const node::HostPort& node, const std::string& token = "") {
    auto c = node::WsClient::connect(node, "/v1/revis/stream", token, 10000);
    if (!c.ok()) throw std::runtime_error(c.status().message());
    ws_ = std::move(*c);
  }

  void send(const json& message) {
    if (Status s = ws_->send(message.dump()); !s.ok()) throw std::runtime_error("send: " + s.message());
  }
  void ticket(const std::string& id, const std::string& task, const std::string& text, bool streaming = true) {
    send({{"type", "ticket"}, {"ticketID", id}, {"taskType", task}, {"isStreaming", streaming}, {"args", {{"text", text}}}});
  }

  // Reads one event and files it; false on a closed connection or timeout.
  bool pump(int timeout_ms = 60000) {
    auto m = ws_->receive(timeout_ms);
    if (!m.ok()) return false;
    json e = json::parse(*m);
    if (!e["ticketID"].is_string()) {
      unattributed.push_back(e);
      return true;
    }
    TicketView& v = tickets[e["ticketID"].get<std::string>()];
    v.events.push_back(e);
    const std::string type = e["type"];
    if (v.terminals > 0) v.problem = "an event after the terminal one: " + e.dump();
    if (type == "token") {
      if (e["seq"].get<int64_t>() != v.last_seq + 1) v.problem = "seq " + e["seq"].dump() + " after " + std::to_string(v.last_seq);
      v.last_seq = e["seq"].get<int64_t>();
      v.text += e["text"].get<std::string>();
    } else if (type == "retry") {
      v.attempt = e["attempt"].get<int>();
      v.last_seq = -1;
      v.text.clear();
    } else if (type == "done" || type == "error") {
      ++v.terminals;
      v.terminal = e;
    }
    return true;
  }

  // Pumps until every ticket in `ids` has ended.
  bool until_all_ended(const std::vector<std::string>& ids, int timeout_ms = 120000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto pending = [&] {
      for (const auto& id : ids)
        if (tickets[id].terminals == 0) return true;
      return false;
    };
    while (pending()) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0 || !pump(left)) return false;
    }
    return true;
  }

  void abort() { ws_->abort(); }

  // Subscribes as a peer does (and reads the first state event): only then
  // may this connection send tickets with forwardedBy.
  void become_peer() {
    send({{"type", "subscribe"}, {"node", "test"}});
    const size_t before = unattributed.size();
    while (unattributed.size() == before && pump(10000)) {
    }
  }

  std::map<std::string, TicketView> tickets;
  std::vector<json> unattributed;

 private:
  std::unique_ptr<node::WsClient> ws_;
};

// Keeps one node busy with a ticket pinned there (forwardedBy: a node runs
// such a ticket itself, never elsewhere) until released.
class Blocker {
 public:
  explicit Blocker(const node::HostPort& node) : client_(node) {
    client_.become_peer();
    client_.send({{"type", "ticket"},
                  {"ticketID", "hold"},
                  {"taskType", "hold"},
                  {"isStreaming", true},
                  {"args", {{"text", "Hold this node."}}},
                  {"forwardedBy", "test"}});
    while (client_.tickets["hold"].last_seq < 0 && client_.tickets["hold"].terminals == 0 && client_.pump()) {
    }
  }
  // Cancels the ticket; true when it was still running, so the node was
  // busy all along.
  bool release() {
    client_.send({{"type", "cancel"}, {"ticketID", "hold"}});
    return client_.until_all_ended({"hold"}, 30000) && client_.tickets["hold"].terminal["code"] == "cancelled";
  }

 private:
  TicketClient client_;
};

}  // namespace revis::testing
