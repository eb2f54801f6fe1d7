// The answer to one HTTP API request (OpenAI's or Anthropic's), built from
// the ticket protocol's events for it (their values: a result made on this
// node reaches the response without a trip through JSON text): the fabric runs these requests as
// tickets, on this node or a peer (docs/fabric.md), and this turns what the
// tickets report into the API's response, or its Server-Sent Events, in
// the request's AnswerFormat (answer_format.h).
//
// Choices: a request for n answers runs as n tickets, one after another
// (one inference per machine), ticket_id(0), ticket_id(1), ...; when one is
// done the relay asks for the next (Step::next_choice), and the response or
// stream holds them all in order, with their usage together.
//
// Streaming: the SSE header goes out with the first `token` (or `done`),
// not when the ticket is accepted: a request that fails before generating
// (a prompt too long for the context, a full queue, an unknown tier) gets
// its HTTP error status, as a non-streamed one does, never a 200 followed
// by an error event. Each `token` becomes a piece of the answer, `done`
// the end of its choice. A `retry` (the node running it was lost) cannot
// be shown to an SSE client, which keeps what it was sent, so the new
// run's text is checked against that instead: the part already sent is
// swallowed and the stream goes on where it stopped. The new run has the
// same seed and model, so it agrees and the client sees one uninterrupted
// answer; should it differ, the answer ends with an error rather than a
// spliced text. An error before anything was sent becomes an HTTP error
// status. Logprobs ride on the token events, each piece with those of the
// tokens sampled since the last; the ones a token event never carried
// (tokens whose text was held back, then cut by a stop string) come with
// the choice's end, from `done`, which has them all.
//
// Thread-safety: none; one request, one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/answer_format.h"
#include "protocol/errors.h"
#include "protocol/job.h"
#include "protocol/ticket_event.h"

namespace revis::node {

class OpenAiRelay {
 public:
  struct Shape {
    bool stream = false;
    size_t choices = 1;  // n
    std::string id;      // the response's id; tickets are named after it (ticket_id)
  };

  // What to send the client after one event, in this order.
  struct Step {
    bool open_stream = false;              // the SSE response header (200, text/event-stream)
    std::vector<SseEvent> events;          // the stream's events; the format's close() ends them
    std::optional<std::string> response;   // a whole 200 JSON response (not streaming)
    std::optional<NodeError> error;        // an HTTP error response (nothing was sent yet)
    bool cancel = false;                   // the current ticket's run is of no more use: cancel it
    std::optional<size_t> next_choice;     // send the ticket of this choice now
    bool finished = false;                 // the request is answered; later events are ignored
  };

  OpenAiRelay(Shape shape, std::unique_ptr<AnswerFormat> format);

  // The ticket of choice `choice`: the response's id when there is one
  // choice, else id.0, id.1, ...
  std::string ticket_id(size_t choice) const;
  // The choice whose ticket runs now.
  size_t current_choice() const { return choice_; }

  // One ticket-protocol event, read through its values (the text is not
  // parsed again); other tickets' (a request made earlier on the same
  // connection, or an earlier choice) are ignored.
  Step on_event(const TicketEvent& event);
  bool finished() const { return finished_; }
  StreamFraming framing() const { return format_->framing(); }
  // The HTTP error body for `error` in the request's API.
  std::string error_body(const NodeError& error) const { return format_->error_body(error); }

 private:
  void end_with(const NodeError& error, Step& step);
  NodeError diverged() const;
  void on_done(const JobResult& result, Step& step);

  // One stream the client is sent: the answer, or a thinking model's thinking.
  struct Sent {
    std::string text;       // what the client has
    size_t run_length = 0;  // text of the current run so far; runs before it were sent too
  };
  // The part of `piece` the client does not have; nullopt when a new run
  // disagrees with what an earlier run sent.
  static std::optional<std::string> fresh_part(Sent& sent, std::string piece);

  const Shape shape_;
  std::unique_ptr<AnswerFormat> format_;
  bool opened_ = false, finished_ = false;
  // The current choice, and its stream state.
  size_t choice_ = 0;
  bool begun_ = false;  // its begin() went out
  Sent answer_, thinking_;
  size_t sent_logprobs_ = 0, run_logprobs_ = 0;  // as Sent's, counting the answer's logprob entries
  std::string retry_reason_;
  std::vector<JobResult> results_;  // of the choices done
};

}  // namespace revis::node
