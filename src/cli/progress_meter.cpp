#include "cli/progress_meter.h"

#include <unistd.h>

#include <cstdio>

#include "cli/progress_line.h"

namespace revis::cli {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kTerminalPeriod = std::chrono::milliseconds(250);
constexpr auto kMeterLogPeriod = std::chrono::seconds(10);

}  // namespace

ProgressMeter::ProgressMeter(std::string label, size_t total)
    : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO) == 1) {
  thread_ = std::thread([this] { tick(); });
}

ProgressMeter::~ProgressMeter() { finish(); }

void ProgressMeter::record(bool failed, uint64_t tokens) {
  MutexLock lock(mutex_);
  ++done_;
  if (failed) ++failed_;
  tokens_ += tokens;
}

std::string ProgressMeter::line_locked() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0;
  const int filled = total_ > 0 ? static_cast<int>(kBarWidth * done_ / total_) : kBarWidth;
  std::string bar = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "]";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s %zu/%zu", label_.c_str(), bar.c_str(), done_, total_);
  std::string line = buf;
  if (failed_ > 0) line += "  " + std::to_string(failed_) + " failed";
  std::snprintf(buf, sizeof buf, "  %.2f/s  %.0f tok/s  elapsed %s", rate, elapsed > 0 ? tokens_ / elapsed : 0.0,
                duration_text(elapsed).c_str());
  line += buf;
  if (done_ < total_) line += "  ETA " + (rate > 0 ? duration_text((total_ - done_) / rate) : std::string("?"));
  return line;
}

void ProgressMeter::tick() {
  MutexLock lock(mutex_);
  const auto period = tty_ ? std::chrono::duration_cast<std::chrono::milliseconds>(kTerminalPeriod)
                           : std::chrono::duration_cast<std::chrono::milliseconds>(kMeterLogPeriod);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + period;
    while (!stop_ && wake_.wait_until(mutex_, deadline)) {
    }
    if (stop_) return;
    // \033[K clears what a longer previous line left behind.
    if (tty_)
      std::fprintf(stderr, "\r%s\033[K", line_locked().c_str());
    else
      std::fprintf(stderr, "%s\n", line_locked().c_str());
    std::fflush(stderr);
  }
}

void ProgressMeter::note(const std::string& message) {
  MutexLock lock(mutex_);
  std::fprintf(stderr, tty_ ? "\r\033[K%s\n" : "%s\n", message.c_str());
  std::fflush(stderr);
}

void ProgressMeter::finish() {
  {
    MutexLock lock(mutex_);
    if (stop_) return;
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  MutexLock lock(mutex_);
  std::fprintf(stderr, tty_ ? "\r%s\033[K\n" : "%s\n", line_locked().c_str());
  std::fflush(stderr);
}

}  // namespace revis::cli
