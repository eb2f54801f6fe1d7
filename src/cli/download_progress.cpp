#include "cli/download_progress.h"

#include <unistd.h>

#include <cstdio>

#include "cli/progress_line.h"

namespace revis::cli {
namespace {

constexpr auto kLogPeriod = std::chrono::seconds(5);
constexpr auto kRedrawPeriod = std::chrono::milliseconds(100);
constexpr int kBarWidth = 30;

}  // namespace

DownloadProgress::DownloadProgress() : tty_(isatty(STDERR_FILENO) == 1) {}

void DownloadProgress::update(const std::string& file, uint64_t done, uint64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (file != file_) {
    file_ = file;
    start_ = now;
    start_bytes_ = done;
    last_print_ = {};
    finished_ = false;
  }
  const bool last = total > 0 && done >= total;
  if (finished_) return;
  finished_ = last;
  if (!last && now - last_print_ < (tty_ ? std::chrono::duration_cast<std::chrono::milliseconds>(kRedrawPeriod)
                                         : std::chrono::duration_cast<std::chrono::milliseconds>(kLogPeriod)))
    return;
  last_print_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double speed = seconds > 0 ? (done - start_bytes_) / seconds : 0;
  std::string eta = last ? "in " + duration_text(seconds) : "ETA ?";
  if (!last && total > done && speed > 0) eta = "ETA " + duration_text((total - done) / speed);
  char sizes[96];
  if (total > 0)
    std::snprintf(sizes, sizeof sizes, "%3.0f%% %.1f/%.1f MiB", 100.0 * done / total, done / 1048576.0, total / 1048576.0);
  else
    std::snprintf(sizes, sizeof sizes, "%.1f MiB", done / 1048576.0);
  std::string bar;
  if (tty_ && total > 0) {
    const int filled = static_cast<int>(kBarWidth * done / total);
    bar = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "] ";
  }
  std::fprintf(stderr, tty_ ? "\r%s %s%s %.1f MiB/s %s\033[K%s" : "%s %s%s %.1f MiB/s %s%s", file.c_str(), bar.c_str(), sizes,
               speed / 1048576.0, eta.c_str(), tty_ && !last ? "" : "\n");
  std::fflush(stderr);
}

hub::PullEvents pull_events_on_stderr(DownloadProgress& progress) {
  return {.note = [](const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); },
          .progress = [&progress](const std::string& file, uint64_t done, uint64_t total) { progress.update(file, done, total); }};
}

}  // namespace revis::cli
