// ToolCallSplitter (declared in tool_calls.h): where a stream stops being
// content is the family's Hold (tool_call_family.h).
#include <algorithm>
#include <utility>

#include "chat/reasoning_split.h"
#include "chat/tool_call_family.h"
#include "chat/tool_call_markers.h"
#include "chat/tool_calls.h"

namespace revis::node {

using toolcalls::kSpace;

std::string ToolCallSplitter::feed(std::string_view text) {
  pending_ += text;
  const ToolCallFamily& family = tool_call_family(format_);
  // A harmony call's header may begin anywhere before it: HarmonySplitter
  // streams harmony; here the answer is read whole.
  if (family.hold == ToolCallFamily::Hold::kWhole) holding_ = true;
  if (!holding_ && family.hold == ToolCallFamily::Hold::kOpeningAnswer) {
    // A call is the whole answer: held when the answer opens with an
    // opener, all content otherwise.
    if (!started_) {
      const size_t b = pending_.find_first_not_of(kSpace);
      if (b == std::string::npos) return {};
      const std::string_view rest = std::string_view(pending_).substr(b);
      for (std::string_view opener : family.openers) {
        if (rest.starts_with(opener)) {
          holding_ = true;
          break;
        }
        if (opener.starts_with(rest)) return {};  // may still open with it
      }
      started_ = !holding_;
    }
    if (!holding_) return std::exchange(pending_, std::string());
  }
  if (holding_) {
    if (!family.held_content) return {};
    std::string content = family.held_content(pending_, &held_read_);
    held_sent_ += content.size();
    return content;
  }
  size_t at = std::string::npos, partial = 0;
  for (std::string_view opener : family.openers) {
    at = std::min(at, pending_.find(opener));
    partial = std::max(partial, partial_tag_suffix(pending_, opener));
  }
  holding_ = at != std::string::npos;
  // pending_[keep, end) stays held: the call, or what may begin one.
  const size_t keep = holding_ ? at : pending_.size() - partial;
  // White space before the held part is held too: it belongs before a call.
  const size_t e = std::string_view(pending_).substr(0, keep).find_last_not_of(kSpace);
  const size_t emit = e == std::string::npos ? 0 : e + 1;
  std::string out = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

ParsedAnswer ToolCallSplitter::finish(std::string_view id_seed) {
  ParsedAnswer out;
  if (holding_) out = parse_tool_calls(format_, pending_, id_seed, tools_);
  if (holding_ && tool_call_family(format_).held_content) {
    // The parse's content begins with what feed() already sent of it.
    out.content.erase(0, std::min(held_sent_, out.content.size()));
  } else if (out.calls.empty()) {
    out.content = std::move(pending_);
  }
  pending_.clear();
  return out;
}

}  // namespace revis::node
