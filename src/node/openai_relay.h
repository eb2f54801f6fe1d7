// The answer to one OpenAI API request, built from the ticket protocol's
// events for it: the fabric runs OpenAI requests as tickets, on this node
// or a peer (docs/fabric.md), and this turns what the ticket reports into
// OpenAI's response, or its Server-Sent Events.
//
// Streaming: the SSE header goes out with the first `token` (or `done`),
// not when the ticket is accepted: a request that fails before generating
// (a prompt too long for the context, a full queue, an unknown tier) gets
// its HTTP error status, as a non-streamed one does, never a 200 followed
// by an error event. Each `token` becomes a chunk, `done` the closing
// chunks. A `retry` (the node
// running it was lost) cannot be shown to an SSE client, which keeps what
// it was sent, so the new run's text is checked against that instead: the
// part already sent is swallowed and the stream goes on where it stopped.
// The new run has the same seed and model, so it agrees and the client sees
// one uninterrupted answer; should it differ, the answer ends with an error
// rather than a spliced text. An error before anything was sent becomes an
// HTTP error status. Logprobs ride on the token events, each chunk with
// those of the tokens sampled since the last; the ones a token event never
// carried (tokens whose text was held back, then cut by a stop string) come
// with the finish chunk, from `done`, which has them all.
//
// Thread-safety: none; one request, one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "node/errors.h"
#include "node/job.h"

namespace revis::node {

class OpenAiRelay {
 public:
  struct Shape {
    bool chat = true;            // /v1/chat/completions, else /v1/completions
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool logprobs = false;       // the request asked for logprobs
    std::string id, model;       // as the response shows them
    int64_t created = 0;
  };

  // What to send the client after one event, in this order.
  struct Step {
    bool open_stream = false;              // the SSE response header (200, text/event-stream)
    std::vector<std::string> events;       // SSE data payloads; "[DONE]" is the last one of a stream
    std::optional<std::string> response;   // a whole 200 JSON response (not streaming)
    std::optional<NodeError> error;        // an HTTP error response (nothing was sent yet)
    bool cancel = false;                   // the ticket's run is of no more use: cancel it
    bool finished = false;                 // the request is answered; later events are ignored
  };

  explicit OpenAiRelay(Shape shape) : shape_(std::move(shape)) {}

  // One ticket-protocol event (JSON text); another ticket's (a request made
  // earlier on the same connection) is ignored.
  Step on_event(std::string_view event);
  bool finished() const { return finished_; }

 private:
  Step end_with(const NodeError& error);
  NodeError diverged() const;
  std::string chunk(std::string_view text, const char* finish, std::span<const LogprobEntry> logprobs);

  // One stream the client is sent: the answer, or a thinking model's thinking.
  struct Sent {
    std::string text;       // what the client has
    size_t run_length = 0;  // text of the current run so far; runs before it were sent too
  };
  // The part of `piece` the client does not have; nullopt when a new run
  // disagrees with what an earlier run sent.
  static std::optional<std::string> fresh_part(Sent& sent, std::string piece);

  Shape shape_;
  bool opened_ = false, finished_ = false;
  Sent answer_, thinking_;
  size_t sent_logprobs_ = 0, run_logprobs_ = 0;  // as Sent's, counting the answer's logprob entries
  size_t logprob_bytes_ = 0;  // the sent entries' token bytes: the next text_offset
  std::string retry_reason_;
};

}  // namespace revis::node
