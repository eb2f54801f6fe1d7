// A job: one inference the executor runs, whoever asked for it (a ticket on
// the WebSocket, or an OpenAI-style HTTP request). The front ends turn their
// requests into a JobSpec; the executor turns a JobSpec into text and
// JobStats and reports through JobCallbacks. It is the contract between the
// front door (net/, api/, the ticket protocol) and the node, so it lives in
// protocol/.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "protocol/errors.h"
#include "revis/sampling.h"

namespace revis::node {

using Clock = std::chrono::steady_clock;

// One input of an embeddings job: text (tokenized as the model asks, BOS
// included, control-token texts as plain text), or token ids as they are.
using EmbeddingInput = std::variant<std::string, std::vector<int32_t>>;

struct JobSpec {
  std::string source;  // "ticket" or "openai" (metrics label)
  std::string label;   // ticketID or request id, for status and logs
  std::string task;    // task name, or "chat.completions" / "completions" / "embeddings"
  std::string tier;    // resolved against the node's tiers by the executor
  bool raw = false;    // prompt is used as is; otherwise messages go through the chat template
  std::vector<ChatMessage> messages;
  ChatOptions chat_options;  // extra template variables (enable_thinking, ...) and tools
  ToolRequest tool_use;      // with chat_options.tools: tool_choice, parallel_tool_calls
  std::string prompt;
  std::vector<TextSpan> prompt_literals;  // raw: byte ranges of `prompt` that are plain text (a task's arguments)
  int max_tokens = 256;  // <= 0: until the context is full
  SamplingParams sampling;
  std::vector<std::string> stop;
  // The output must be a sentence of this grammar (response_format, the
  // `grammar` field); null: any text.
  std::shared_ptr<const Grammar> grammar;
  bool logprobs = false;  // report each generated token's log-probability
  int top_logprobs = 0;   // with logprobs: the most likely alternatives per token, 0..20
  bool lookup = false;    // speculative decoding with prompt lookup, whatever the tier says (the task asks)
  // Not empty: an embeddings job. Nothing is generated; the result holds
  // each input's embedding (JobResult::embeddings) and the sampling and
  // prompt fields above are unused.
  std::vector<EmbeddingInput> embed;
  Clock::time_point received = Clock::now();  // when the request arrived (queue wait, overhead)
};

struct JobStats {
  int prompt_tokens = 0;
  int cached_tokens = 0;      // prompt tokens resumed from the KV cache (RAM or disk), not evaluated
  int generated_tokens = 0;
  int draft_tokens = 0;       // speculative decoding: tokens drafted and verified,
  int accepted_tokens = 0;    // and those of them kept
  double load_ms = 0;         // model load this job waited for (0 when already loaded)
  double queue_wait_ms = 0;   // received -> the executor picked it up
  double prefill_ms = 0;
  double generate_ms = 0;     // first sampled token -> last
  double prefill_tok_s = 0;
  double gen_tok_s = 0;
  double ttft_ms = 0;         // received -> first token sampled
  double total_ms = 0;        // received -> finished
  // Executor time line, in ms since the node started: strictly ordered jobs
  // have started_ms >= the previous job's finished_ms.
  double started_ms = 0, finished_ms = 0;
  uint64_t exec_index = 0;    // 1 for the first job the executor ran, 2 for the next, ...
  uint64_t seed = 0;
  std::string node, tier, model, model_digest, catalog_digest, chat_template;
  std::string engine = "gguf";  // "sim" for the simulated engine: its text means nothing
};

// One generated token's log-probability (JobSpec::logprobs), with the
// alternatives; `token` holds its bytes (perhaps part of a UTF-8 character).
struct TokenChoice {
  std::string token;
  float logprob = 0;
};
struct LogprobEntry {
  TokenChoice chosen;
  std::vector<TokenChoice> top;  // best first
};

struct JobResult {
  std::string text;                      // the answer
  std::optional<std::string> reasoning;  // the thinking, for a chat job whose template thinks
  std::vector<ToolCall> tool_calls;      // for a chat job given tools: the calls in the output (not in text)
  std::string stop_reason;  // "eog", "length", "stop", "context"
  std::string stop_sequence;  // with "stop": the stop string that ended the answer (empty: a grammar did)
  std::vector<LogprobEntry> logprobs;  // with JobSpec::logprobs: every token but an end-of-generation one
  // An embeddings job's: per input, the mean over its tokens of the model's
  // final hidden state, scaled to length 1 (Session::mean_hidden_state).
  std::vector<std::vector<float>> embeddings;
  JobStats stats;
};

// Callbacks run on the executor thread, except that on_finish runs on the
// canceller's thread for a job cancelled while queued. They must be quick
// and must not call back into the executor under its lock (the server only
// posts work to its I/O thread).
struct JobCallbacks {
  // Streamed UTF-8 pieces of the answer, each with the log-probabilities
  // (JobSpec::logprobs) of the tokens sampled since the previous piece; may
  // be empty.
  std::function<void(std::string_view text, std::span<const LogprobEntry> logprobs)> on_text;
  std::function<void(std::string_view text)> on_reasoning;  // streamed pieces of the thinking; may be empty
  std::function<void(Outcome<JobResult> outcome)> on_finish;  // exactly once per accepted job
};

}  // namespace revis::node
