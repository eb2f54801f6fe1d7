// Implementation of stop_matcher.h: see there for the contract and
// thread-safety. The held-back buffer is bounded by the longest stop string
// plus three bytes of an unfinished UTF-8 character, so each push costs
// O((held + piece) * stops * longest) at worst, which for realistic stop
// lists (a few strings of a few dozen bytes) is negligible next to a
// forward pass.
#include "sample/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace revis {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length a UTF-8 lead byte announces, or 0 if it is not a multi-byte lead
// (ASCII, continuation, or a byte that never starts a valid sequence).
size_t lead_length(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// The largest cut <= pos that does not split a multi-byte character of buf.
// At the end of buf, an unfinished character is cut off (its remaining
// bytes may still arrive). Inside buf, a character is only moved out when
// buf[pos] really continues it; broken bytes that nothing continues are
// left on the emitted side, as the model produced them.
size_t char_boundary(std::string_view buf, size_t pos) {
  if (pos < buf.size() && !is_continuation(static_cast<unsigned char>(buf[pos]))) return pos;
  // Walk back over at most three continuation bytes to the lead byte.
  size_t i = pos;
  for (int steps = 0; steps < 4 && i > 0; ++steps) {
    --i;
    const auto b = static_cast<unsigned char>(buf[i]);
    if (is_continuation(b)) continue;
    const size_t len = lead_length(b);
    // Every byte from i+1 to pos is a continuation (that is how we got
    // here), so if the announced length reaches past pos the character
    // straddles the cut: unfinished at the end of buf, continued by buf[pos]
    // inside it. Either way the whole character goes to the held side.
    return (len > 0 && i + len > pos) ? i : pos;
  }
  return pos;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) longest_ = std::max(longest_, s.size());
}

void StopMatcher::reset() {
  held_.clear();
  matched_ = -1;
}

StopMatcher::Output StopMatcher::push(std::string_view piece) {
  Output out;
  if (stopped()) {
    out.stopped = true;
    return out;
  }
  held_.append(piece);

  // Earliest complete stop string anywhere in what is not yet emitted. Held
  // bytes never contain a whole stop string (it would have matched on an
  // earlier push), so any match involves the new piece, but searching the
  // whole small buffer is simpler and just as cheap.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) continue;
    const size_t pos = held_.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      matched_ = static_cast<long>(i);
    }
  }
  if (best_pos != std::string::npos) {
    out.text = held_.substr(0, char_boundary(held_, best_pos));
    out.stopped = true;
    held_.clear();
    return out;
  }

  // Longest suffix that is a proper prefix of some stop string: it might be
  // completed by the next piece, so it must not be shown yet.
  size_t hold = 0;
  const size_t max_len = std::min(held_.size(), longest_ > 0 ? longest_ - 1 : 0);
  for (size_t len = max_len; len > 0 && hold == 0; --len) {
    const std::string_view tail = std::string_view(held_).substr(held_.size() - len);
    for (const auto& s : stops_) {
      if (s.size() > len && std::string_view(s).substr(0, len) == tail) {
        hold = len;
        break;
      }
    }
  }
  const size_t cut = char_boundary(held_, held_.size() - hold);
  out.text = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

std::string StopMatcher::finish() {
  if (stopped()) return {};
  return std::exchange(held_, std::string());
}

}  // namespace revis
