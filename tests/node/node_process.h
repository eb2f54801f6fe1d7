// Starts a real `revis serve` (REVIS_BINARY) on a free loopback port for
// integration tests, and always stops it: SIGTERM, then SIGKILL if it has
// not exited within the time given. Its log goes to a file the test can read.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "support/testdata.h"

namespace revis::testing {

class NodeProcess {
 public:
  // `args` follow "revis serve"; "--port 0" is added so the kernel picks a
  // free port, which is read back from the log. A fixed `port` is for a node
  // that restarts where its predecessor was. `max_files` > 0 sets the
  // node's descriptor limit (soft and hard), as `ulimit -n` would.
  explicit NodeProcess(std::vector<std::string> args, int port = 0, rlim_t max_files = 0) {
    log_path_ = dir_.file("serve.log");
    args.insert(args.begin(), {REVIS_BINARY, "serve"});
    args.push_back("--port");
    args.push_back(std::to_string(port));
    std::fflush(nullptr);  // or the child would write the parent's buffered output again
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::freopen(log_path_.c_str(), "w", stderr);
      if (!log || !std::freopen("/dev/null", "w", stdout)) _exit(127);
      const rlimit files{max_files, max_files};
      if (max_files > 0 && setrlimit(RLIMIT_NOFILE, &files) != 0) _exit(127);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~NodeProcess() { stop(std::chrono::seconds(10)); }
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  // Waits (bounded) for the listening line and a healthy /health.
  bool wait_ready(std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    const std::string listening = "listening on http://127.0.0.1:";
    while (std::chrono::steady_clock::now() < deadline) {
      if (exited()) return false;
      const std::string text = log();
      if (const size_t at = text.find(listening); port_ == 0 && at != std::string::npos)
        port_ = std::atoi(text.c_str() + at + listening.size());
      if (port_ != 0) {
        auto r = node::http_request(endpoint(), "GET", "/health", "", {}, 2000);
        if (r.ok() && r->status == 200) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  node::HostPort endpoint() const { return {"127.0.0.1", port_}; }
  // /v1/revis/status, or an empty object when the node does not answer.
  nlohmann::json status() const {
    auto r = node::http_request(endpoint(), "GET", "/v1/revis/status", "", {}, 5000);
    return r.ok() && r->status == 200 ? nlohmann::json::parse(r->body) : nlohmann::json::object();
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Resident memory in KiB (VmRSS), or -1.
  long rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
  }

  void signal(int sig) {
    if (pid_ > 0 && !reaped_) kill(pid_, sig);
  }

  // Waits (bounded) for the process to exit; its exit status, or -1 if it
  // is still running or died by a signal.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!exited() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return reaped_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

  // SIGTERM, then SIGKILL after `grace`; returns the exit status (-1 if killed).
  int stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return -1;
    signal(SIGTERM);
    int code = wait_exit(grace);
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
      code = -1;
    }
    return code;
  }

 private:
  bool exited() {
    if (reaped_) return true;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    return reaped_;
  }

  TempDir dir_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = 0;
  bool reaped_ = false;
};

}  // namespace revis::testing
