// A chat job's generated text as the client gets it: split as it streams
// into the thinking (reasoning_split.h), the answer's content, and tool
// calls (tool_calls.h), each part optional; or, for harmony answers, by
// the messages' channels (harmony.h). Pieces go to the sinks as soon
// as they are certain; finish() hands out what was held and the calls.
//
// Thread-safety: one generation's state, used by one thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/harmony.h"
#include "chat/reasoning_split.h"
#include "chat/tool_calls.h"

namespace revis::node {

class AnswerStream {
 public:
  using Sink = std::function<void(std::string_view)>;
  AnswerStream(std::optional<ReasoningSplitter> reasoning, std::optional<ToolCallSplitter> tools, Sink on_content,
               Sink on_reasoning);
  AnswerStream(HarmonySplitter harmony, Sink on_content, Sink on_reasoning);

  void feed(std::string_view text);
  // Ends the stream; tool-call ids come from `call_id_seed` (tool_call_id()).
  void finish(std::string_view call_id_seed);

  const std::string& content() const { return content_; }      // every piece sent to on_content
  const std::string& reasoning() const { return reasoning_; }  // every piece sent to on_reasoning
  std::vector<ToolCall>& calls() { return calls_; }

 private:
  void content_piece(std::string_view text);
  void answer(const ReasoningDelta& d);

  std::optional<ReasoningSplitter> splitter_;
  std::optional<ToolCallSplitter> tools_;
  std::optional<HarmonySplitter> harmony_;
  Sink on_content_, on_reasoning_;
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
};

}  // namespace revis::node
