// Stop-string detection over streamed text.
//
// Contract
//   A StopMatcher is built from a list of stop strings (empty ones are
//   ignored) and fed the decoded text pieces of one generation, in order.
//   push() returns the text that is safe to show now and whether a stop
//   string has appeared. Text is held back while it could still turn out to
//   be the start of a stop string: the longest suffix of what has arrived
//   that is a proper prefix of some stop string. When a stop string appears
//   (possibly spread over several pieces), everything before its first byte
//   is emitted, the stop string and everything after it are dropped, and
//   the matcher stays stopped: later pushes return nothing. If several stop
//   strings occur, the one starting earliest wins. finish() ends the stream
//   without a stop and returns whatever was still held back.
//
//   Matching is on bytes. Emitted text never ends inside a UTF-8 sequence
//   that continues in the held-back bytes, and a multi-byte character whose
//   last bytes have not arrived yet (byte-fallback tokens split characters)
//   is held until they do, so a client never sees half a character.
//   Malformed bytes are passed through as they are, never held for long:
//   at most three trailing bytes wait for the next piece. finish() returns
//   everything held, complete or not.
//
// Thread-safety
//   Mutable per-stream state: not safe to use from two threads at once.
//   Distinct StopMatchers share nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace revis {

class StopMatcher {
 public:
  struct Output {
    std::string text;      // safe to emit now; may be empty
    bool stopped = false;  // a stop string has been seen (now or before)
  };

  explicit StopMatcher(std::vector<std::string> stops);

  Output push(std::string_view piece);
  // End of generation without a stop: returns the held-back text (empty if
  // stopped). The matcher is then empty again; a stop string can no longer
  // span the text before finish() and the text after it.
  std::string finish();
  // Back to the freshly constructed state (same stop strings).
  void reset();

  bool stopped() const { return matched_ >= 0; }
  // The stop string that ended the stream, or nullptr if none has.
  const std::string* matched_stop() const {
    return matched_ >= 0 ? &stops_[static_cast<size_t>(matched_)] : nullptr;
  }
  // Bytes currently held back (for tests and diagnostics).
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;  // as given, so matched_ indexes the caller's list
  size_t longest_ = 0;              // longest non-empty stop string
  std::string held_;                // received but not yet emitted
  long matched_ = -1;               // index into stops_ once stopped
};

}  // namespace revis
