#include "chat/reasoning_split.h"

#include <array>

namespace revis::node {
namespace {

constexpr std::string_view kSpace = " \t\n\r";

// Tag pairs by preference: a template mentioning several (DeepSeek V3.2
// writes both <think> and prose about it) takes the first found.
const std::array<std::pair<std::string_view, std::string_view>, 6> kTags = {{
    {"<|START_THINKING|>", "<|END_THINKING|>"},  // Command R7B, Command A
    {"<seed:think>", "</seed:think>"},
    {"<mm:think>", "</mm:think>"},
    {"[THINK]", "[/THINK]"},
    {"<think>", "</think>"},
    {"<thinking>", "</thinking>"},
}};

}  // namespace

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

std::optional<ReasoningTags> reasoning_tags(std::string_view source) {
  for (const auto& [open, close] : kTags)
    if (source.find(close) != std::string_view::npos) return ReasoningTags{std::string(open), std::string(close)};
  return std::nullopt;
}

bool prompt_opens_reasoning(std::string_view prompt, const ReasoningTags& tags) {
  const size_t end = prompt.find_last_not_of(kSpace);
  if (end == std::string_view::npos) return false;
  prompt = prompt.substr(0, end + 1);
  return prompt.size() >= tags.open.size() && prompt.substr(prompt.size() - tags.open.size()) == tags.open;
}

ReasoningSplitter::ReasoningSplitter(ReasoningTags tags, bool starts_in_reasoning)
    : tags_(std::move(tags)), state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

ReasoningDelta ReasoningSplitter::feed(std::string_view text) {
  pending_ += text;
  return drain(false);
}

ReasoningDelta ReasoningSplitter::finish() { return drain(true); }

ReasoningDelta ReasoningSplitter::drain(bool final) {
  ReasoningDelta out;
  for (;;) {
    switch (state_) {
      case State::kStart: {
        const size_t b = pending_.find_first_not_of(kSpace);
        if (b == std::string::npos) {
          if (final) state_ = State::kAnswer;  // whitespace only: an (empty) answer
          else return out;
          continue;
        }
        const std::string_view rest = std::string_view(pending_).substr(b);
        if (rest.substr(0, tags_.open.size()) == tags_.open) {
          pending_.erase(0, b + tags_.open.size());
          state_ = State::kReasoning;
        } else if (!final && rest.size() < tags_.open.size() && tags_.open.compare(0, rest.size(), rest) == 0) {
          return out;  // may still become the open tag
        } else {
          state_ = State::kAnswer;  // no thinking: all of it is the answer
        }
        continue;
      }
      case State::kReasoning: {
        if (!reasoning_started_) {
          const size_t b = pending_.find_first_not_of(kSpace);
          pending_.erase(0, b == std::string::npos ? pending_.size() : b);
          if (pending_.empty()) return out;
        }
        const size_t close = pending_.find(tags_.close);
        if (close != std::string::npos) {
          const std::string_view thought = std::string_view(pending_).substr(0, close);
          const size_t e = thought.find_last_not_of(kSpace);
          if (e != std::string_view::npos) out.reasoning += thought.substr(0, e + 1);
          pending_.erase(0, close + tags_.close.size());
          state_ = State::kAnswerStart;
          continue;
        }
        // Hold back a possible start of the close tag and trailing
        // whitespace (dropped if the tag follows).
        size_t keep = final ? pending_.size() : pending_.size() - partial_tag_suffix(pending_, tags_.close);
        const size_t e = std::string_view(pending_).substr(0, keep).find_last_not_of(kSpace);
        const size_t emit = e == std::string::npos ? 0 : e + 1;
        out.reasoning += pending_.substr(0, emit);
        reasoning_started_ = reasoning_started_ || emit > 0;
        pending_.erase(0, final ? pending_.size() : emit);
        return out;
      }
      case State::kAnswerStart: {
        const size_t b = pending_.find_first_not_of(kSpace);
        pending_.erase(0, b == std::string::npos ? pending_.size() : b);
        if (pending_.empty() && !final) return out;
        state_ = State::kAnswer;
        continue;
      }
      case State::kAnswer:
        out.content += pending_;
        pending_.clear();
        return out;
    }
  }
}

}  // namespace revis::node
