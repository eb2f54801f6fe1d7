#include "api/openai_relay.h"

#include <nlohmann/json.hpp>

#include "api/openai_api.h"
#include "base/base64.h"

namespace revis::node {
namespace {

using nlohmann::json;

// Fields read leniently: a wrong type (from a misbehaving peer) reads as
// empty rather than throwing on the I/O thread.
std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int int_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// What the OpenAI shapes need of a `done` event.
JobResult result_of(const json& done) {
  JobResult r;
  r.text = string_at(done, "text");
  if (auto reasoning = done.find("reasoning"); reasoning != done.end() && reasoning->is_string())
    r.reasoning = reasoning->get<std::string>();
  if (auto calls = done.find("toolCalls"); calls != done.end()) r.tool_calls = tool_calls_from_json(*calls);
  r.stop_reason = string_at(done, "stopReason");
  r.stop_sequence = string_at(done, "stopSequence");
  if (auto logprobs = done.find("logprobs"); logprobs != done.end()) r.logprobs = logprobs_from_content(*logprobs);
  if (auto embeddings = done.find("embeddings"); embeddings != done.end() && embeddings->is_array())
    for (const json& e : *embeddings)
      if (auto values = e.is_string() ? floats_from_base64(e.get_ref<const std::string&>()) : std::nullopt)
        r.embeddings.push_back(std::move(*values));
  if (auto stats = done.find("stats"); stats != done.end() && stats->is_object()) {
    r.stats.prompt_tokens = int_at(*stats, "promptTokens");
    r.stats.cached_tokens = int_at(*stats, "cachedTokens");
    r.stats.generated_tokens = int_at(*stats, "generatedTokens");
    r.stats.draft_tokens = int_at(*stats, "draftTokens");
    r.stats.accepted_tokens = int_at(*stats, "acceptedTokens");
  }
  return r;
}

}  // namespace

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

OpenAiRelay::Step OpenAiRelay::on_event(std::string_view text) {
  const json e = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  auto string_field = [&](const char* key) { return string_at(e, key); };
  // Other tickets' events come from a request this connection made earlier,
  // or from an earlier choice.
  if (finished_ || !e.is_object() || string_field("ticketID") != ticket_id(choice_)) return {};
  const std::string type = string_field("type");
  Step step;
  if (shape_.stream && !begun_ && (type == "token" || type == "done")) {
    step.open_stream = !opened_;
    opened_ = begun_ = true;
    format_->begin(choice_, step.events);
  }
  if (type == "token" && shape_.stream) {
    const bool thinking = e.contains("reasoning");
    auto piece = fresh_part(thinking ? thinking_ : answer_, string_field(thinking ? "reasoning" : "text"));
    if (!piece) {
      end_with(diverged(), step);
      step.cancel = true;
      return step;
    }
    std::vector<LogprobEntry> logprobs;
    if (auto it = e.find("logprobs"); it != e.end()) logprobs = logprobs_from_content(*it);
    const size_t run_logprobs = run_logprobs_ + logprobs.size();
    if (run_logprobs_ < sent_logprobs_)  // entries an earlier run sent
      logprobs.erase(logprobs.begin(), logprobs.begin() + std::min(logprobs.size(), sent_logprobs_ - run_logprobs_));
    run_logprobs_ = run_logprobs;
    sent_logprobs_ += logprobs.size();
    if (thinking) format_->reasoning(choice_, *piece, step.events);
    else format_->content(choice_, *piece, logprobs, step.events);
  } else if (type == "retry") {
    answer_.run_length = thinking_.run_length = 0;
    run_logprobs_ = 0;
    retry_reason_ = string_field("reason");
  } else if (type == "done") {
    on_done(result_of(e), step);
  } else if (type == "error") {
    const auto code = error_code_from_name(string_field("code")).value_or(ErrorCode::kInternal);
    end_with({code, string_field("message")}, step);
  }
  return step;
}

}  // namespace revis::node
