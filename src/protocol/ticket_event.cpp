#include "protocol/ticket_event.h"

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/json_text.h"
#include "protocol/result_json.h"

namespace revis::node {

struct TicketEvent::Body {
  std::string text;
  Type type = Type::kOther;
  std::string ticket_id;
  uint64_t seq = 0;                     // kToken
  bool reasoning = false;               // kToken
  std::string piece;                    // kToken
  std::vector<LogprobEntry> logprobs;   // kToken
  std::unique_ptr<const JobResult> result;  // kDone
  NodeError error;                      // kError
  int attempt = 0;                      // kRetry
  std::string reason;                   // kRetry
};

namespace {

using nlohmann::json;

json stats_json(const JobStats& s) {
  return {
      {"promptTokens", s.prompt_tokens},   {"cachedTokens", s.cached_tokens},
      {"generatedTokens", s.generated_tokens},
      {"draftTokens", s.draft_tokens},     {"acceptedTokens", s.accepted_tokens},
      {"prefillMs", s.prefill_ms},         {"generateMs", s.generate_ms},
      {"prefillTokPerSec", s.prefill_tok_s}, {"genTokPerSec", s.gen_tok_s},
      {"queueWaitMs", s.queue_wait_ms},    {"loadMs", s.load_ms},
      {"ttftMs", s.ttft_ms},               {"totalMs", s.total_ms},
      {"startedMs", s.started_ms},         {"finishedMs", s.finished_ms},
      {"execIndex", s.exec_index},         {"seed", s.seed},
      {"node", s.node},                    {"tier", s.tier},
      {"model", s.model},                  {"modelDigest", s.model_digest},
      {"catalog", s.catalog_digest},       {"chatTemplate", s.chat_template},
      {"engine", s.engine},
  };
}

// Fields read leniently: a wrong type (from a misbehaving peer) reads as
// empty rather than throwing.
std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <class T>
T number_at(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return T{};
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return T{};
  }
  return it->get<T>();
}

// The inverse of stats_json; what a peer leaves out is zero or empty.
JobStats stats_of(const json& s) {
  JobStats stats;
  stats.prompt_tokens = number_at<int>(s, "promptTokens");
  stats.cached_tokens = number_at<int>(s, "cachedTokens");
  stats.generated_tokens = number_at<int>(s, "generatedTokens");
  stats.draft_tokens = number_at<int>(s, "draftTokens");
  stats.accepted_tokens = number_at<int>(s, "acceptedTokens");
  stats.prefill_ms = number_at<double>(s, "prefillMs");
  stats.generate_ms = number_at<double>(s, "generateMs");
  stats.prefill_tok_s = number_at<double>(s, "prefillTokPerSec");
  stats.gen_tok_s = number_at<double>(s, "genTokPerSec");
  stats.queue_wait_ms = number_at<double>(s, "queueWaitMs");
  stats.load_ms = number_at<double>(s, "loadMs");
  stats.ttft_ms = number_at<double>(s, "ttftMs");
  stats.total_ms = number_at<double>(s, "totalMs");
  stats.started_ms = number_at<double>(s, "startedMs");
  stats.finished_ms = number_at<double>(s, "finishedMs");
  stats.exec_index = number_at<uint64_t>(s, "execIndex");
  stats.seed = number_at<uint64_t>(s, "seed");
  stats.node = string_at(s, "node");
  stats.tier = string_at(s, "tier");
  stats.model = string_at(s, "model");
  stats.model_digest = string_at(s, "modelDigest");
  stats.catalog_digest = string_at(s, "catalog");
  stats.chat_template = string_at(s, "chatTemplate");
  stats.engine = string_at(s, "engine");
  return stats;
}

// The inverse of done_event's fields.
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
  if (auto stats = done.find("stats"); stats != done.end() && stats->is_object()) r.stats = stats_of(*stats);
  return r;
}

}  // namespace

TicketEvent TicketEvent::make(Body body) { return TicketEvent(std::make_shared<const Body>(std::move(body))); }

TicketEvent TicketEvent::read(std::string text) {
  const json parsed = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  return read(std::move(text), parsed);
}

TicketEvent TicketEvent::read(std::string text, const json& e) {
  Body body;
  body.text = std::move(text);
  if (!e.is_object()) return make(std::move(body));
  body.ticket_id = string_at(e, "ticketID");
  const std::string type = string_at(e, "type");
  if (type == "accepted") {
    body.type = Type::kAccepted;
  } else if (type == "token") {
    body.type = Type::kToken;
    body.seq = number_at<uint64_t>(e, "seq");
    const auto reasoning = e.find("reasoning");
    body.reasoning = reasoning != e.end() && reasoning->is_string();
    body.piece = string_at(e, body.reasoning ? "reasoning" : "text");
    if (auto it = e.find("logprobs"); it != e.end()) body.logprobs = logprobs_from_content(*it);
  } else if (type == "retry") {
    body.type = Type::kRetry;
    body.attempt = number_at<int>(e, "attempt");
    body.reason = string_at(e, "reason");
  } else if (type == "done") {
    body.type = Type::kDone;
    body.result = std::make_unique<const JobResult>(result_of(e));
  } else if (type == "error") {
    body.type = Type::kError;
    body.error = {error_code_from_name(string_at(e, "code")).value_or(ErrorCode::kInternal), string_at(e, "message")};
  }
  return make(std::move(body));
}

TicketEvent TicketEvent::other(std::string text) {
  Body body;
  body.text = std::move(text);
  return make(std::move(body));
}

const std::string& TicketEvent::text() const {
  static const std::string kNone;
  return body_ ? body_->text : kNone;
}

TicketEvent::Type TicketEvent::type() const { return body_ ? body_->type : Type::kNone; }

const std::string& TicketEvent::ticket_id() const {
  static const std::string kNone;
  return body_ ? body_->ticket_id : kNone;
}

uint64_t TicketEvent::seq() const { return body_ ? body_->seq : 0; }
bool TicketEvent::reasoning() const { return body_ && body_->reasoning; }

const std::string& TicketEvent::piece() const {
  static const std::string kNone;
  return body_ ? body_->piece : kNone;
}

std::span<const LogprobEntry> TicketEvent::logprobs() const {
  return body_ ? std::span<const LogprobEntry>(body_->logprobs) : std::span<const LogprobEntry>();
}

const JobResult& TicketEvent::result() const {
  static const JobResult kNone;
  return body_ && body_->result ? *body_->result : kNone;
}

const NodeError& TicketEvent::error() const {
  static const NodeError kNone;
  return body_ ? body_->error : kNone;
}

int TicketEvent::attempt() const { return body_ ? body_->attempt : 0; }

const std::string& TicketEvent::reason() const {
  static const std::string kNone;
  return body_ ? body_->reason : kNone;
}

TicketEvent accepted_event(const std::string& id, int position) {
  TicketEvent::Body body;
  body.text = json_text({{"type", "accepted"}, {"ticketID", id}, {"position", position}});
  body.type = TicketEvent::Type::kAccepted;
  body.ticket_id = id;
  return TicketEvent::make(std::move(body));
}

TicketEvent token_event(const std::string& id, uint64_t seq, std::string_view text,
                        std::span<const LogprobEntry> logprobs, bool reasoning) {
  json j = {{"type", "token"}, {"ticketID", id}, {"seq", seq}, {"text", reasoning ? std::string() : std::string(text)}};
  if (reasoning) j["reasoning"] = std::string(text);
  if (!logprobs.empty()) j["logprobs"] = logprobs_content(logprobs);
  TicketEvent::Body body;
  body.text = json_text(j);
  body.type = TicketEvent::Type::kToken;
  body.ticket_id = id;
  body.seq = seq;
  body.reasoning = reasoning;
  body.piece = std::string(text);
  body.logprobs.assign(logprobs.begin(), logprobs.end());
  return TicketEvent::make(std::move(body));
}

void stream_token_events(JobCallbacks& callbacks, const std::string& id, std::function<void(TicketEvent event)> send) {
  auto seq = std::make_shared<uint64_t>(0);
  callbacks.on_text = [id, seq, send](std::string_view piece, std::span<const LogprobEntry> logprobs) {
    send(token_event(id, (*seq)++, piece, logprobs));
  };
  callbacks.on_reasoning = [id, seq, send](std::string_view piece) { send(token_event(id, (*seq)++, piece, {}, true)); };
}

TicketEvent done_event(const std::string& id, const JobResult& result) {
  json j = {{"type", "done"}, {"ticketID", id}, {"text", result.text}};
  if (result.reasoning) j["reasoning"] = *result.reasoning;
  if (!result.tool_calls.empty()) j["toolCalls"] = tool_calls_json(result.tool_calls);
  j["stopReason"] = result.stop_reason;
  if (!result.stop_sequence.empty()) j["stopSequence"] = result.stop_sequence;
  j["stats"] = stats_json(result.stats);
  if (!result.logprobs.empty()) j["logprobs"] = logprobs_content(result.logprobs);
  if (!result.embeddings.empty()) {
    j["embeddings"] = json::array();
    for (const std::vector<float>& e : result.embeddings) j["embeddings"].push_back(floats_base64(e));
  }
  TicketEvent::Body body;
  body.text = json_text(j);
  body.type = TicketEvent::Type::kDone;
  body.ticket_id = id;
  body.result = std::make_unique<const JobResult>(result);
  return TicketEvent::make(std::move(body));
}

TicketEvent error_event(const std::optional<std::string>& id, const NodeError& error) {
  TicketEvent::Body body;
  body.text = json_text({{"type", "error"},
                         {"ticketID", id ? json(*id) : json(nullptr)},
                         {"code", error_code_name(error.code)},
                         {"message", error.message}});
  body.type = TicketEvent::Type::kError;
  body.ticket_id = id.value_or("");
  body.error = error;
  return TicketEvent::make(std::move(body));
}

TicketEvent retry_event(const std::string& id, int attempt, const std::string& reason) {
  TicketEvent::Body body;
  body.text = json_text({{"type", "retry"}, {"ticketID", id}, {"attempt", attempt}, {"reason", reason}});
  body.type = TicketEvent::Type::kRetry;
  body.ticket_id = id;
  body.attempt = attempt;
  body.reason = reason;
  return TicketEvent::make(std::move(body));
}

}  // namespace revis::node
