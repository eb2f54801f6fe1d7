// The answers' half of openai_api.h: responses, chunks, the answer format,
// errors and the model list (openai_api.cpp reads the requests).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "api/openai_api.h"
#include "base/json_text.h"
#include "protocol/result_json.h"

namespace revis::node {
namespace {

using nlohmann::json;

// Speculative decoding's drafts in OpenAI's names for predicted tokens,
// and in revis's own (docs/protocol.md).
json usage(const JobStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.generated_tokens},
          {"total_tokens", s.prompt_tokens + s.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"completion_tokens_details",
           {{"accepted_prediction_tokens", s.accepted_tokens},
            {"rejected_prediction_tokens", s.draft_tokens - s.accepted_tokens}}},
          {"revis", {{"draft_tokens", s.draft_tokens}, {"accepted_tokens", s.accepted_tokens}}}};
}

}  // namespace

const char* finish_reason(const std::string& stop_reason) {
  return stop_reason == "length" || stop_reason == "context" ? "length" : "stop";
}

namespace {

json chat_logprobs(bool logprobs, std::span<const LogprobEntry> entries) {
  if (!logprobs) return nullptr;
  return {{"content", logprobs_content(entries)}, {"refusal", nullptr}};
}

json completion_logprobs(bool logprobs, std::span<const LogprobEntry> entries, size_t text_offset) {
  if (!logprobs) return nullptr;
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const LogprobEntry& e : entries) {
    const json chosen = token_choice_json(e.chosen);
    tokens.push_back(chosen["token"]);
    token_logprobs.push_back(chosen["logprob"]);
    json alternatives = json::object();
    for (const TokenChoice& c : e.top) alternatives[c.token] = token_choice_json(c)["logprob"];
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += e.chosen.token.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

}  // namespace

const char* chat_finish_reason(const JobResult& r) {
  return r.tool_calls.empty() ? finish_reason(r.stop_reason) : "tool_calls";
}

namespace {

json tool_call_json(const ToolCall& call) {
  return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

std::string chat_delta_chunk(const ChunkHead& head, json delta, const char* finish, json logprobs) {
  return json_text({{"id", head.id},
               {"object", "chat.completion.chunk"},
               {"created", head.created},
               {"model", head.model},
               {"choices", json::array({{{"index", head.choice},
                                         {"delta", std::move(delta)},
                                         {"logprobs", std::move(logprobs)},
                                         {"finish_reason", finish ? json(finish) : json(nullptr)}}})}});
}

json chat_message(const JobResult& r) {
  json message = {{"role", "assistant"}, {"content", r.text}};
  if (r.reasoning && !r.reasoning->empty()) message["reasoning_content"] = *r.reasoning;
  if (!r.tool_calls.empty()) {
    if (r.text.empty()) message["content"] = nullptr;  // as OpenAI answers a call
    message["tool_calls"] = json::array();
    for (const ToolCall& call : r.tool_calls) message["tool_calls"].push_back(tool_call_json(call));
  }
  return message;
}

}  // namespace

std::string chat_response(const std::string& id, const std::string& model, int64_t created,
                          std::span<const JobResult> choices, const JobStats& usage_total, bool logprobs) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    out.push_back({{"index", i},
                   {"message", chat_message(choices[i])},
                   {"logprobs", chat_logprobs(logprobs, choices[i].logprobs)},
                   {"finish_reason", chat_finish_reason(choices[i])}});
  return json_text({{"id", id},
               {"object", "chat.completion"},
               {"created", created},
               {"model", model},
               {"choices", std::move(out)},
               {"usage", usage(usage_total)}});
}

std::string chat_chunk(const ChunkHead& head, bool with_role, std::string_view content, const char* finish,
                       bool logprobs, std::span<const LogprobEntry> entries) {
  json delta = json::object();
  if (with_role) delta["role"] = "assistant";
  if (!content.empty() || with_role) delta["content"] = std::string(content);
  return chat_delta_chunk(head, std::move(delta), finish, chat_logprobs(logprobs && !with_role, entries));
}

std::string chat_reasoning_chunk(const ChunkHead& head, std::string_view reasoning) {
  return chat_delta_chunk(head, {{"reasoning_content", std::string(reasoning)}}, nullptr, nullptr);
}

std::string chat_tool_call_chunk(const ChunkHead& head, size_t index, const ToolCall& call) {
  json entry = tool_call_json(call);
  entry["index"] = index;
  return chat_delta_chunk(head, {{"tool_calls", json::array({entry})}}, nullptr, nullptr);
}

std::string completion_response(const std::string& id, const std::string& model, int64_t created,
                                std::span<const JobResult> choices, const JobStats& usage_total, bool logprobs) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    out.push_back({{"index", i},
                   {"text", choices[i].text},
                   {"logprobs", completion_logprobs(logprobs, choices[i].logprobs, 0)},
                   {"finish_reason", finish_reason(choices[i].stop_reason)}});
  return json_text({{"id", id},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", std::move(out)},
               {"usage", usage(usage_total)}});
}

std::string completion_chunk(const ChunkHead& head, std::string_view text, const char* finish, bool logprobs,
                             std::span<const LogprobEntry> entries, size_t text_offset) {
  return json_text({{"id", head.id},
               {"object", "text_completion"},
               {"created", head.created},
               {"model", head.model},
               {"choices", json::array({{{"index", head.choice},
                                         {"text", std::string(text)},
                                         {"logprobs", completion_logprobs(logprobs, entries, text_offset)},
                                         {"finish_reason", finish ? json(finish) : json(nullptr)}}})}});
}

JobStats usage_of(std::span<const JobResult> choices) {
  JobStats total;
  if (choices.empty()) return total;
  total.prompt_tokens = choices[0].stats.prompt_tokens;
  total.cached_tokens = choices[0].stats.cached_tokens;
  for (const JobResult& r : choices) {
    total.generated_tokens += r.stats.generated_tokens;
    total.draft_tokens += r.stats.draft_tokens;
    total.accepted_tokens += r.stats.accepted_tokens;
  }
  return total;
}

std::string usage_chunk(bool chat, const std::string& id, const std::string& model, int64_t created, const JobStats& s) {
  return json_text({{"id", id},
               {"object", chat ? "chat.completion.chunk" : "text_completion"},
               {"created", created},
               {"model", model},
               {"choices", json::array()},
               {"usage", usage(s)}});
}

namespace {

class OpenAiFormat : public AnswerFormat {
 public:
  explicit OpenAiFormat(OpenAiShape shape)
      : shape_(std::move(shape)), head_{shape_.id, shape_.model, shape_.created, 0} {}

  void begin(size_t choice, Events& out) override {
    head_.choice = choice;
    logprob_bytes_ = 0;
    if (shape_.chat) out.push_back({"", chat_chunk(head_, true, "", nullptr)});
  }
  void reasoning(size_t, std::string_view text, Events& out) override {
    if (!text.empty()) out.push_back({"", chat_reasoning_chunk(head_, text)});
  }
  void content(size_t, std::string_view text, std::span<const LogprobEntry> logprobs, Events& out) override {
    if (!text.empty() || !logprobs.empty()) out.push_back({"", chunk(text, nullptr, logprobs)});
  }
  void end(size_t, const JobResult& r, std::span<const LogprobEntry> unsent, Events& out) override {
    // Calls are whole only at the end: each goes out as one chunk.
    for (size_t k = 0; k < r.tool_calls.size(); ++k)
      out.push_back({"", chat_tool_call_chunk(head_, k, r.tool_calls[k])});
    out.push_back({"", chunk("", shape_.chat ? chat_finish_reason(r) : finish_reason(r.stop_reason), unsent)});
  }
  void close(const JobStats& usage, Events& out) override {
    if (shape_.include_usage) out.push_back({"", usage_chunk(shape_.chat, shape_.id, shape_.model, shape_.created, usage)});
    out.push_back({"", "[DONE]"});
  }
  void failed(const NodeError& error, Events& out) override {
    out.push_back({"", openai_error_for(error)});
    out.push_back({"", "[DONE]"});
  }
  std::string response(std::span<const JobResult> choices, const JobStats& usage) override {
    return shape_.chat ? chat_response(shape_.id, shape_.model, shape_.created, choices, usage, shape_.logprobs)
                       : completion_response(shape_.id, shape_.model, shape_.created, choices, usage, shape_.logprobs);
  }
  std::string error_body(const NodeError& error) override { return openai_error_for(error); }

 private:
  std::string chunk(std::string_view text, const char* finish, std::span<const LogprobEntry> logprobs) {
    const size_t offset = logprob_bytes_;
    for (const LogprobEntry& e : logprobs) logprob_bytes_ += e.chosen.token.size();
    return shape_.chat ? chat_chunk(head_, false, text, finish, shape_.logprobs, logprobs)
                       : completion_chunk(head_, text, finish, shape_.logprobs, logprobs, offset);
  }

  const OpenAiShape shape_;
  ChunkHead head_;
  size_t logprob_bytes_ = 0;  // the choice's sent entries' token bytes: the next text_offset
};

}  // namespace

std::unique_ptr<AnswerFormat> openai_format(OpenAiShape shape) { return std::make_unique<OpenAiFormat>(std::move(shape)); }

std::string openai_error(const std::string& message, const std::string& type, const std::string& code) {
  return json_text({{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}});
}

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
    case ErrorCode::kUnknownTask:
    case ErrorCode::kMissingArg:
    case ErrorCode::kTooLong:
    case ErrorCode::kCatalogMismatch: return 400;
    case ErrorCode::kUnknownTicket: return 404;
    case ErrorCode::kQueueFull:
    case ErrorCode::kModelUnavailable:
    case ErrorCode::kCancelled: return 503;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

std::string openai_error_for(const NodeError& e) {
  const int status = http_status_for(e.code);
  const char* type = status == 400 ? "invalid_request_error" : "server_error";
  std::string code = error_code_name(e.code);
  if (e.code == ErrorCode::kTooLong) code = "context_length_exceeded";  // OpenAI's name for it
  return openai_error(e.message, type, code);
}

namespace {

json model_object(const std::string& id, int64_t created, const std::string& owner) {
  return {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", owner}};
}

}  // namespace

std::string models_list(const std::vector<std::string>& ids, int64_t created, const std::string& owner) {
  json data = json::array();
  for (const std::string& id : ids) data.push_back(model_object(id, created, owner));
  return json_text({{"object", "list"}, {"data", data}});
}

std::optional<std::string> model_entry(const std::vector<std::string>& ids, const std::string& id, int64_t created,
                                       const std::string& owner) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) return std::nullopt;
  return json_text(model_object(id, created, owner));
}

}  // namespace revis::node
