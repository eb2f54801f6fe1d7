#include "cli/progress_line.h"

#include <unistd.h>

#include <cstdio>

namespace revis::cli {
namespace {

constexpr auto kLogPeriod = std::chrono::seconds(5);

}  // namespace

std::string duration_text(double seconds) {
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds) / 3600, static_cast<int>(seconds) / 60 % 60);
  }
  return buf;
}

ProgressLine::ProgressLine(std::string verb) : verb_(std::move(verb)), tty_(isatty(STDERR_FILENO) == 1) {}

void ProgressLine::update(size_t done, size_t total, const std::string& item) {
  if (finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total;
  if (!tty_ && !last && done > 0 && now - last_print_ < kLogPeriod) return;
  last_print_ = now;
  finished_ = last;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double percent = total > 0 ? 100.0 * done / total : 100.0;
  std::string eta = last ? "in " + duration_text(elapsed) : "ETA ?";
  if (!last && done > 0) eta = "ETA " + duration_text(elapsed * (total - done) / done);
  char line[256];
  std::snprintf(line, sizeof line, "%s [%zu/%zu] %3.0f%% %s %.40s", verb_.c_str(), done, total, percent, eta.c_str(),
                last ? "done" : item.c_str());
  // \033[K clears what a longer previous line left behind.
  std::fprintf(stderr, tty_ ? "\r%s\033[K%s" : "%s%s", line, tty_ && !last ? "" : "\n");
  std::fflush(stderr);
}

void show_prefill_progress(GenerateOptions& options, ProgressLine& line, int prompt_tokens, int cached) {
  const int todo = prompt_tokens - cached;
  if (todo < 2 * options.prefill_chunk) return;
  options.on_progress = [&line, cached, todo](int n_prompt_done, int n_generated) {
    if (n_generated == 0) line.update(static_cast<size_t>(n_prompt_done - cached), static_cast<size_t>(todo), "tokens");
  };
}

}  // namespace revis::cli
