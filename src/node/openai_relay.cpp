#include "node/openai_relay.h"

#include <nlohmann/json.hpp>

#include "node/openai_api.h"

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
  if (auto logprobs = done.find("logprobs"); logprobs != done.end()) r.logprobs = logprobs_from_content(*logprobs);
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

std::string OpenAiRelay::chunk(std::string_view text, const char* finish, std::span<const LogprobEntry> logprobs) {
  const size_t offset = logprob_bytes_;
  sent_logprobs_ += logprobs.size();
  for (const LogprobEntry& e : logprobs) logprob_bytes_ += e.chosen.token.size();
  return shape_.chat ? chat_chunk(shape_.id, shape_.model, shape_.created, false, text, finish, shape_.logprobs, logprobs)
                     : completion_chunk(shape_.id, shape_.model, shape_.created, text, finish, shape_.logprobs, logprobs,
                                        offset);
}

OpenAiRelay::Step OpenAiRelay::end_with(const NodeError& error) {
  Step step;
  step.finished = finished_ = true;
  if (opened_) step.events = {openai_error_for(error), "[DONE]"};
  else step.error = error;
  return step;
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

OpenAiRelay::Step OpenAiRelay::on_event(std::string_view text) {
  const json e = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  auto string_field = [&](const char* key) { return string_at(e, key); };
  // Another ticket's events come from a request this connection made earlier.
  if (finished_ || !e.is_object() || string_field("ticketID") != shape_.id) return {};
  const std::string type = string_field("type");
  Step step;
  if (shape_.stream && !opened_ && (type == "token" || type == "done")) {
    step.open_stream = opened_ = true;
    if (shape_.chat) step.events.push_back(chat_chunk(shape_.id, shape_.model, shape_.created, true, "", nullptr));
  }
  if (type == "token" && shape_.stream) {
    const bool thinking = e.contains("reasoning");
    auto piece = fresh_part(thinking ? thinking_ : answer_, string_field(thinking ? "reasoning" : "text"));
    if (!piece) {
      step = end_with(diverged());
      step.cancel = true;
      return step;
    }
    std::vector<LogprobEntry> logprobs;
    if (auto it = e.find("logprobs"); shape_.logprobs && it != e.end()) logprobs = logprobs_from_content(*it);
    const size_t run_logprobs = run_logprobs_ + logprobs.size();
    if (run_logprobs_ < sent_logprobs_)  // entries an earlier run sent
      logprobs.erase(logprobs.begin(), logprobs.begin() + std::min(logprobs.size(), sent_logprobs_ - run_logprobs_));
    run_logprobs_ = run_logprobs;
    if (thinking) {
      if (!piece->empty()) step.events.push_back(chat_reasoning_chunk(shape_.id, shape_.model, shape_.created, *piece));
    } else if (!piece->empty() || !logprobs.empty()) {
      step.events.push_back(chunk(*piece, nullptr, logprobs));
    }
  } else if (type == "retry") {
    answer_.run_length = thinking_.run_length = 0;
    run_logprobs_ = 0;
    retry_reason_ = string_field("reason");
  } else if (type == "done") {
    const JobResult r = result_of(e);
    if (!shape_.stream) {
      step.response = shape_.chat ? chat_response(shape_.id, shape_.model, shape_.created, r, shape_.logprobs)
                                  : completion_response(shape_.id, shape_.model, shape_.created, r, shape_.logprobs);
    } else {
      if (r.text != answer_.text || r.reasoning.value_or("") != thinking_.text) return end_with(diverged());
      const std::span<const LogprobEntry> rest =
          std::span<const LogprobEntry>(r.logprobs).subspan(std::min(sent_logprobs_, r.logprobs.size()));
      // Calls are whole only at the end: each goes out as one chunk.
      for (size_t k = 0; k < r.tool_calls.size(); ++k)
        step.events.push_back(chat_tool_call_chunk(shape_.id, shape_.model, shape_.created, k, r.tool_calls[k]));
      step.events.push_back(chunk("", shape_.chat ? chat_finish_reason(r) : finish_reason(r.stop_reason), rest));
      if (shape_.include_usage) step.events.push_back(usage_chunk(shape_.chat, shape_.id, shape_.model, shape_.created, r.stats));
      step.events.push_back("[DONE]");
    }
    step.finished = finished_ = true;
  } else if (type == "error") {
    const auto code = error_code_from_name(string_field("code")).value_or(ErrorCode::kInternal);
    return end_with({code, string_field("message")});
  }
  return step;
}

}  // namespace revis::node
