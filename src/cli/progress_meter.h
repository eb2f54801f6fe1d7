// A live progress line on stderr for work made of many items that finish at
// their own pace (revis batch): a bar, done/total, failures, items and tokens
// per second, and the estimated time left.
//
// On a terminal the line is redrawn in place several times a second by the
// meter's own thread, so elapsed time and ETA move even while nothing
// finishes; when stderr is a file or a pipe a plain line is printed every
// ten seconds instead, so logs stay readable. finish() prints the last line.
//
// Thread-safety: record() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace revis::cli {

class ProgressMeter {
 public:
  ProgressMeter(std::string label, size_t total);
  ~ProgressMeter();
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  // One item ended (failed or not) after producing `tokens` tokens.
  void record(bool failed, uint64_t tokens);
  // Prints a message on its own line without garbling the progress line.
  void note(const std::string& message);
  // Stops redrawing and prints the final line (idempotent).
  void finish();

 private:
  std::string line_locked() const REQUIRES(mutex_);
  void tick();

  const std::string label_;
  const size_t total_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable Mutex mutex_;  // also keeps lines on stderr whole
  CondVar wake_;
  size_t done_ GUARDED_BY(mutex_) = 0;
  size_t failed_ GUARDED_BY(mutex_) = 0;
  uint64_t tokens_ GUARDED_BY(mutex_) = 0;
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace revis::cli
