// The ticket protocol's messages (docs/protocol.md): parsing what a client
// sends on /v1/revis/stream and writing what the node answers.
//
// Parsing is strict, because a ticket is a contract between machines: the
// message must be one JSON object of at most `max_bytes` bytes, with exactly
// the documented fields and types (unknown fields are refused, args values
// must be strings). Whatever is wrong, the error names the field.
//
// Thread-safety: free functions on values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "node/errors.h"
#include "node/job.h"

namespace revis::node {

struct Ticket {
  std::string id;
  std::string task;
  bool streaming = false;
  std::map<std::string, std::string> args;
  std::optional<std::string> catalog;  // the catalogue digest the client expects
  // Set by a peer's dispatcher (docs/fabric.md): the ticket runs on this
  // node and is never forwarded again.
  std::optional<std::string> forwarded_by;
};

struct CancelRequest {
  std::string id;
};

// Re-attaches a connection to a ticket sent earlier (perhaps on a lost
// connection): events of `attempt` after `after_seq` are sent again, then the
// live ones. A client that saw another attempt first hears `retry`.
struct ResumeRequest {
  std::string id;
  int attempt = 0;         // 0: none seen
  int64_t after_seq = -1;  // -1: none seen
};

// A peer asks for this node's state, pushed at once, on every change, and
// as a heartbeat.
struct SubscribeRequest {
  std::string node;  // the subscriber's name, for the log
};

using ClientMessage = std::variant<Ticket, CancelRequest, ResumeRequest, SubscribeRequest>;

// A message that could not be accepted: the error to send back, and the
// ticketID when one could be read from it (else the reply carries null).
struct RejectedMessage {
  NodeError error;
  std::optional<std::string> ticket_id;
};

// Parses one WebSocket text message. Sizes above max_bytes give too_long;
// everything else wrong gives bad_request.
std::variant<ClientMessage, RejectedMessage> parse_client_message(std::string_view text, size_t max_bytes);

// A ticketID: 1..128 bytes of [A-Za-z0-9._:-] (UUIDs fit).
bool valid_ticket_id(std::string_view id);

// Server -> client events, one JSON text each.
std::string accepted_event(const std::string& id, int position);
std::string token_event(const std::string& id, uint64_t seq, std::string_view text);
std::string done_event(const std::string& id, const JobResult& result);
std::string error_event(const std::optional<std::string>& id, const NodeError& error);
// The ticket runs again (attempt 2, 3, ...): text streamed so far is void
// and token seq restarts at 0.
std::string retry_event(const std::string& id, int attempt, const std::string& reason);

}  // namespace revis::node
