// LAN discovery (revis serve --discover): nodes that name no peers find
// each other through avahi-daemon, dispatch to each other like --peer
// nodes, never send tickets to a node with another catalogue, and forget a
// node whose service is withdrawn and whose link is down.
//
// Needs avahi-daemon. When none is running and the test runs as root (as
// in CI), it starts one, and the system D-Bus it talks through if that is
// not running either, and stops what it started at the end. Otherwise the
// test is skipped and says why. The nodes listen on 127.0.0.1, so they
// advertise on the loopback interface: no multicast network is needed.
//
// A build without avahi-client instead checks that --discover is refused.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fabric/cluster.h"
#include "support/run_command.h"

namespace revis {
namespace {

using testing::Cluster;
using testing::json;
using testing::run_quiet;
using testing::NodeProcess;
using namespace std::chrono_literals;

#ifdef REVIS_HAVE_AVAHI

constexpr const char* kSystemBus = "/run/dbus/system_bus_socket";
constexpr const char* kBusPidFile = "/run/dbus/pid";

bool system_bus_answers() {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", kSystemBus);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

pid_t pid_in(const std::string& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// The system D-Bus and avahi-daemon are the machine's, not a test's: tests
// that start or stop them take turns (ctest runs tests side by side, each
// in its own process, and so may another build tree's run) by holding an
// exclusive lock on one file from the start of the test to its end.
class MachineDaemonsTurn {
 public:
  MachineDaemonsTurn() : fd_(open("/tmp/revis-test-machine-daemons.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~MachineDaemonsTurn() {
    if (fd_ >= 0) close(fd_);
  }
  MachineDaemonsTurn(const MachineDaemonsTurn&) = delete;
  MachineDaemonsTurn& operator=(const MachineDaemonsTurn&) = delete;

 private:
  int fd_;
};

// The avahi-daemon the test talks to: the running one, or one started here
// (with the system D-Bus if need be) and stopped at the end. Constructing
// it waits for the test's turn with the machine's daemons (destroyed last,
// after the daemons it started are gone).
class AvahiDaemon {
 public:
  // Empty when a daemon runs, else why there is none.
  std::string ensure() {
    if (run_quiet("avahi-daemon --check") == 0) return "";
    if (geteuid() != 0) return "no avahi-daemon is running, and starting one (and the system D-Bus) needs root";
    if (run_quiet("command -v avahi-daemon && command -v dbus-daemon") != 0)
      return "avahi-daemon or dbus-daemon is not installed (scripts/install-deps.sh installs both)";
    if (!system_bus_answers()) {
      // A pid file left by a bus that died keeps a new one from starting.
      if (const pid_t old = pid_in(kBusPidFile); old > 0 && kill(old, 0) != 0) unlink(kBusPidFile);
      if (run_quiet("mkdir -p /run/dbus && dbus-daemon --system --fork") != 0) return "`dbus-daemon --system --fork` failed";
      bus_pid_ = pid_in(kBusPidFile);
    }
    // --no-chroot: the chroot needs files a container may lack.
    if (run_quiet("avahi-daemon --no-chroot -D") != 0) return "`avahi-daemon --no-chroot -D` failed";
    started_daemon_ = true;
    for (int i = 0; i < 250 && run_quiet("avahi-daemon --check") != 0; ++i) std::this_thread::sleep_for(20ms);
    return run_quiet("avahi-daemon --check") == 0 ? "" : "avahi-daemon started but does not answer `avahi-daemon --check`";
  }

  // Waits until what it stops is gone, so that the next test finds
  // neither running.
  ~AvahiDaemon() {
    if (started_daemon_) {
      run_quiet("avahi-daemon -k");
      for (int i = 0; i < 250 && run_quiet("avahi-daemon --check") == 0; ++i) std::this_thread::sleep_for(20ms);
    }
    if (bus_pid_ > 0) {
      kill(bus_pid_, SIGTERM);
      for (int i = 0; i < 250 && system_bus_answers(); ++i) std::this_thread::sleep_for(20ms);
      unlink(kBusPidFile);  // dbus-daemon leaves it, and it would keep the next one from starting
    }
  }

 private:
  MachineDaemonsTurn turn_;
  bool started_daemon_ = false;
  pid_t bus_pid_ = 0;
};

// Node `i`'s entry in `at`'s cluster view, or null.
json entry_for(Cluster& cluster, int at, int i) {
  const json view = testing::http_json(cluster.endpoint(at), "/v1/revis/cluster");
  for (const json& n : view["nodes"])
    if (n["address"] == cluster.address(i)) return n;
  return nullptr;
}

// Polls `at`'s view until `ok` holds for node i's entry (null: not listed).
template <typename Ok>
bool wait_entry(Cluster& cluster, int at, int i, Ok ok, std::chrono::seconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok(entry_for(cluster, at, i))) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

bool linked(const json& n) { return n.is_object() && n["link"] == "up" && n["name"].is_string(); }

std::string task(const std::string& name) {
  return "\n[tasks." + name + "]\ntier = \"small\"\nuser = \"{{text}}\"\nrequired = [\"text\"]\n";
}

// A task of this run's own makes the catalogue digest this run's: nodes of
// another run on this machine are then listed but never sent tickets.
std::string own_task() { return task("run_" + std::to_string(getpid())); }

TEST(Discovery, NodesFindEachOtherDispatchAndForget) {
  AvahiDaemon daemon;
  if (const std::string why = daemon.ensure(); !why.empty()) GTEST_SKIP() << why;

  Cluster cluster(3, {"--discover"}, testing::Peering::kFound);
  std::ofstream(cluster.dir().file("tasks.toml")) << testing::kClusterTasks << own_task();
  std::ofstream(cluster.dir().file("other.toml")) << testing::kClusterTasks << own_task() << task("other");
  ASSERT_TRUE(cluster.start(0)) << cluster.logs(0);
  ASSERT_TRUE(cluster.start(1)) << cluster.logs(1);
  ASSERT_TRUE(cluster.start(2, {"--catalog", cluster.dir().file("other.toml")})) << cluster.logs(2);

  ASSERT_TRUE(wait_entry(cluster, 0, 1, linked)) << "a never linked to b\n" << cluster.logs(0);
  const json b = entry_for(cluster, 0, 1);
  EXPECT_EQ(b["name"], "b");
  EXPECT_EQ(b["found"], "mdns");
  EXPECT_EQ(b["catalogMatches"], true);
  ASSERT_TRUE(wait_entry(cluster, 0, 2, linked)) << "a never linked to c\n" << cluster.logs(0);
  const json c = entry_for(cluster, 0, 2);
  EXPECT_EQ(c["found"], "mdns");
  EXPECT_EQ(c["catalogMatches"], false);
  EXPECT_EQ(cluster.logs(0).find("found node a at"), std::string::npos) << "a took its own service for a peer's";
  ASSERT_TRUE(wait_entry(cluster, 1, 0, linked)) << "b never linked to a\n" << cluster.logs(1);

  // a busy: its tickets go to b, the one idle node with a's catalogue, one
  // after the other; never to c, idle all along.
  testing::Blocker hold(cluster.endpoint(0));
  testing::TicketClient client(cluster.endpoint(0));
  client.ticket("t1", "work", "The first ticket.");
  client.ticket("t2", "work", "The second ticket.");
  ASSERT_TRUE(client.until_all_ended({"t1", "t2"}));
  for (const std::string id : {"t1", "t2"}) {
    const json& done = client.tickets[id].terminal;
    ASSERT_EQ(done["type"], "done") << done.dump();
    EXPECT_EQ(done["stats"]["node"], "b") << id << " ran elsewhere: " << done.dump();
  }
  EXPECT_TRUE(hold.release()) << "a was not busy all along";
  EXPECT_TRUE(testing::runs_in_log(cluster.logs(2)).empty()) << cluster.logs(2);

  // b stops: its service is withdrawn and its link drops, so a forgets it.
  EXPECT_EQ(cluster.node(1).stop(10s), 0);
  EXPECT_TRUE(wait_entry(cluster, 0, 1, [](const json& n) { return n.is_null(); }, 15s))
      << "a still lists b\n" << cluster.logs(0);
  EXPECT_NE(cluster.logs(0).find("forgotten: its mDNS service is gone and its link is down"), std::string::npos);
}

// A node started while not even the system D-Bus runs says once that
// discovery is off, and finds its peers once D-Bus and the daemon are up.
TEST(Discovery, ANodeStartedBeforeDbusDiscoversOnceItRuns) {
  if (geteuid() != 0) GTEST_SKIP() << "starting the system D-Bus and avahi-daemon needs root";
  AvahiDaemon daemon;  // not started yet: this only waits for the other tests' daemons to stop
  if (system_bus_answers())
    GTEST_SKIP() << "the system D-Bus runs already, and this test stops only what it started";
  Cluster cluster(2, {"--discover"}, testing::Peering::kFound);
  std::ofstream(cluster.dir().file("tasks.toml")) << testing::kClusterTasks << own_task();
  ASSERT_TRUE(cluster.start(0)) << cluster.logs(0);
  const auto said_off = [&] { return cluster.logs(0).find("mDNS discovery off") != std::string::npos; };
  for (int i = 0; i < 200 && !said_off(); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(said_off()) << cluster.logs(0);

  if (const std::string why = daemon.ensure(); !why.empty()) FAIL() << why;
  ASSERT_TRUE(cluster.start(1)) << cluster.logs(1);
  EXPECT_TRUE(wait_entry(cluster, 0, 1, linked)) << "a never found b\n" << cluster.logs(0);
  EXPECT_TRUE(wait_entry(cluster, 1, 0, linked)) << "b never found a: a did not advertise\n" << cluster.logs(1);
  const std::string log = cluster.logs(0);
  EXPECT_EQ(log.find("mDNS discovery off", log.find("mDNS discovery off") + 1), std::string::npos)
      << "said more than once:\n" << log;
}

#else  // built without avahi-client

TEST(Discovery, RefusedByABuildWithoutAvahi) {
  NodeProcess node({"--engine", "sim", "--discover"});
  EXPECT_EQ(node.wait_exit(30s), 1);
  EXPECT_NE(node.log().find("--discover: this build has no mDNS support (built without avahi-client)"), std::string::npos)
      << node.log();
}

#endif

}  // namespace
}  // namespace revis
