// Runs the revis binary (REVIS_BINARY) as a child process, for end-to-end
// tests of the command line.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "support/testdata.h"

namespace revis::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command with its output discarded: its exit status, or -1
// when it did not exit normally.
inline int run_quiet(const std::string& command) {
  const int status = std::system(("( " + command + " ) >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `args` is appended to the binary path as is: quote what needs quoting.
// `env` ("NAME=value ...") is set for the command.
inline CommandResult run_revis(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  const std::string out_file = tmp.file("stdout"), err_file = tmp.file("stderr");
  const std::string command = (env.empty() ? "" : "env " + env + " ") + shell_quote(REVIS_BINARY) + " " + args + " >" +
                              shell_quote(out_file) + " 2>" + shell_quote(err_file);
  CommandResult r;
  const int status = std::system(command.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_file);
  r.err = slurp(err_file);
  return r;
}

}  // namespace revis::testing
