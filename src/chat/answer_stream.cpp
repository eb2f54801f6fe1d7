#include "chat/answer_stream.h"

namespace revis::node {

AnswerStream::AnswerStream(std::optional<ReasoningSplitter> reasoning, std::optional<ToolCallSplitter> tools,
                           Sink on_content, Sink on_reasoning)
    : splitter_(std::move(reasoning)),
      tools_(std::move(tools)),
      on_content_(std::move(on_content)),
      on_reasoning_(std::move(on_reasoning)) {}

AnswerStream::AnswerStream(HarmonySplitter harmony, Sink on_content, Sink on_reasoning)
    : harmony_(std::move(harmony)), on_content_(std::move(on_content)), on_reasoning_(std::move(on_reasoning)) {}

void AnswerStream::content_piece(std::string_view text) {
  if (text.empty()) return;
  content_ += text;
  if (on_content_) on_content_(text);
}

void AnswerStream::answer(const ReasoningDelta& d) {
  if (!d.reasoning.empty()) {
    reasoning_ += d.reasoning;
    if (on_reasoning_) on_reasoning_(d.reasoning);
  }
  if (!d.content.empty()) content_piece(tools_ ? tools_->feed(d.content) : d.content);
}

void AnswerStream::feed(std::string_view text) {
  if (harmony_) return answer(harmony_->feed(text));
  answer(splitter_ ? splitter_->feed(text) : ReasoningDelta{"", std::string(text)});
}

void AnswerStream::finish(std::string_view call_id_seed) {
  if (harmony_) return answer(harmony_->finish(call_id_seed, calls_));
  if (splitter_) answer(splitter_->finish());
  if (!tools_) return;
  ParsedAnswer parsed = tools_->finish(call_id_seed);
  content_piece(parsed.content);
  calls_ = std::move(parsed.calls);
}

}  // namespace revis::node
