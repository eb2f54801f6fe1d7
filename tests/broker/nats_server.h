// A real `nats-server -js` for the broker tests: on a free loopback port,
// with its JetStream store in a temporary directory, started, stopped
// (SIGTERM or SIGKILL) and restarted on the same port and store. Tests call
// REVIS_REQUIRE_NATS_SERVER() first: without the nats-server binary (CI
// installs it: scripts/install-deps.sh) they are skipped, saying why.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fabric/cluster.h"
#include "support/testdata.h"

namespace revis::testing {

// The nats-server binary: on PATH, or where Debian puts it (/usr/sbin,
// which a non-root PATH often lacks); "" when there is none.
inline std::string nats_server_binary() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream in(path);
    for (std::string d; std::getline(in, d, ':');) dirs.push_back(d);
  }
  dirs.insert(dirs.end(), {"/usr/sbin", "/usr/local/sbin", "/usr/bin"});
  for (const std::string& d : dirs)
    if (const auto p = std::filesystem::path(d) / "nats-server"; access(p.c_str(), X_OK) == 0) return p.string();
  return "";
}

#define REVIS_REQUIRE_NATS_SERVER()                                                                     \
  do {                                                                                                  \
    if (::revis::testing::nats_server_binary().empty())                                                 \
      GTEST_SKIP() << "nats-server is not installed (apt-get install nats-server; scripts/install-deps.sh)"; \
  } while (0)

class NatsServer {
 public:
  // `extra`: more flags (cluster routes); `port` 0 picks a free one.
  explicit NatsServer(std::vector<std::string> extra = {}, int port = 0)
      : port_(port ? port : free_port()), extra_(std::move(extra)) {
    start();
  }
  ~NatsServer() { stop(SIGTERM); }
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  std::string store_dir() const { return dir_.file("js"); }

  // Starts the process and waits (bounded) until it accepts clients.
  bool start() {
    ++starts_;
    const std::string log = dir_.file("nats-" + std::to_string(starts_) + ".log");
    std::vector<std::string> args = {nats_server_binary(), "-js", "-a", "127.0.0.1", "-p", std::to_string(port_),
                                     "-sd", store_dir(), "-l", log};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) _exit(127);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      if (ss.str().find("Server is ready") != std::string::npos) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // SIGTERM (a clean shutdown) or SIGKILL; waits for the process.
  void stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  bool restart() {
    stop(SIGTERM);
    return start();
  }

 private:
  TempDir dir_;
  int port_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
  int starts_ = 0;
};

}  // namespace revis::testing
