// POST /v1/responses: OpenAI's Responses API, which the `openai` SDKs'
// responses.create, OpenAI's Agents SDK and Codex speak. The request is
// rewritten as the equivalent /v1/chat/completions request (instructions
// and input items as messages, function tools, tool_choice, text.format as
// response_format, reasoning.effort as the template's thinking switch,
// max_output_tokens, sampling), which then takes the one path every chat
// request takes (chat_request_of, a ticket, the executor: openai_api.h).
// The answer is written back in the Responses shapes: a response object
// whose output holds reasoning, message and function_call items, or its
// stream of events (response.created ... response.completed), each with
// its sequence_number.
//
// Conversations: a response made with `store` (the default) is kept in the
// node's ResponseStore with the items that led to it, and a request naming
// it as `previous_response_id` continues from there (its input follows the
// earlier conversation and output). GET and DELETE /v1/responses/{id} read
// and remove a kept one.
//
// Function tools may come grouped in namespace tools (NamespacedFunctions).
// Fields that would change the answer and that revis cannot honour
// (built-in tools, image and file inputs, background, truncation "auto",
// a stored prompt, a conversation object) are refused with a 400 naming
// them; fields that change nothing (metadata, user, service_tier, prompt
// cache keys, text.verbosity, reasoning.summary) are ignored.
// docs/api-responses.md lists every field.
//
// Thread-safety: free functions on values; the store is its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/answer_format.h"
#include "api/openai_api.h"
#include "api/response_store.h"
#include "protocol/errors.h"

namespace revis::node {

// A namespace tool's function ({type: namespace, name, tools}: Codex and
// MCP clients group tools so) is a function of the chat request named
// NAMESPACE__NAME; this maps such names back to {namespace, name}, which
// the answer's function_call items carry apart.
using NamespacedFunctions = std::map<std::string, std::pair<std::string, std::string>>;

struct ResponsesRequest {
  std::string chat_body;  // the equivalent /v1/chat/completions request body, for a peer (OpenAiCall::body)
  OpenAiRequest chat;     // the same request, read
  // The items the answer follows: previous_response_id's conversation and
  // output, then this request's input (instructions apart).
  nlohmann::json conversation = nlohmann::json::array();
  // The request's settings as the response object repeats them
  // (instructions, tools, tool_choice, text, reasoning, temperature, ...).
  nlohmann::json settings = nlohmann::json::object();
  bool store = true;
  NamespacedFunctions namespaced;
};

// Errors are bad_request with a message naming the Responses field; an
// unknown previous_response_id is one too. `store` is read for it.
Outcome<ResponsesRequest> parse_responses_request(std::string_view body, const ResponseStore& store,
                                                  const RequestLimits& limits = {});

struct ResponsesShape {
  std::string id;     // resp_...; the output items' ids are derived from it
  std::string model;  // the tier
  int64_t created = 0;
  nlohmann::json settings = nlohmann::json::object();  // ResponsesRequest::settings
  bool logprobs = false;  // include: message.output_text.logprobs
  // Where the finished response is kept with `conversation`; null: not
  // kept (store: false). A failed one is never kept.
  ResponseStore* store = nullptr;
  nlohmann::json conversation = nlohmann::json::array();
  NamespacedFunctions namespaced;  // ResponsesRequest::namespaced
};
// The answer as a response object, one choice, streamed or whole
// (answer_format.h).
std::unique_ptr<AnswerFormat> responses_format(ResponsesShape shape);

// GET /v1/responses/{id} (`remove` false) and DELETE: the HTTP status and
// body, a 404 in OpenAI's error shape for an id not kept.
struct StoredAnswer {
  int status = 200;
  std::string body;
};
StoredAnswer stored_response_request(ResponseStore& store, const std::string& id, bool remove);

}  // namespace revis::node
