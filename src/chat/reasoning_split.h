// Reasoning split: thinking models write their thoughts between tags
// (`<think>…</think>` for Qwen3, QwQ, DeepSeek R1 and most others;
// `<seed:think>`, `<mm:think>`, `[THINK]…[/THINK]` for Seed, MiniMax and
// Magistral/Ministral) before the answer. The OpenAI API returns the
// thoughts as `reasoning_content` and the answer as `content`; the ticket
// protocol's `done` carries both.
//
// ReasoningSplitter takes the generated text in pieces of any size (a tag
// may be split across pieces) and hands out the two streams as they become
// certain: a piece that may begin a tag is held back until it is decided.
// Thinking opens either with the open tag at the very start of the output
// (after whitespace) or, when the prompt already ended with it (templates
// that open the thinking block in the generation prompt), from the first
// byte. Whitespace at both ends of the reasoning and at the start of the
// answer is dropped. Thinking that never closes is all reasoning.
//
// Thread-safety: reasoning_tags is pure; a splitter is used by one thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace revis::node {

struct ReasoningTags {
  std::string open, close;
};

// The tag pair a chat template uses for thinking, if any (the first whose
// closing tag occurs in the template's source).
std::optional<ReasoningTags> reasoning_tags(std::string_view template_source);

// True when `prompt` ends, but for whitespace, with the open tag: the model
// is to continue inside its thinking.
bool prompt_opens_reasoning(std::string_view prompt, const ReasoningTags& tags);

// Length of the longest suffix of `text` that is a proper prefix of `tag`:
// what a stream must hold back because the tag may be arriving.
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

struct ReasoningDelta {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningTags tags, bool starts_in_reasoning);

  ReasoningDelta feed(std::string_view text);
  ReasoningDelta finish();  // what was held back; the splitter is spent

 private:
  enum class State { kStart, kReasoning, kAnswerStart, kAnswer };
  ReasoningDelta drain(bool final);

  ReasoningTags tags_;
  State state_;
  bool reasoning_started_ = false;  // a non-whitespace byte of reasoning was emitted
  std::string pending_;
};

}  // namespace revis::node
