// A node run as a service: what a graceful restart (SIGTERM, then a new
// process on the same journal) does to the tickets it had accepted. Real
// `revis serve` processes on the simulated engine.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "fabric/cluster.h"
#include "support/run_command.h"

namespace revis {
namespace {

using testing::json;
using testing::NodeProcess;
using testing::TempDir;
using testing::TicketClient;
using namespace std::chrono_literals;

// work: 16 tokens, at 40 tok/s about 0.4 s a ticket; stream: 256 tokens,
// run as fast as the simulated engine goes.
const char* kTasks = R"(
[tasks.work]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 16

[tasks.stream]
tier = "small"
user = "{{text}}"
required = ["text"]
temperature = 0
max_tokens = 256
)";

std::vector<std::string> sim_node(const TempDir& dir, const std::string& journal, const char* rate = "40") {
  return {"--engine", "sim", "--sim-tokens-per-s", rate, "--catalog", dir.file("tasks.toml"), "--name", "svc",
          "--journal", journal};
}

// Sends the tickets (as `revis batch` does: not streamed), and once the node
// has accepted all, SIGTERM; reads until the node closes the connection.
// None may end `cancelled`: the node does not give up on them.
void send_then_stop(NodeProcess& node, const std::vector<std::string>& tickets) {
  TicketClient client(node.endpoint());
  for (const std::string& id : tickets) client.ticket(id, "work", "Text of " + id, false);
  auto accepted = [&] {
    for (const std::string& id : tickets)
      if (client.tickets[id].events.empty()) return false;
    return true;
  };
  while (!accepted() && client.pump(10000)) {
  }
  ASSERT_TRUE(accepted());
  node.signal(SIGTERM);
  while (client.pump(5000)) {
  }
  for (auto& [id, v] : client.tickets) {
    if (v.terminals) {
      EXPECT_EQ(v.terminal["type"], "done") << id << ": " << v.terminal.dump();
    }
  }
  ASSERT_EQ(node.wait_exit(20s), 0) << node.log();
}

// The client comes back and sends every ticket again with its ID: each gets
// one `done`, and each ran to the end exactly once in `logs` (of every
// process that may have run it).
void resend_each_ran_once(NodeProcess& node, const std::vector<std::string>& tickets, const std::function<std::string()>& logs) {
  TicketClient again(node.endpoint());
  for (const std::string& id : tickets) again.ticket(id, "work", "Text of " + id, false);
  ASSERT_TRUE(again.until_all_ended(tickets, 60000)) << node.log();
  for (const std::string& id : tickets) {
    EXPECT_EQ(again.tickets[id].terminals, 1) << id;
    EXPECT_EQ(again.tickets[id].terminal["type"], "done") << id << ": " << again.tickets[id].terminal.dump();
  }
  std::map<std::string, int> runs;
  for (const auto& r : testing::runs_in_log(logs())) ++runs[r.ticket];
  for (const std::string& id : tickets) EXPECT_EQ(runs[id], 1) << id;
}

std::vector<std::string> ticket_ids(const std::string& prefix, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i));
  return ids;
}

TEST(Service, GracefulRestartKeepsQueuedTicketsUnfinished) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  const std::string journal = dir.file("node.journal");
  NodeProcess first(sim_node(dir, journal));
  ASSERT_TRUE(first.wait_ready()) << first.log();
  // One running, eight queued.
  const std::vector<std::string> tickets = ticket_ids("q-", 9);
  send_then_stop(first, tickets);
  if (HasFatalFailure()) return;

  NodeProcess second(sim_node(dir, journal), first.port());
  ASSERT_TRUE(second.wait_ready()) << second.log();
  const std::string log = second.log();
  EXPECT_EQ(log.find(" 0 unfinished ticket(s) resumed"), std::string::npos) << log;
  resend_each_ran_once(second, tickets, [&] { return first.log() + second.log(); });
}

// Waits until `node` sees a peer with its link up and its state known.
bool wait_peer_link(const NodeProcess& node) {
  for (int i = 0; i < 1000; ++i) {
    const json view = testing::http_json(node.endpoint(), "/v1/revis/cluster");
    for (const json& n : view["nodes"])
      if (n["link"] == "up" && n["name"].is_string()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// With a live peer, SIGTERM hands the tickets not yet started to it: they
// run there while this node is down. After the restart a resend of every
// ID (to this node) gets each result, and each ticket ran once in all.
TEST(Service, ShutdownHandsUnstartedTicketsToALivePeer) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  std::vector<std::string> b_args = sim_node(dir, dir.file("b.journal"));
  b_args.insert(b_args.end(), {"--name", "b", "--heartbeat-ms", "200"});
  NodeProcess b(b_args);
  ASSERT_TRUE(b.wait_ready()) << b.log();
  std::vector<std::string> a_args = sim_node(dir, dir.file("a.journal"));
  a_args.insert(a_args.end(), {"--name", "a", "--peer", "127.0.0.1:" + std::to_string(b.port()), "--heartbeat-ms", "200"});
  NodeProcess a(a_args);
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(wait_peer_link(a)) << a.log();
  const std::vector<std::string> tickets = ticket_ids("h-", 9);
  send_then_stop(a, tickets);
  if (HasFatalFailure()) return;
  const size_t at = a.log().find("shutdown: ");
  const size_t handed = at == std::string::npos ? 0 : std::stoul(a.log().substr(at + 10));
  EXPECT_NE(a.log().find(std::to_string(handed) + " unstarted ticket(s) handed to peers"), std::string::npos) << a.log();
  EXPECT_GE(handed, 5u) << "9 tickets, at most one started on each node at SIGTERM";

  // While `a` is down, `b` runs what it was handed: tickets `a` did not run.
  std::set<std::string> ran_on_a;
  for (const auto& r : testing::runs_in_log(a.log())) ran_on_a.insert(r.ticket);
  const size_t want = std::max<size_t>(handed, 5);
  size_t ran_on_b_only = 0;
  for (int i = 0; i < 1000 && ran_on_b_only < want; ++i) {
    std::this_thread::sleep_for(20ms);
    ran_on_b_only = 0;
    for (const auto& r : testing::runs_in_log(b.log())) ran_on_b_only += !ran_on_a.count(r.ticket);
  }
  EXPECT_GE(ran_on_b_only, want) << b.log();
  std::printf("handed %zu of %zu tickets at SIGTERM; %zu ran on the peer while the node was down\n", handed, tickets.size(),
              ran_on_b_only);

  NodeProcess second(a_args, a.port());
  ASSERT_TRUE(second.wait_ready()) << second.log();
  resend_each_ran_once(second, tickets, [&] { return a.log() + second.log() + b.log(); });
}

// Sends `n` streamed tickets, at most 32 in flight, and reads them to the end.
void run_streamed(TicketClient& client, const std::string& prefix, int first, int n) {
  std::vector<std::string> ids;
  for (int i = first; i < first + n; ++i) ids.push_back(prefix + std::to_string(i));
  for (size_t at = 0; at < ids.size(); at += 32) {
    std::vector<std::string> batch(ids.begin() + at, ids.begin() + std::min(ids.size(), at + 32));
    for (const std::string& id : batch) client.ticket(id, "stream", "Stream " + id, true);
    ASSERT_TRUE(client.until_all_ended(batch, 120000));
    for (const std::string& id : batch) {
      ASSERT_EQ(client.tickets[id].terminal["type"], "done") << client.tickets[id].terminal.dump();
      client.tickets.erase(id);  // the client's own memory stays flat
    }
  }
}

// Finished results are kept up to a cap in count and bytes, oldest dropped
// first. Measured both ways: the kept bytes the node reports in
// /v1/revis/cluster, and its resident memory from ticket 200 to ticket 2000
// (the token events of 1,800 streamed 256-token tickets are about 50 MB).
TEST(Service, KeptResultsStayUnderTheirCap) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  // In the sanitizer build, AddressSanitizer holds freed memory in a
  // quarantine (256 MB by default) before reusing it, which would read as
  // growth here: the node under test runs without one. Other builds ignore
  // the variable.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_before = asan ? asan : "";
  ::setenv("ASAN_OPTIONS", (asan_before + (asan_before.empty() ? "" : ":") + "quarantine_size_mb=0").c_str(), 1);
  NodeProcess node({"--engine", "sim", "--sim-tokens-per-s", "1000000", "--catalog", dir.file("tasks.toml"), "--name",
                    "kept", "--max-kept-results-mb", "2"});
  if (asan) ::setenv("ASAN_OPTIONS", asan_before.c_str(), 1);
  else ::unsetenv("ASAN_OPTIONS");
  ASSERT_TRUE(node.wait_ready()) << node.log();
  TicketClient client(node.endpoint());
  run_streamed(client, "k-", 0, 200);
  const long rss_before = node.rss_kib();
  run_streamed(client, "k-", 200, 1800);
  const long rss_after = node.rss_kib();
  const json kept = testing::http_json(node.endpoint(), "/v1/revis/cluster")["tickets"]["keptResults"];
  std::printf("kept results: %s; RSS %ld -> %ld KiB\n", kept.dump().c_str(), rss_before, rss_after);
  EXPECT_LE(kept["bytes"].get<uint64_t>(), 2u << 20) << kept.dump();
  EXPECT_EQ(kept["maxBytes"], 2u << 20);
  EXPECT_GT(kept["count"].get<int>(), 10) << "some are kept";
  EXPECT_LT(kept["count"].get<int>(), 2000) << "not all";
  EXPECT_LT(rss_after - rss_before, 2 * 1024 + 24 * 1024) << "the cap plus a fixed margin (KiB)";
  // The newest is kept whole: a resume replays its token events.
  client.send({{"type", "resume"}, {"ticketID", "k-1999"}, {"attempt", 1}, {"afterSeq", 249}});
  ASSERT_TRUE(client.until_all_ended({"k-1999"}, 10000));
  const std::vector<json>& replay = client.tickets["k-1999"].events;
  ASSERT_GE(replay.size(), 2u);
  EXPECT_EQ(replay.front()["seq"], 250) << replay.front().dump();
  EXPECT_EQ(replay.back()["type"], "done");
}

// With a journal only the final result stays in RAM, and one dropped from
// RAM is read back from the journal: a resend still gets the stored result.
TEST(Service, ResultsBeyondTheCapAreReadFromTheJournal) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  std::vector<std::string> args = sim_node(dir, dir.file("node.journal"), "100000");
  args.insert(args.end(), {"--max-kept-results", "2"});
  NodeProcess node(args);
  ASSERT_TRUE(node.wait_ready()) << node.log();
  TicketClient client(node.endpoint());
  std::vector<std::string> ids = {"j-0", "j-1", "j-2", "j-3", "j-4"};
  for (const std::string& id : ids) client.ticket(id, "work", "Journal " + id, true);
  ASSERT_TRUE(client.until_all_ended(ids));
  const json first = client.tickets["j-0"].terminal;
  ASSERT_EQ(first["type"], "done") << first.dump();
  EXPECT_EQ(testing::http_json(node.endpoint(), "/v1/revis/cluster")["tickets"]["keptResults"]["count"], 2);

  TicketClient again(node.endpoint());
  again.ticket("j-0", "work", "Journal j-0", true);
  again.send({{"type", "resume"}, {"ticketID", "j-1"}, {"attempt", 1}, {"afterSeq", -1}});
  ASSERT_TRUE(again.until_all_ended({"j-0", "j-1"}, 10000));
  EXPECT_EQ(again.tickets["j-0"].terminal, first) << "the stored result, not a second run";
  EXPECT_EQ(again.tickets["j-1"].terminal, client.tickets["j-1"].terminal);
  std::map<std::string, int> runs;
  for (const auto& r : testing::runs_in_log(node.log())) ++runs[r.ticket];
  EXPECT_EQ(runs["j-0"], 1);
}

// forwardedBy pins a ticket to this node outside dedup and the journal: a
// plain client may not set it, a peer's link (subscribed first) may.
TEST(Service, OnlyAPeerLinkMayForwardTickets) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  NodeProcess node(sim_node(dir, dir.file("node.journal")));
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const json pinned = {{"type", "ticket"}, {"ticketID", "p"}, {"taskType", "work"}, {"args", {{"text", "x"}}}, {"forwardedBy", "me"}};
  TicketClient client(node.endpoint());
  client.send(pinned);
  ASSERT_TRUE(client.until_all_ended({"p"}, 10000));
  EXPECT_EQ(client.tickets["p"].terminal["code"], "bad_request") << client.tickets["p"].terminal.dump();
  TicketClient peer(node.endpoint());
  peer.become_peer();
  peer.send(pinned);
  ASSERT_TRUE(peer.until_all_ended({"p"}, 10000));
  EXPECT_EQ(peer.tickets["p"].terminal["type"], "done") << peer.tickets["p"].terminal.dump();
}

// The token from REVIS_TOKEN or --token-file (not on the command line, where
// `ps` shows it), and the scheme name in any case.
TEST(Service, TokenFromTheEnvironmentOrAFile) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  std::ofstream(dir.file("token")) << "file-token\n";
  auto status = [](const NodeProcess& n, const std::string& auth) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!auth.empty()) headers.emplace_back("Authorization", auth);
    auto r = node::http_request(n.endpoint(), "GET", "/v1/revis/status", "", headers, 5000);
    return r.ok() ? r->status : -1;
  };
  std::vector<std::string> args = sim_node(dir, dir.file("a.journal"));
  args.insert(args.end(), {"--token-file", dir.file("token")});
  NodeProcess from_file(args);
  ASSERT_TRUE(from_file.wait_ready()) << from_file.log();
  EXPECT_EQ(status(from_file, ""), 401);
  EXPECT_EQ(status(from_file, "Bearer wrong"), 401);
  EXPECT_EQ(status(from_file, "bearer file-token"), 200);

  ::setenv("REVIS_TOKEN", "env-token", 1);
  NodeProcess from_env(sim_node(dir, dir.file("b.journal")));
  ::unsetenv("REVIS_TOKEN");
  ASSERT_TRUE(from_env.wait_ready()) << from_env.log();
  EXPECT_EQ(status(from_env, ""), 401);
  EXPECT_EQ(status(from_env, "BEARER env-token"), 200);

  std::vector<std::string> blank = sim_node(dir, dir.file("c.journal"));
  blank.insert(blank.end(), {"--token", " "});
  NodeProcess refused(blank);
  EXPECT_FALSE(refused.wait_ready(10s));
  EXPECT_NE(refused.log().find("token"), std::string::npos) << refused.log();
}

// --log-format json: every line one JSON object with ts, level and msg, the
// access log's with its facts as members; --log-level warn: no info lines.
TEST(Service, JsonLogLinesAndLevels) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  std::vector<std::string> args = sim_node(dir, dir.file("node.journal"));
  args.insert(args.end(), {"--log-format", "json"});
  auto node = std::make_unique<NodeProcess>(args);
  ASSERT_TRUE(node->wait_ready()) << node->log();
  {
    TicketClient client(node->endpoint());
    client.ticket("l-1", "work", "Log me", false);
    ASSERT_TRUE(client.until_all_ended({"l-1"}));
  }
  ASSERT_EQ(node->stop(10s), 0);
  std::istringstream lines(node->log());
  int n = 0;
  bool ran = false, accessed = false;
  for (std::string line; std::getline(lines, line); ++n) {
    const json j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(j["ts"].is_string() && j["level"].is_string() && j["msg"].is_string()) << line;
    ran = ran || j["msg"].get<std::string>().find("ran ticket l-1") != std::string::npos;
    if (j["msg"] == "access" && j.value("ticketID", "") == "l-1") {
      accessed = true;
      EXPECT_EQ(j["method"], "TICKET") << line;
      EXPECT_EQ(j["route"], "/v1/revis/stream") << line;
      EXPECT_EQ(j["status"], "done") << line;
      EXPECT_TRUE(j["bytes"].is_number_unsigned() && j["bytes"].get<uint64_t>() > 0) << line;
      EXPECT_TRUE(j["durationMs"].is_number()) << line;
      EXPECT_EQ(line.find("Log me"), std::string::npos) << "never the ticket's text: " << line;
    }
  }
  EXPECT_GE(n, 3);
  EXPECT_TRUE(ran) << node->log();
  EXPECT_TRUE(accessed) << node->log();

  std::vector<std::string> quiet = sim_node(dir, dir.file("quiet.journal"));
  quiet.insert(quiet.end(), {"--log-level", "warn"});
  const int port = testing::free_port();
  NodeProcess warn_only(quiet, port);
  // No "listening" line to read at this level: /health on the port says it is up.
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    auto r = node::http_request({"127.0.0.1", port}, "GET", "/health", "", {}, 2000);
    up = r.ok() && r->status == 200;
    if (!up) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(up) << warn_only.log();
  EXPECT_EQ(warn_only.stop(10s), 0);
  EXPECT_EQ(warn_only.log().find(" info "), std::string::npos) << warn_only.log();

  std::vector<std::string> bad = sim_node(dir, dir.file("bad.journal"));
  bad.insert(bad.end(), {"--log-level", "loud"});
  NodeProcess refused(bad, testing::free_port());
  EXPECT_FALSE(refused.wait_ready(10s));
  EXPECT_NE(refused.log().find("debug, info, warn or error"), std::string::npos) << refused.log();
}

// The version, the commit and the kernels built in: from --version, and in
// the node's status.
TEST(Service, VersionNamesTheCommitAndTheKernels) {
  auto r = testing::run_revis("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = r.out + r.err;
  EXPECT_NE(out.find("revis 0."), std::string::npos) << out;
  EXPECT_NE(out.find("(commit "), std::string::npos) << out;
  EXPECT_NE(out.find("kernels: scalar"), std::string::npos) << out;

  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  NodeProcess node(sim_node(dir, dir.file("node.journal")));
  ASSERT_TRUE(node.wait_ready()) << node.log();
  const json status = testing::http_json(node.endpoint(), "/v1/revis/status");
  EXPECT_TRUE(status["commit"].is_string()) << status.dump();
  ASSERT_TRUE(status["kernels"]["builtIn"].is_array()) << status.dump();
  EXPECT_EQ(status["kernels"]["builtIn"][0], "scalar");
  EXPECT_NE(out.find(status["commit"].get<std::string>()), std::string::npos);
  EXPECT_NE(out.find("this CPU: " + status["kernels"]["active"].get<std::string>()), std::string::npos) << out;
}

#ifdef REVIS_HAVE_SYSTEMD
// As a Type=notify service: READY=1 once it serves, WATCHDOG=1 at half the
// interval systemd asks for, STOPPING=1 on SIGTERM. The test stands in for
// systemd with its own notification socket.
TEST(Service, TellsSystemdWhenReadyAndStopping) {
  TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << kTasks;
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = dir.file("notify");
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "200000", 1);
  NodeProcess node(sim_node(dir, dir.file("node.journal")));
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(node.wait_ready()) << node.log();
  // Every message until `want` arrives (or 10 s pass).
  std::string heard;
  auto until = [&](const std::string& want) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (heard.find(want) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) != 1) continue;
      char buf[512];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) heard += std::string(buf, size_t(n)) + "\n";
    }
    return heard.find(want) != std::string::npos;
  };
  EXPECT_TRUE(until("READY=1")) << heard;
  heard.clear();
  EXPECT_TRUE(until("WATCHDOG=1")) << "pings go on after READY";
  node.signal(SIGTERM);
  EXPECT_TRUE(until("STOPPING=1")) << heard;
  EXPECT_EQ(node.wait_exit(20s), 0);
  ::close(fd);
}
#endif

}  // namespace
}  // namespace revis
