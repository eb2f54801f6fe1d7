// Ollama's API (docs/api-ollama.md), which many editors and UIs speak:
// POST /api/chat, /api/generate, /api/embed and /api/embeddings. As with
// Anthropic's (anthropic_api.h), a request is rewritten as the equivalent
// OpenAI request (messages with tool calls, tools, `format` as
// response_format, `think` as the template's enable_thinking, `options` as
// sampling fields), which takes the one path every chat request takes; a
// raw /api/generate is a completions request, its prompt as it is. The
// answer is written back in Ollama's shapes: one JSON object, or its
// stream of them, one a line (NDJSON), `done: false` pieces then a final
// `done: true` object with done_reason, token counts and durations in ns.
//
// Fields that would change the answer and that revis cannot honour
// (images, a Go `template`, a generate `context` or `suffix`, mirostat,
// typical_p, tfs_z) are refused with a 400 naming them; options about
// the machine (num_gpu, num_thread, use_mmap, ...) and unknown options are
// ignored, as Ollama ignores unknown ones. Errors are {"error": "..."}.
//
// Thread-safety: free functions on values.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/answer_format.h"
#include "api/embeddings_api.h"
#include "api/openai_api.h"
#include "protocol/errors.h"

namespace revis::node {

struct OllamaRequest {
  std::string model;  // as sent; the node maps it to a tier
  bool stream = true;  // Ollama streams unless told not to
  // No messages (chat) or an empty prompt (generate): Ollama's way to
  // load a model, answered at once with done_reason "load".
  bool load_only = false;
  std::optional<int64_t> num_ctx;  // options.num_ctx: checked against the tier's context (check_num_ctx)
  std::string chat_body;  // the equivalent /v1/chat/completions (or, raw, /v1/completions) body, for a peer
  OpenAiRequest chat;     // the same request, read
};

// Errors are bad_request with a message naming the Ollama field.
Outcome<OllamaRequest> parse_ollama_chat(std::string_view body, const RequestLimits& limits = {});
Outcome<OllamaRequest> parse_ollama_generate(std::string_view body, const RequestLimits& limits = {});

// options.num_ctx asks for a context: one larger than the tier's (`ctx`,
// 0 when unknown) is a 400, as the answer could not fit what the client
// planned for; a smaller one changes nothing.
std::optional<NodeError> check_num_ctx(const OllamaRequest& request, int ctx);

// /api/embed {model, input: string or strings} and the older
// /api/embeddings {model, prompt}; `openai_body` is the equivalent
// /v1/embeddings body, for a peer.
struct OllamaEmbedRequest {
  std::string openai_body;
  EmbeddingRequest embed;
};
Outcome<OllamaEmbedRequest> parse_ollama_embed(std::string_view body, bool legacy, const RequestLimits& limits = {});

// The answer in Ollama's shapes for `model` (the tier): /api/chat's
// message objects, or /api/generate's response objects; streamed as
// NDJSON.
std::unique_ptr<AnswerFormat> ollama_format(bool chat, std::string model);
// The whole answer to a load_only request.
std::string ollama_load_response(bool chat, const std::string& model);
// /api/embed's {"model", "embeddings", ...}, or /api/embeddings' {"embedding"}.
std::unique_ptr<AnswerFormat> ollama_embed_format(std::string model, bool legacy);

// `t` in RFC 3339 with nanoseconds, UTC, as Ollama writes its times.
std::string ollama_time(std::chrono::system_clock::time_point t);

// {"error": message}; for a node error, its message.
std::string ollama_error(const std::string& message);
std::string ollama_error_for(const NodeError& e);

}  // namespace revis::node
