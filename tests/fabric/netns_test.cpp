// A network cut, not a crash: node b runs in its own network namespace,
// joined to node a's by a veth pair; the test takes the link down while b
// is generating a ticket a gave it. Nothing closes the TCP connection, so
// only a's heartbeat can tell; the ticket must then run on a, once.
//
// Needs root and network namespaces (ip netns). Where they are not
// permitted (an unprivileged container), the test is skipped and says why.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric/cluster.h"
#include "support/run_command.h"

namespace revis {
namespace {

using testing::json;
using testing::run_quiet;
using testing::TicketClient;
using namespace std::chrono_literals;

// The namespace, the veth pair and their addresses; removed at the end.
class VethPair {
 public:
  VethPair() {
    const int id = static_cast<int>(getpid() % 100000);
    ns_ = "revis-b" + std::to_string(id);
    outer_ = "rva" + std::to_string(id);
    inner_ = "rvb" + std::to_string(id);
    const std::string net = "10.213." + std::to_string(id % 250 + 1) + ".";
    outer_ip_ = net + "1";
    inner_ip_ = net + "2";
  }
  // Empty on success, else why not.
  std::string create() {
    if (geteuid() != 0) return "not root: network namespaces need root";
    if (run_quiet("ip netns add " + ns_) != 0) return "`ip netns add` failed: network namespaces are not permitted here";
    created_ = true;
    const std::vector<std::string> steps = {
        "ip link add " + outer_ + " type veth peer name " + inner_,
        "ip link set " + inner_ + " netns " + ns_,
        "ip addr add " + outer_ip_ + "/24 dev " + outer_,
        "ip link set " + outer_ + " up",
        "ip netns exec " + ns_ + " ip addr add " + inner_ip_ + "/24 dev " + inner_,
        "ip netns exec " + ns_ + " ip link set " + inner_ + " up",
        "ip netns exec " + ns_ + " ip link set lo up",
    };
    for (const std::string& step : steps)
      if (run_quiet(step) != 0) return "`" + step + "` failed: veth pairs are not permitted here";
    return "";
  }
  ~VethPair() {
    if (!created_) return;
    run_quiet("ip link del " + outer_);
    run_quiet("ip netns del " + ns_);
  }
  // b's side of the wire, as if its network stopped.
  bool set_up(bool up) { return run_quiet("ip netns exec " + ns_ + " ip link set " + inner_ + (up ? " up" : " down")) == 0; }
  const std::string& ns() const { return ns_; }
  const std::string& outer_ip() const { return outer_ip_; }
  const std::string& inner_ip() const { return inner_ip_; }

 private:
  std::string ns_, outer_, inner_, outer_ip_, inner_ip_;
  bool created_ = false;
};

// `revis serve` started in a network namespace (empty: this one), listening
// on a non-loopback address; killed at the end.
class NamespacedNode {
 public:
  NamespacedNode(const std::string& ns, std::vector<std::string> args) {
    log_ = dir_.file("serve.log");
    args.insert(args.begin(), {REVIS_BINARY, "serve"});
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      if (!ns.empty()) {
        const int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(126);
      }
      if (!std::freopen(log_.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout)) _exit(127);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~NamespacedNode() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  testing::TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
};

std::vector<std::pair<std::string, std::string>> auth(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

json get(const node::HostPort& node, const std::string& target, const std::string& token) {
  auto r = node::http_request(node, "GET", target, "", auth(token), 3000);
  if (!r.ok() || r->status != 200) return json();
  return json::parse(r->body, nullptr, false);
}

// Polls node `at`'s cluster view until its peer's link is `link` ("up", "down").
bool wait_link(const node::HostPort& at, const std::string& token, const std::string& link, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    json view = get(at, "/v1/revis/cluster", token);
    if (view.is_object())
      for (const json& n : view["nodes"])
        if (!n["self"].get<bool>() && n["link"] == link && (link != "up" || n["name"].is_string())) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

TEST(NetworkCut, HeartbeatNoticesAndTheTicketRunsOnce) {
  VethPair veth;
  if (const std::string why = veth.create(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  testing::TempDir dir;
  std::ofstream(dir.file("tasks.toml")) << testing::kClusterTasks;
  const std::string token = "fabric-test";
  const int port_a = testing::free_port(), port_b = testing::free_port();
  // a listens everywhere: b reaches it over the veth pair, the test over
  // loopback, which no cut touches.
  const node::HostPort a{"127.0.0.1", port_a}, b{veth.inner_ip(), port_b};
  auto args = [&](const char* name, const std::string& host, int port, const std::string& peer) {
    // One slot each: node a must hand tickets to b.
    return std::vector<std::string>{"-m", testing::testdata("models/qwen2-Q8_0.gguf").string(), "-t", "1", "-c", "2048",
                                    "--parallel", "1", "--catalog",
                                    dir.file("tasks.toml"), "--name", name, "--host", host, "--port", std::to_string(port),
                                    "--token", token, "--heartbeat-ms", "500", "--peer", peer};
  };
  NamespacedNode node_a("", args("a", "0.0.0.0", port_a, b.host + ":" + std::to_string(port_b)));
  NamespacedNode node_b(veth.ns(), args("b", veth.inner_ip(), port_b, veth.outer_ip() + ":" + std::to_string(port_a)));
  ASSERT_TRUE(wait_link(a, token, "up", 60s)) << node_a.log() << node_b.log();

  TicketClient client(a, token);
  std::vector<std::string> tickets;
  // "hold" tickets run until the 2048-token context is full (0.5-1 s): one must
  // still be running on b when the cut, an `ip` command away, takes effect.
  for (int i = 0; i < 4; ++i) {
    tickets.push_back("cut-" + std::to_string(i));
    client.ticket(tickets.back(), "hold", "Cut " + std::to_string(i));
  }
  std::string victim;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (victim.empty() && std::chrono::steady_clock::now() < deadline) {
    json s = get(b, "/v1/revis/status", token);
    if (s.is_object() && s["current"].is_object() && s["current"]["generated"].get<int>() > 2) victim = s["current"]["label"];
    else std::this_thread::sleep_for(5ms);
  }
  ASSERT_FALSE(victim.empty()) << "node b never ran a ticket\n" << node_a.log();
  ASSERT_TRUE(veth.set_up(false));
  const auto cut = std::chrono::steady_clock::now();

  ASSERT_TRUE(client.until_all_ended(tickets)) << node_a.log();
  for (const std::string& id : tickets) {
    const testing::TicketView& v = client.tickets[id];
    EXPECT_EQ(v.problem, "") << id;
    ASSERT_EQ(v.terminals, 1) << id;
    ASSERT_EQ(v.terminal["type"], "done") << id << ": " << v.terminal.dump();
    EXPECT_EQ(v.text, v.terminal["text"].get<std::string>()) << id;
  }
  const testing::TicketView& v = client.tickets[victim];
  EXPECT_EQ(v.attempt, 2) << "the client heard `retry` for " << victim;
  EXPECT_EQ(v.terminal["stats"]["node"], "a");
  EXPECT_TRUE(wait_link(a, token, "down", 1s)) << "a's view shows the link down";
  std::printf("network cut noticed and every ticket done %.0f ms after the cut\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cut).count());

  ASSERT_TRUE(veth.set_up(true));
  EXPECT_TRUE(wait_link(a, token, "up", 30s)) << "the link comes back by itself\n" << node_a.log();
}

}  // namespace
}  // namespace revis
