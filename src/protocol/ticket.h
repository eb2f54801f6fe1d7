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

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/errors.h"
#include "protocol/job.h"
#include "protocol/ticket_event.h"

namespace revis::node {

// The taskType of an OpenAI call: the endpoint its body was posted to.
inline constexpr const char* kOpenAiChatTask = "chat.completions";
inline constexpr const char* kOpenAiCompletionTask = "completions";
inline constexpr const char* kOpenAiEmbeddingsTask = "embeddings";
inline constexpr std::array<const char*, 3> kOpenAiTasks = {kOpenAiChatTask, kOpenAiCompletionTask,
                                                            kOpenAiEmbeddingsTask};

// An OpenAI API request travelling as a ticket (the fabric places OpenAI
// requests like tickets; docs/fabric.md). Unlike a ticket's args, it
// carries the client's own prompt and settings, so a node accepts one only
// from a peer's dispatcher (with forwardedBy).
struct OpenAiCall {
  // The JSON body as it travels to a peer: the one the client posted,
  // verbatim (an Anthropic request's: the equivalent chat body).
  std::string body;
  std::string tier;   // the tier its `model` names on the accepting node
  uint64_t seed = 0;  // the client's seed, or one the accepting node drew: every run of it is the same
};

struct Ticket {
  std::string id;
  std::string task;  // a catalogue task; "chat.completions" or "completions" for an OpenAI call
  bool streaming = false;
  std::map<std::string, std::string> args;
  std::optional<std::string> catalog;  // the catalogue digest the client expects
  // Set by a peer's dispatcher (docs/fabric.md): the ticket runs on this
  // node and is never forwarded again.
  std::optional<std::string> forwarded_by;
  std::optional<OpenAiCall> openai;
  // What the ticket asks this node to run, or why it cannot: read once
  // where the ticket entered this node (api/ticket_job.h), so that however
  // often a desk admits it (Node::admit) no OpenAI body is parsed and no
  // catalogue template rendered again, and never under a desk's lock. Not
  // part of the message: a peer reads its own. Null for a ticket read back
  // from a journal, which admit() renders itself.
  std::shared_ptr<const Outcome<JobSpec>> job;
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
// as a heartbeat. With `cluster` (a client such as the dashboard:
// "feed": "cluster") it asks instead for the cluster view and the events
// of the tickets this node accepted (docs/protocol.md, "Following the
// cluster").
struct SubscribeRequest {
  std::string node;  // the subscriber's name, for the log
  bool cluster = false;
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
// The same for a message on a broker ticket subject (revis.tickets.<taskType>,
// docs/scale-out.md): there "type" is implied, so the original protocol's
// four fields (ticketID, taskType, isStreaming, args) make a ticket; a
// "type" that is there must still be one the protocol knows.
std::variant<ClientMessage, RejectedMessage> parse_ticket_subject_message(std::string_view text, size_t max_bytes);

// The ticket as a protocol message: what a dispatcher sends a peer (with
// catalog and forwarded_by set) and what the journal keeps.
std::string ticket_message(const Ticket& ticket);

// A ticketID: 1..128 bytes of [A-Za-z0-9._:-] (UUIDs fit).
bool valid_ticket_id(std::string_view id);

// Server -> client events: protocol/ticket_event.h.

}  // namespace revis::node
