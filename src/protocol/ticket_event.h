// The ticket protocol's server -> client events (docs/protocol.md) as they
// travel inside a node: the JSON text, which a WebSocket sends, a journal
// keeps and a peer or the broker relays, together with what it says as
// values, which the readers in this process use (the HTTP APIs' relay, the
// access log). An event made here (the functions below) keeps the values
// it was written from, so a result goes from the executor to an OpenAI
// response without being written to text and parsed back; one that arrives
// as text (a peer's, the broker's, the journal's) is read once, where it
// enters (TicketEvent::read). What is not a ticket's event (a peer's state,
// the cluster feed) is text only (TicketEvent::other).
//
// Thread-safety: an event is immutable; copies share one body, so an event
// sent to several clients or kept for resumes is not copied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "protocol/errors.h"
#include "protocol/job.h"

namespace revis::node {

class TicketEvent {
 public:
  enum class Type { kNone, kAccepted, kToken, kRetry, kDone, kError, kOther };

  TicketEvent() = default;  // kNone: no event (an unfinished ticket's final one)
  // An event that arrived as text, read here; `parsed`: its JSON, where the
  // caller has read it already. What does not read as a ticket's event is
  // kOther.
  static TicketEvent read(std::string text);
  static TicketEvent read(std::string text, const nlohmann::json& parsed);
  // Text that is no ticket's event.
  static TicketEvent other(std::string text);

  bool empty() const { return !body_; }
  const std::string& text() const;
  Type type() const;
  // The ticketID; empty when the event has none (null, or kOther).
  const std::string& ticket_id() const;

  // kToken: its seq, and a piece of the answer or, when reasoning(), of
  // the thinking; with the logprobs of the tokens sampled since the last.
  uint64_t seq() const;
  bool reasoning() const;
  const std::string& piece() const;
  std::span<const LogprobEntry> logprobs() const;
  // kDone: the result, as much of it as the event carries (all of it but
  // stats' fields that are not in docs/protocol.md).
  const JobResult& result() const;
  // kError.
  const NodeError& error() const;
  // kRetry: the new attempt's number and why.
  int attempt() const;
  const std::string& reason() const;

 private:
  struct Body;
  explicit TicketEvent(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  static TicketEvent make(Body body);

  friend TicketEvent accepted_event(const std::string& id, int position);
  friend TicketEvent token_event(const std::string& id, uint64_t seq, std::string_view text,
                                 std::span<const LogprobEntry> logprobs, bool reasoning);
  friend TicketEvent done_event(const std::string& id, const JobResult& result);
  friend TicketEvent error_event(const std::optional<std::string>& id, const NodeError& error);
  friend TicketEvent retry_event(const std::string& id, int attempt, const std::string& reason);

  std::shared_ptr<const Body> body_;
};

TicketEvent accepted_event(const std::string& id, int position);
// With logprobs (JobSpec::logprobs): those of the tokens sampled since the
// previous token event, as "logprobs" (OpenAI's chat shape: token, bytes,
// logprob, top_logprobs); done carries all of them. With `reasoning` the
// piece is thinking: "text" is empty and "reasoning" holds it.
TicketEvent token_event(const std::string& id, uint64_t seq, std::string_view text,
                        std::span<const LogprobEntry> logprobs = {}, bool reasoning = false);
// Sets callbacks.on_text and on_reasoning to hand `send` the job's token
// events, numbered from 0.
void stream_token_events(JobCallbacks& callbacks, const std::string& id, std::function<void(TicketEvent event)> send);
// An embeddings job's vectors go as "embeddings": little-endian float32 in
// base64 (base64.h), exact and a quarter the size of decimal text.
TicketEvent done_event(const std::string& id, const JobResult& result);
TicketEvent error_event(const std::optional<std::string>& id, const NodeError& error);
// The ticket runs again (attempt 2, 3, ...): text streamed so far is void
// and token seq restarts at 0.
TicketEvent retry_event(const std::string& id, int attempt, const std::string& reason);

}  // namespace revis::node
