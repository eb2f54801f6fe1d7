#include "api/openai_relay.h"

#include "api/openai_api.h"

namespace revis::node {

OpenAiRelay::OpenAiRelay(Shape shape, std::unique_ptr<AnswerFormat> format)
    : shape_(std::move(shape)), format_(std::move(format)) {}

std::string OpenAiRelay::ticket_id(size_t choice) const {
  return shape_.choices == 1 ? shape_.id : shape_.id + "." + std::to_string(choice);
}

void OpenAiRelay::end_with(const NodeError& error, Step& step) {
  step.finished = finished_ = true;
  if (opened_) format_->failed(error, step.events);
  else step.error = error;
}

NodeError OpenAiRelay::diverged() const {
  return {ErrorCode::kInternal,
          "the request ran again (" + retry_reason_ + ") and the new run's text differs from the text already streamed"};
}

std::optional<std::string> OpenAiRelay::fresh_part(Sent& sent, std::string piece) {
  const size_t end = sent.run_length + piece.size();
  if (sent.run_length < sent.text.size()) {  // replaying what an earlier run sent
    const size_t n = std::min(piece.size(), sent.text.size() - sent.run_length);
    if (sent.text.compare(sent.run_length, n, piece, 0, n) != 0) return std::nullopt;
    piece.erase(0, n);
  }
  sent.run_length = end;
  sent.text += piece;
  return piece;
}

void OpenAiRelay::on_done(const JobResult& r, Step& step) {
  if (shape_.stream) {
    if (r.text != answer_.text || r.reasoning.value_or("") != thinking_.text) return end_with(diverged(), step);
    const std::span<const LogprobEntry> rest =
        std::span<const LogprobEntry>(r.logprobs).subspan(std::min(sent_logprobs_, r.logprobs.size()));
    format_->end(choice_, r, rest, step.events);
  }
  results_.push_back(r);
  if (results_.size() < shape_.choices) {
    // The next choice starts afresh.
    step.next_choice = choice_ = results_.size();
    begun_ = false;
    answer_ = thinking_ = Sent{};
    sent_logprobs_ = run_logprobs_ = 0;
    retry_reason_.clear();
    return;
  }
  if (shape_.stream) format_->close(usage_of(results_), step.events);
  else step.response = format_->response(results_, usage_of(results_));
  step.finished = finished_ = true;
}

OpenAiRelay::Step OpenAiRelay::on_event(const TicketEvent& e) {
  using Type = TicketEvent::Type;
  // Other tickets' events come from a request this connection made earlier,
  // or from an earlier choice.
  if (finished_ || e.ticket_id() != ticket_id(choice_)) return {};
  const Type type = e.type();
  Step step;
  if (shape_.stream && !begun_ && (type == Type::kToken || type == Type::kDone)) {
    step.open_stream = !opened_;
    opened_ = begun_ = true;
    format_->begin(choice_, step.events);
  }
  if (type == Type::kToken && shape_.stream) {
    const bool thinking = e.reasoning();
    auto piece = fresh_part(thinking ? thinking_ : answer_, e.piece());
    if (!piece) {
      end_with(diverged(), step);
      step.cancel = true;
      return step;
    }
    std::span<const LogprobEntry> logprobs = e.logprobs();
    const size_t run_logprobs = run_logprobs_ + logprobs.size();
    if (run_logprobs_ < sent_logprobs_)  // entries an earlier run sent
      logprobs = logprobs.subspan(std::min(logprobs.size(), sent_logprobs_ - run_logprobs_));
    run_logprobs_ = run_logprobs;
    sent_logprobs_ += logprobs.size();
    if (thinking) format_->reasoning(choice_, *piece, step.events);
    else format_->content(choice_, *piece, logprobs, step.events);
  } else if (type == Type::kRetry) {
    answer_.run_length = thinking_.run_length = 0;
    run_logprobs_ = 0;
    retry_reason_ = e.reason();
  } else if (type == Type::kDone) {
    on_done(e.result(), step);
  } else if (type == Type::kError) {
    end_with(e.error(), step);
  }
  return step;
}

}  // namespace revis::node
