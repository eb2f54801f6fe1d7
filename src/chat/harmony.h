// gpt-oss's harmony response format: the answer is a sequence of messages,
// each a header and a body,
//
//   <|channel|>analysis<|message|>thinking<|end|>
//   <|start|>assistant<|channel|>final<|message|>the answer
//   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}
//
// (the recipient `to=` may also follow the channel, and `<|constrain|>`
// may come before the content type). The last message ends at the end of
// generation (<|return|> or <|call|>, which the engine does not show).
// HarmonySplitter reads the messages as they stream: the analysis channel
// is the thinking (reasoning_content), the final channel and commentary
// without a recipient are the answer's content, and a message to
// `functions.NAME` is a tool call whose body is its JSON arguments. Text
// that is not in harmony's shape is content; a call whose body is not a
// JSON object is content too, never dropped.
//
// Thread-safety: a splitter is used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning_split.h"
#include "chat/tool_calls.h"

namespace revis::node {

// The marker texts the generation must show (GenerateOptions::shown_tokens).
std::vector<std::string_view> harmony_markers();

class HarmonySplitter {
 public:
  // `reads_calls`: the request gave tools; otherwise a message to a
  // function is content.
  explicit HarmonySplitter(bool reads_calls) : reads_calls_(reads_calls) {}

  // The thinking and content that are certain now.
  ReasoningDelta feed(std::string_view text);
  // What was held, and the calls (ids: tool_call_id(kHarmony, id_seed, i)).
  // The splitter is spent.
  ReasoningDelta finish(std::string_view id_seed, std::vector<ToolCall>& calls);

 private:
  enum class Body { kReasoning, kContent, kCall };
  ReasoningDelta drain(bool final);
  // Ends the message in pending_[0, end).
  void end_message(size_t end, ReasoningDelta& out);

  bool reads_calls_;
  bool in_body_ = false;
  Body body_ = Body::kContent;
  std::string call_name_;  // kCall: the function
  std::string pending_;    // the header being read, or the body not yet sent
  std::vector<std::pair<std::string, std::string>> calls_;  // name, body as written
};

}  // namespace revis::node
