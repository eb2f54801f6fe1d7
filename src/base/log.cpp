#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/json_text.h"
#include "base/mutex.h"

namespace revis {
namespace {

constexpr const char* kLevels[] = {"debug", "info", "warn", "error"};

int level_rank(std::string_view level) {
  for (int i = 0; i < 4; ++i)
    if (level == kLevels[i]) return i;
  return 1;  // an unknown level is logged as info would be
}

std::atomic<int> min_rank{1};
std::atomic<bool> json_lines{false};

}  // namespace

Status set_log_options(std::string_view level, std::string_view format) {
  int rank = -1;
  for (int i = 0; i < 4; ++i)
    if (level == kLevels[i]) rank = i;
  if (rank < 0) return Status::error("log level \"" + std::string(level) + "\" (expected debug, info, warn or error)");
  if (format != "text" && format != "json")
    return Status::error("log format \"" + std::string(format) + "\" (expected text or json)");
  min_rank = rank;
  json_lines = format == "json";
  return {};
}

void log_line(const char* level, const std::string& message) { log_record(level, message, nullptr, nlohmann::json()); }

void log_record(const char* level, const std::string& text, const char* kind, const nlohmann::json& fields) {
  if (level_rank(level) < min_rank.load()) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[40];
  const size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", ms);
  std::string line;
  if (json_lines.load()) {
    nlohmann::json j = {{"ts", stamp}, {"level", level}, {"msg", kind ? kind : text}};
    if (fields.is_object())
      for (const auto& [key, value] : fields.items()) j[key] = value;
    line = json_text(j);
  } else {
    char head[64];
    std::snprintf(head, sizeof head, "%s %-5s ", stamp, level);
    line = head + text;
  }
  static Mutex mutex;  // one line at a time on stderr
  MutexLock lock(mutex);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace revis
