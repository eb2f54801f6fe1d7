// The OpenAI-compatible HTTP API's JSON: parsing /v1/chat/completions and
// /v1/completions requests, and writing responses, SSE chunks, model lists
// and errors in OpenAI's shapes, so that official client libraries work
// unchanged.
//
// Unlike tickets, these are direct calls: the client chooses temperature,
// top_p, max_tokens, stop, seed, logit_bias, logprobs, and the shape of the
// output (response_format json_object / json_schema, or llama.cpp's GBNF
// `grammar`), which is compiled here so that a bad grammar or schema is a
// 400 naming the field. Fields OpenAI defines that revis cannot honour are
// refused when they would change the answer (n > 1, audio, non-text
// content, ...) and ignored otherwise (user, store, metadata, ...), because
// clients send many of them by default. Tools (tools, tool_choice,
// parallel_tool_calls, assistant tool_calls, role "tool") go through the
// chat template, and the output is read for calls (tool_calls.h).
// docs/protocol.md lists every field.
//
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar.h"
#include "node/chat_template.h"
#include "node/errors.h"
#include "node/job.h"
#include "revis/sampling.h"

namespace revis::node {

struct OpenAiRequest {
  bool chat = true;
  std::string model;                  // as sent; the server maps it to a tier
  std::vector<ChatMessage> messages;  // chat
  ChatOptions chat_options;           // chat: template variables (enable_thinking, ...) and tools
  ToolRequest tool_use;               // chat: tool_choice, parallel_tool_calls
  std::string prompt;                 // completions
  int max_tokens = 0;                 // 0: until the context is full
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::shared_ptr<const Grammar> grammar;  // response_format or grammar; null: free text
  bool logprobs = false;
  int top_logprobs = 0;  // chat: top_logprobs; completions: the integer logprobs
};

// Errors are bad_request with a message naming the field.
Outcome<OpenAiRequest> parse_chat_request(std::string_view body);
Outcome<OpenAiRequest> parse_completion_request(std::string_view body);

// "stop" or "length" from the executor's stop reason.
const char* finish_reason(const std::string& stop_reason);

// Responses and chunks carry "logprobs": null, or, when `logprobs` (the
// request asked for them), those of the tokens given: OpenAI's
// {"content": [...]} for chat, {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"} for completions, whose offsets start at `text_offset`.
std::string chat_response(const std::string& id, const std::string& model, int64_t created, const JobResult& r,
                          bool logprobs = false);
// One chat.completion.chunk; role only in the first, finish_reason only in the last.
std::string chat_chunk(const std::string& id, const std::string& model, int64_t created, bool with_role,
                       std::string_view content, const char* finish, bool logprobs = false,
                       std::span<const LogprobEntry> entries = {});
// A chunk of a thinking model's thinking (delta.reasoning_content).
std::string chat_reasoning_chunk(const std::string& id, const std::string& model, int64_t created,
                                 std::string_view reasoning);
// A chunk with one whole tool call (delta.tool_calls[0] with its index in
// the answer's calls, id, type, function name and arguments).
std::string chat_tool_call_chunk(const std::string& id, const std::string& model, int64_t created, size_t index,
                                 const ToolCall& call);
// "tool_calls" when the answer made calls, else finish_reason().
const char* chat_finish_reason(const JobResult& r);
std::string completion_response(const std::string& id, const std::string& model, int64_t created, const JobResult& r,
                                bool logprobs = false);
std::string completion_chunk(const std::string& id, const std::string& model, int64_t created, std::string_view text,
                             const char* finish, bool logprobs = false, std::span<const LogprobEntry> entries = {},
                             size_t text_offset = 0);

// Logprob entries as OpenAI's chat shape ([{token, bytes, logprob,
// top_logprobs: [{token, bytes, logprob}]}]), which the ticket protocol
// carries too, and back (bytes win over token; malformed items are skipped).
nlohmann::json logprobs_content(std::span<const LogprobEntry> entries);
std::vector<LogprobEntry> logprobs_from_content(const nlohmann::json& content);
// Tool calls as the ticket protocol's done carries them ([{id, name,
// arguments}]), and back (malformed items are skipped).
nlohmann::json tool_calls_json(std::span<const ToolCall> calls);
std::vector<ToolCall> tool_calls_from_json(const nlohmann::json& calls);
// The final chunk with usage and no choices (stream_options.include_usage).
std::string usage_chunk(bool chat, const std::string& id, const std::string& model, int64_t created, const JobStats& s);

// {"error":{"message","type","param","code"}}
std::string openai_error(const std::string& message, const std::string& type, const std::string& code);
// The HTTP status and OpenAI error type for a node error.
int http_status_for(ErrorCode code);
std::string openai_error_for(const NodeError& e);

std::string models_list(const std::vector<std::string>& ids, int64_t created, const std::string& owner);
// GET /v1/models/{id}: the model object of `id`, one of `ids`; none when
// the node serves no model of that name.
std::optional<std::string> model_entry(const std::vector<std::string>& ids, const std::string& id, int64_t created,
                                       const std::string& owner);

}  // namespace revis::node
