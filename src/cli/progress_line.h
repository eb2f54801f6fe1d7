// A one-line progress indicator on stderr for a job of known size whose
// steps come from the job itself (quantize, mkmodel, demo, the prefill of a
// long prompt in `revis run` and `revis kv bench`): what runs now,
// done/total, percent and the estimated time left.
//
// On a terminal the line is redrawn in place with \r. When stderr is a file
// or a pipe, a plain line is printed at most every kLogPeriod instead, and
// the last one always, so that logs stay readable (no \r, a few lines).
//
// Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <string>

#include "revis/generate.h"

namespace revis::cli {

// "4.2s", "3m05s", "2h10m".
std::string duration_text(double seconds);

class ProgressLine {
 public:
  explicit ProgressLine(std::string verb);
  // `done` of `total` steps finished; `item` names the one that runs now.
  // done == total prints the final line (once).
  void update(size_t done, size_t total, const std::string& item = "");

 private:
  const std::string verb_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_print_{};
  bool finished_ = false;
};

// A long prompt takes seconds to minutes before its first token: when at
// least two prefill chunks of `prompt_tokens` are left to evaluate past the
// `cached` ones restored from a checkpoint, `options` reports their
// progress on `line` (which must outlive the generation).
void show_prefill_progress(GenerateOptions& options, ProgressLine& line, int prompt_tokens, int cached);

}  // namespace revis::cli
