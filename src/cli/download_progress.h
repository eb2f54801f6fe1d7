// Progress of a download on stderr: on a terminal a bar redrawn in place
// (file, percent, MiB done/total, speed, time left); when stderr is a file
// or a pipe a plain line every few seconds and at the end, so logs stay
// readable.
//
// Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "hub/pull.h"

namespace revis::cli {

class DownloadProgress {
 public:
  DownloadProgress();
  // `total` 0: not known. done == total prints the file's last line, once.
  void update(const std::string& file, uint64_t done, uint64_t total);

 private:
  const bool tty_;
  std::string file_;
  std::chrono::steady_clock::time_point start_, last_print_;
  uint64_t start_bytes_ = 0;  // a resumed download's bytes do not count for the speed
  bool finished_ = false;     // the file's last line is printed
};

// Events of a pull on stderr: notes as lines, download progress on
// `progress` (which must outlive the pull).
hub::PullEvents pull_events_on_stderr(DownloadProgress& progress);

}  // namespace revis::cli
