// How one HTTP API writes an answer: OpenAI's chat completions and
// completions (openai_api.h), Anthropic's messages (anthropic_api.h),
// Ollama's chat and generate (ollama_api.h). The relay (openai_relay.h)
// reads a request's ticket events and calls its format with the parts of
// the answer in order; the format turns them into that API's stream
// events, or its whole response, and says how the stream is framed.
//
// A streamed answer is, for each choice in turn: begin, any mix of
// reasoning and content pieces, end; then close once. An error after the
// stream opened is `failed` instead of the rest.
//
// Thread-safety: one request's state, used by one thread.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/errors.h"
#include "protocol/job.h"

namespace revis::node {

// One Server-Sent Event: `event: name` (none when empty), then `data: data`.
struct SseEvent {
  std::string name;
  std::string data;
  bool operator==(const SseEvent&) const = default;
};

// How a stream's events go on the wire: Server-Sent Events (OpenAI,
// Anthropic), or newline-delimited JSON, one event's data a line (Ollama),
// whose event names are empty.
enum class StreamFraming { kSse, kNdjson };

class AnswerFormat {
 public:
  virtual ~AnswerFormat() = default;
  using Events = std::vector<SseEvent>;

  virtual StreamFraming framing() const { return StreamFraming::kSse; }

  // Before the first piece of choice `choice` (0, 1, ... in order).
  virtual void begin(size_t choice, Events& out) = 0;
  virtual void reasoning(size_t choice, std::string_view text, Events& out) = 0;
  // A piece of the answer with the log-probabilities of the tokens sampled
  // since the previous piece (either may be empty).
  virtual void content(size_t choice, std::string_view text, std::span<const LogprobEntry> logprobs, Events& out) = 0;
  // The choice is complete: its tool calls, its finish, and the
  // log-probabilities no piece carried.
  virtual void end(size_t choice, const JobResult& result, std::span<const LogprobEntry> unsent, Events& out) = 0;
  // After the last choice: `usage` is every choice's together (usage_of).
  virtual void close(const JobStats& usage, Events& out) = 0;
  // The stream is open and the answer cannot be completed.
  virtual void failed(const NodeError& error, Events& out) = 0;

  // Not streaming: the whole response, one choice per result.
  virtual std::string response(std::span<const JobResult> choices, const JobStats& usage) = 0;
  // Not streaming, or before the stream opened: an HTTP error's body.
  virtual std::string error_body(const NodeError& error) = 0;
};

// An answer that is never streamed (embeddings): the relay calls only
// response() and error_body().
class WholeAnswerFormat : public AnswerFormat {
 public:
  void begin(size_t, Events&) override {}
  void reasoning(size_t, std::string_view, Events&) override {}
  void content(size_t, std::string_view, std::span<const LogprobEntry>, Events&) override {}
  void end(size_t, const JobResult&, std::span<const LogprobEntry>, Events&) override {}
  void close(const JobStats&, Events&) override {}
  void failed(const NodeError&, Events&) override {}
};

}  // namespace revis::node
