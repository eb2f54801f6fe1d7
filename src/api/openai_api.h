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
// refused when they would change the answer (audio, non-text content,
// ...) and ignored otherwise (user, store, metadata, ...), because
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

#include "api/answer_format.h"
#include "chat/chat_template.h"
#include "grammar/grammar.h"
#include "protocol/errors.h"
#include "protocol/job.h"
#include "protocol/request_limits.h"
#include "protocol/result_json.h"  // the logprobs and tool calls an answer carries
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
  int n = 1;                          // choices, each its own run (1..kMaxChoices)
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::shared_ptr<const Grammar> grammar;  // response_format or grammar; null: free text
  bool logprobs = false;
  int top_logprobs = 0;  // chat: top_logprobs; completions: the integer logprobs
};

// The most choices (`n`) one request may ask for: they run one after
// another, so a large n holds the machine for n answers.
inline constexpr int kMaxChoices = 16;

// A request body that must be one JSON object; bad_request otherwise.
Outcome<nlohmann::json> parse_request_object(std::string_view body, const RequestLimits& limits = {});

// Errors are bad_request with a message naming the field.
Outcome<OpenAiRequest> parse_chat_request(std::string_view body, const RequestLimits& limits = {});
Outcome<OpenAiRequest> parse_completion_request(std::string_view body, const RequestLimits& limits = {});
// A chat request already read into a JSON object (an Anthropic request
// rewritten as one, anthropic_api.h, ollama_api.h): parse_chat_request
// without the parse.
Outcome<OpenAiRequest> chat_request_of(const nlohmann::json& body, const RequestLimits& limits = {});
// The same for a completions request (an Ollama raw generate, ollama_api.h).
Outcome<OpenAiRequest> completion_request_of(const nlohmann::json& body, const RequestLimits& limits = {});

// The seed of choice `choice` of a request whose seed is `seed`: choice 0
// keeps it (n = 1 answers as before), the others get distinct seeds derived
// from it, so their answers differ and each is reproducible.
uint64_t choice_seed(uint64_t seed, size_t choice);

// "stop" or "length" from the executor's stop reason.
const char* finish_reason(const std::string& stop_reason);

// What every chunk of one streamed answer repeats, and the choice a chunk
// belongs to (its choices[0].index).
struct ChunkHead {
  std::string id, model;
  int64_t created = 0;
  size_t choice = 0;
};

// Responses and chunks carry "logprobs": null, or, when `logprobs` (the
// request asked for them), those of the tokens given: OpenAI's
// {"content": [...]} for chat, {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"} for completions, whose offsets start at `text_offset`.
// A response has one choice per result, indexed in order; its usage is
// `usage` (usage_of()).
std::string chat_response(const std::string& id, const std::string& model, int64_t created,
                          std::span<const JobResult> choices, const JobStats& usage, bool logprobs = false);
// One chat.completion.chunk; role only in a choice's first, finish_reason only in its last.
std::string chat_chunk(const ChunkHead& head, bool with_role, std::string_view content, const char* finish,
                       bool logprobs = false, std::span<const LogprobEntry> entries = {});
// A chunk of a thinking model's thinking (delta.reasoning_content).
std::string chat_reasoning_chunk(const ChunkHead& head, std::string_view reasoning);
// A chunk with one whole tool call (delta.tool_calls[0] with its index in
// the answer's calls, id, type, function name and arguments).
std::string chat_tool_call_chunk(const ChunkHead& head, size_t index, const ToolCall& call);
// "tool_calls" when the answer made calls, else finish_reason().
const char* chat_finish_reason(const JobResult& r);
std::string completion_response(const std::string& id, const std::string& model, int64_t created,
                                std::span<const JobResult> choices, const JobStats& usage, bool logprobs = false);
std::string completion_chunk(const ChunkHead& head, std::string_view text, const char* finish, bool logprobs = false,
                             std::span<const LogprobEntry> entries = {}, size_t text_offset = 0);

// The answer in OpenAI's shapes (answer_format.h): chat.completion and its
// chunks, or text_completion; streamed, a usage chunk at the end when
// include_usage, then "[DONE]".
struct OpenAiShape {
  bool chat = true;
  std::string id, model;
  int64_t created = 0;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // the request asked for logprobs
};
std::unique_ptr<AnswerFormat> openai_format(OpenAiShape shape);

// The usage of a request's choices together: the prompt once (every choice
// has the same), the generated tokens of all.
JobStats usage_of(std::span<const JobResult> choices);

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
