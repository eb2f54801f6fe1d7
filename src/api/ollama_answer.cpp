// The answers' half of ollama_api.h: Ollama's message, response and
// embedding objects, whole or as NDJSON lines, and its errors.
#include <chrono>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "api/ollama_api.h"
#include "base/json_text.h"

namespace revis::node {
namespace {

using nlohmann::json;

std::string created_at() { return ollama_time(std::chrono::system_clock::now()); }

int64_t nanoseconds(double ms) { return static_cast<int64_t>(ms * 1e6); }

// Ollama's reasons: "stop" (the model ended, a stop string, a tool call)
// or "length" (num_predict or the context ran out).
const char* done_reason(const JobResult& r) {
  return r.stop_reason == "length" || r.stop_reason == "context" ? "length" : "stop";
}

// The counts and durations a final object carries.
void add_stats(const JobStats& s, json& out) {
  out["total_duration"] = nanoseconds(s.total_ms);
  out["load_duration"] = nanoseconds(s.load_ms);
  out["prompt_eval_count"] = s.prompt_tokens;
  out["prompt_eval_duration"] = nanoseconds(s.prefill_ms);
  out["eval_count"] = s.generated_tokens;
  out["eval_duration"] = nanoseconds(s.generate_ms);
}

// Ollama's tool call: the arguments as an object, not a JSON text.
json tool_call(const ToolCall& call, size_t index) {
  json arguments = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object()) arguments = json::object();  // calls are parsed as objects; never reached
  return {{"id", call.id}, {"function", {{"index", index}, {"name", call.name}, {"arguments", std::move(arguments)}}}};
}

json tool_calls(const JobResult& r) {
  json calls = json::array();
  for (size_t k = 0; k < r.tool_calls.size(); ++k) calls.push_back(tool_call(r.tool_calls[k], k));
  return calls;
}

class OllamaFormat : public AnswerFormat {
 public:
  OllamaFormat(bool chat, std::string model) : chat_(chat), model_(std::move(model)) {}

  StreamFraming framing() const override { return StreamFraming::kNdjson; }

  void begin(size_t, Events&) override {}
  void reasoning(size_t, std::string_view text, Events& out) override {
    if (!text.empty()) out.push_back({"", json_text(piece("", std::string(text)))});
  }
  void content(size_t, std::string_view text, std::span<const LogprobEntry>, Events& out) override {
    if (!text.empty()) out.push_back({"", json_text(piece(std::string(text), ""))});
  }
  void end(size_t, const JobResult& r, std::span<const LogprobEntry>, Events& out) override {
    // Calls are whole only at the end: they go out in one piece, as
    // Ollama sends them.
    if (chat_ && !r.tool_calls.empty()) {
      json calls = piece("", "");
      calls["message"]["tool_calls"] = tool_calls(r);
      out.push_back({"", json_text(calls)});
    }
    json last = piece("", "");
    last["done"] = true;
    last["done_reason"] = done_reason(r);
    add_stats(r.stats, last);
    out.push_back({"", json_text(last)});
  }
  void close(const JobStats&, Events&) override {}
  void failed(const NodeError& error, Events& out) override { out.push_back({"", ollama_error_for(error)}); }

  std::string response(std::span<const JobResult> choices, const JobStats&) override {
    const JobResult& r = choices.front();
    json whole = piece(r.text, r.reasoning.value_or(""));
    if (chat_ && !r.tool_calls.empty()) whole["message"]["tool_calls"] = tool_calls(r);
    whole["done"] = true;
    whole["done_reason"] = done_reason(r);
    add_stats(r.stats, whole);
    return json_text(whole);
  }
  std::string error_body(const NodeError& error) override { return ollama_error_for(error); }

 private:
  // An object with a piece of the answer and of the thinking (either may
  // be empty), not done.
  json piece(const std::string& text, const std::string& thinking) const {
    json out = {{"model", model_}, {"created_at", created_at()}};
    if (chat_) {
      out["message"] = {{"role", "assistant"}, {"content", text}};
      if (!thinking.empty()) out["message"]["thinking"] = thinking;
    } else {
      out["response"] = text;
      if (!thinking.empty()) out["thinking"] = thinking;
    }
    out["done"] = false;
    return out;
  }

  const bool chat_;
  const std::string model_;
};

class OllamaEmbedFormat : public WholeAnswerFormat {
 public:
  OllamaEmbedFormat(std::string model, bool legacy) : model_(std::move(model)), legacy_(legacy) {}

  std::string response(std::span<const JobResult> choices, const JobStats&) override {
    if (choices.empty()) return json_text({{"error", "no result"}});  // the relay always has one; never reached
    const std::vector<std::vector<float>>& vectors = choices[0].embeddings;
    const JobStats& stats = choices[0].stats;
    if (legacy_) return json_text({{"embedding", vectors.empty() ? json::array() : json(vectors[0])}});
    return json_text({{"model", model_},
                      {"embeddings", vectors},
                      {"total_duration", nanoseconds(stats.total_ms)},
                      {"load_duration", nanoseconds(stats.load_ms)},
                      {"prompt_eval_count", stats.prompt_tokens}});
  }
  std::string error_body(const NodeError& error) override { return ollama_error_for(error); }

 private:
  const std::string model_;
  const bool legacy_;
};

}  // namespace

std::unique_ptr<AnswerFormat> ollama_format(bool chat, std::string model) {
  return std::make_unique<OllamaFormat>(chat, std::move(model));
}

std::string ollama_load_response(bool chat, const std::string& model) {
  json out = {{"model", model}, {"created_at", created_at()}};
  if (chat) out["message"] = {{"role", "assistant"}, {"content", ""}};
  else out["response"] = "";
  out["done_reason"] = "load";
  out["done"] = true;
  return json_text(out);
}

std::unique_ptr<AnswerFormat> ollama_embed_format(std::string model, bool legacy) {
  return std::make_unique<OllamaEmbedFormat>(std::move(model), legacy);
}

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() % 1000000000;
  char text[48];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns < 0 ? 0 : ns));
  return text;
}

std::string ollama_error(const std::string& message) { return json_text({{"error", message}}); }

std::string ollama_error_for(const NodeError& e) { return ollama_error(e.message); }

}  // namespace revis::node
