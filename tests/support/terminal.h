// Runs the revis binary (REVIS_BINARY) on a pseudo-terminal, as a user at a
// terminal would: keys go in through the master side, everything the
// program prints (stdout and stderr both) comes back from it, and the
// terminal's line discipline turns Ctrl-C into SIGINT as a real one does.
//
// Thread-safety: one thread.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace revis::testing {

class Terminal {
 public:
  // `args` follow the binary's path; `env` is set (NAME, value) in the
  // child. 250 columns: prompts and messages do not wrap.
  explicit Terminal(const std::vector<std::string>& args,
                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
    winsize size{};
    size.ws_row = 50;
    size.ws_col = 250;
    pid_ = forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      std::vector<std::string> all = {REVIS_BINARY};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(REVIS_BINARY, argv.data());
      _exit(127);
    }
    fcntl(master_, F_SETFL, O_NONBLOCK);
  }

  ~Terminal() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Keys while the program does not read the terminal itself (Ctrl-C
  // during a reply): the terminal is in its cooked mode.
  void type(const std::string& keys) { ASSERT_EQ(write(master_, keys.data(), keys.size()), ssize_t(keys.size())); }
  // Keys at a prompt, once the line editor reads them one by one, as a
  // person would type them. Typed earlier, while the terminal is still in
  // canonical mode, the line discipline would take Ctrl-D as an end of file
  // that is lost when libedit switches the terminal to raw mode. (The
  // master side of a pty reports the terminal's modes.)
  void type_at_prompt(const std::string& keys) {
#ifdef REVIS_HAVE_LIBEDIT
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    termios modes{};
    while (tcgetattr(master_, &modes) == 0 && (modes.c_lflag & ICANON) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
#endif
    type(keys);
  }

  // Reads the terminal until `done(output)` holds; false after `limit`.
  template <typename Done>
  bool wait_until(Done done, std::chrono::milliseconds limit = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        const ssize_t n = read(master_, buf, sizeof buf);
        if (n > 0) out_.append(buf, static_cast<size_t>(n));
      }
      if (done(out_)) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
    }
  }
  // Waits for `text` to appear after offset `from` of the output.
  bool wait_for(const std::string& text, size_t from = 0,
                std::chrono::milliseconds limit = std::chrono::seconds(120)) {
    return wait_until([&](const std::string& out) { return out.find(text, from) != std::string::npos; }, limit);
  }
  const std::string& output() const { return out_; }

  // The exit status (128 for a signal), reading the output meanwhile so
  // that the child never blocks on it; -1 after `limit`.
  int wait_exit(std::chrono::seconds limit = std::chrono::seconds(30)) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      wait_until([](const std::string&) { return false; }, 20ms);
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        wait_until([](const std::string&) { return false; }, 50ms);  // what it printed last
        return exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      }
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  int exit_code_ = -1;
  std::string out_;
};

}  // namespace revis::testing
