#include "chat/harmony.h"

#include <nlohmann/json.hpp>

#include "base/json_reader.h"

namespace revis::node {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>", kEnd = "<|end|>",
                           kConstrain = "<|constrain|>";
constexpr std::string_view kWhiteSpace = " \t\n\r";

// The word after `key` in a header (up to a space or the next marker).
std::string header_word(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  return std::string(rest.substr(0, std::min(rest.find_first_of(kWhiteSpace), rest.find("<|"))));
}

constexpr std::string_view kOpeners[] = {kStart, kChannel, "to="};

std::string_view trim_front(std::string_view text) {
  const size_t b = text.find_first_not_of(kWhiteSpace);
  return b == std::string_view::npos ? std::string_view() : text.substr(b);
}

// Whether the text before a <|message|> is a header: empty, or starting
// (after white space) with <|start|>, <|channel|> or `to=`.
bool is_header(std::string_view text) {
  text = trim_front(text);
  if (text.empty()) return true;
  for (std::string_view opener : kOpeners)
    if (text.starts_with(opener)) return true;
  return false;
}

// Whether text not yet followed by <|message|> may still become a header:
// one already, or a proper prefix of an opener. (A piece of <|message|>
// at its end does not count: the header may end there.)
bool may_become_header(std::string_view text) {
  text = trim_front(text.substr(0, text.size() - partial_tag_suffix(text, kMessage)));
  if (is_header(text)) return true;
  for (std::string_view opener : kOpeners)
    if (opener.starts_with(text)) return true;
  return false;
}

}  // namespace

std::vector<std::string_view> harmony_markers() { return {kStart, kChannel, kMessage, kEnd, kConstrain}; }

ReasoningDelta HarmonySplitter::feed(std::string_view text) {
  pending_ += text;
  return drain(false);
}

ReasoningDelta HarmonySplitter::finish(std::string_view id_seed, std::vector<ToolCall>& calls) {
  ReasoningDelta out = drain(true);
  if (in_body_) {
    end_message(pending_.size(), out);
  } else {
    out.content += pending_;  // not a header after all: never dropped
  }
  pending_.clear();
  for (auto& [name, body] : calls_) {
    const auto args = read_ordered_json(body, kMaxToolCallDepth);
    if (args.ok() && args->is_object()) {
      calls.push_back({tool_call_id(ToolFormat::kHarmony, id_seed, calls.size()), name, args->dump()});
    } else {
      out.content += body;
    }
  }
  calls_.clear();
  return out;
}

void HarmonySplitter::end_message(size_t end, ReasoningDelta& out) {
  const std::string_view body = std::string_view(pending_).substr(0, end);
  switch (body_) {
    case Body::kReasoning: out.reasoning += body; break;
    case Body::kContent: out.content += body; break;
    case Body::kCall: calls_.emplace_back(call_name_, std::string(body)); break;
  }
  pending_.erase(0, end);
}

ReasoningDelta HarmonySplitter::drain(bool final) {
  ReasoningDelta out;
  for (;;) {
    if (!in_body_) {
      const size_t message = pending_.find(kMessage);
      if (message == std::string::npos) {
        if (!may_become_header(pending_)) {  // plain text: the rest is content
          in_body_ = true;
          body_ = Body::kContent;
          continue;
        }
        return out;
      }
      const std::string_view header = std::string_view(pending_).substr(0, message);
      if (!is_header(header)) {
        in_body_ = true;
        body_ = Body::kContent;
        continue;
      }
      const std::string channel = header_word(header, kChannel);
      const std::string recipient = header_word(header, "to=");
      if (recipient.starts_with("functions.") && reads_calls_) {
        body_ = Body::kCall;
        call_name_ = recipient.substr(std::string_view("functions.").size());
      } else {
        body_ = channel == "analysis" ? Body::kReasoning : Body::kContent;
      }
      pending_.erase(0, message + kMessage.size());
      in_body_ = true;
      continue;
    }
    const size_t end = pending_.find(kEnd);
    if (end != std::string::npos) {
      end_message(end, out);
      pending_.erase(0, kEnd.size());
      in_body_ = false;
      continue;
    }
    // Calls are whole only at the end; thinking and content go out as they
    // come, but for what may be the start of <|end|>.
    if (body_ != Body::kCall && !final) end_message(pending_.size() - partial_tag_suffix(pending_, kEnd), out);
    return out;
  }
}

}  // namespace revis::node
