// POST /v1/messages (and /v1/messages/count_tokens): Anthropic's Messages
// API, which coding agents speak.
// The request is rewritten as the equivalent /v1/chat/completions request
// (system prompt, messages with tool_use and tool_result blocks, tools with
// their input_schema, tool_choice, stop_sequences, sampling), which then
// takes the one path every chat request takes: read as a chat request
// (chat_request_of: the JSON object, not its text again), a ticket, the
// executor (openai_api.h). The answer is written back in
// Anthropic's shapes: a message whose content holds thinking, text and
// tool_use blocks, or that message's stream of events (message_start,
// content_block_start/delta/stop, message_delta, message_stop).
//
// Fields that would change the answer and that revis cannot honour (images
// and documents, server tools, a thinking budget, a final assistant message
// to continue, ...) are refused with a 400 naming them; fields that change
// nothing (metadata, cache_control, service_tier) are ignored.
//
// Thread-safety: free functions on values.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "api/answer_format.h"
#include "api/openai_api.h"
#include "protocol/errors.h"

namespace revis::node {

struct MessagesRequest {
  std::string chat_body;  // the equivalent /v1/chat/completions request body, for a peer (OpenAiCall::body)
  OpenAiRequest chat;     // the same request, read
};

// Errors are bad_request with a message naming the Anthropic field.
Outcome<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits = {});
// The same, read into a JSON object already.
Outcome<MessagesRequest> messages_request_of(const nlohmann::json& body, const RequestLimits& limits = {});
// POST /v1/messages/count_tokens: a messages body whose max_tokens may be
// left out; the prompt it would make is counted (prompt_count.h). The
// request is read with max_tokens 1 and no stream, for a count that has
// to run it.
Outcome<MessagesRequest> parse_count_tokens_request(std::string_view body, const RequestLimits& limits = {});

// The answer as Anthropic's message `id` from `model` (the tier), one
// choice, streamed or whole (answer_format.h).
std::unique_ptr<AnswerFormat> anthropic_format(std::string id, std::string model);

// count_tokens' answer: {"input_tokens": n}; and that answer from a run
// of the request, the prompt its answer reports.
std::string count_tokens_response(int input_tokens);
std::unique_ptr<AnswerFormat> count_tokens_format();

// {"type": "error", "error": {"type", "message"}}; for a node error, the
// type for the HTTP status http_status_for() gives.
std::string anthropic_error(const std::string& type, const std::string& message);
std::string anthropic_error_for(const NodeError& e);

}  // namespace revis::node
