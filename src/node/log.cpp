#include "node/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace revis::node {

void log_line(const char* level, const std::string& message) {
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s.%03dZ %-5s %s\n", stamp, ms, level, message.c_str());
  std::fflush(stderr);
}

void log_job_run(const std::string& id, const JobStats& s) {
  char line[256];
  std::snprintf(line, sizeof line, "ran ticket %s exec %llu from %.3f ms to %.3f ms (%d tokens, %.1f tok/s)", id.c_str(),
                static_cast<unsigned long long>(s.exec_index), s.started_ms, s.finished_ms, s.generated_tokens, s.gen_tok_s);
  log_line("info", line);
}

}  // namespace revis::node
