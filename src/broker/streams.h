// The wire contract of revis on NATS JetStream (docs/scale-out.md): stream,
// subject and consumer names, and the creation or verification of the two
// streams and of the per-task pull consumers.
//
//   REVIS_TICKETS  revis.tickets.<taskType>   work-queue retention, file
//                  storage, a duplicate window; a ticket is the WebSocket
//                  `ticket` JSON, published with Nats-Msg-Id: <ticketID>.
//                  Its description records the catalogue digest of the
//                  nodes that pull from it.
//   REVIS_RESULTS  revis.results.<ticketID>   limits retention, max age; the
//                  final `done` or `error` event, Nats-Msg-Id: <ticketID>.
//   revis.events.<ticketID>                   core NATS: token events.
//   revis.cancel.<ticketID>                   core NATS: stop that run.
//
// A stream or consumer that exists with another configuration is an error
// that names the field, the value found and the value expected; revis never
// changes it.
//
// Thread-safety: free functions; the Connection serializes.
#pragma once

#include <cstdint>
#include <string>

#include "broker/connection.h"

namespace revis::broker {

inline constexpr const char* kTicketStream = "REVIS_TICKETS";
inline constexpr const char* kResultStream = "REVIS_RESULTS";

std::string ticket_subject(const std::string& task);
std::string result_subject(const std::string& ticket_id);
std::string event_subject(const std::string& ticket_id);
// revis.cancel.<ticketID> (core NATS, empty body): stops that ticket's run.
std::string cancel_subject(const std::string& ticket_id);
// The advisory JetStream sends when a ticket reached its consumer's max
// deliver (any consumer of REVIS_TICKETS).
inline constexpr const char* kMaxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.REVIS_TICKETS.*";
// The durable consumer of a task type: its name with '.' as '_'
// ("chat.completions" -> "chat_completions").
std::string consumer_name(const std::string& task);
// Whether a task name can be a subject token and a consumer name.
bool valid_task_name(const std::string& task);

struct StreamSettings {
  int64_t duplicate_window_ms = 10 * 60 * 1000;       // REVIS_TICKETS: same Nats-Msg-Id within it is stored once
  int64_t results_max_age_ms = 24 * 60 * 60 * 1000;   // REVIS_RESULTS: results are kept this long
  int replicas = 1;  // copies of each stream in a NATS cluster (3: one server may die)
};

// Creates both streams if missing, verifies them if present. Returns the
// catalogue digest REVIS_TICKETS records ("" when none is recorded yet).
Result<std::string> ensure_streams(Connection& conn, const StreamSettings& settings);
// For clients: creates missing streams with `settings`, and takes existing
// ones as they are (the nodes verify them).
Status ensure_streams_exist(Connection& conn, const StreamSettings& settings);
// Records `digest` in REVIS_TICKETS when it records none; returns the
// digest recorded afterwards (another node's, if it was first).
Result<std::string> record_catalog(Connection& conn, const std::string& digest);

struct ConsumerSettings {
  int64_t ack_wait_ms = 30000;  // an unacknowledged ticket is redelivered after this (InProgress restarts it)
  int max_deliver = 5;          // deliveries of one ticket before JetStream gives up on it
  int max_ack_pending = 1000;   // tickets out at once over all nodes of the consumer
};

// Creates the durable pull consumer of `task` if missing, verifies it if present.
Status ensure_consumer(Connection& conn, const std::string& task, const ConsumerSettings& settings);

// Messages stored in `stream` now.
Result<uint64_t> stream_messages(Connection& conn, const std::string& stream);

struct ConsumerStats {
  uint64_t pending = 0;      // tickets not yet delivered
  int64_t ack_pending = 0;   // delivered, not yet acknowledged
  int64_t redelivered = 0;   // delivered more than once, not yet acknowledged
  int64_t waiting = 0;       // pull requests waiting (idle nodes)
};
Result<ConsumerStats> consumer_stats(Connection& conn, const std::string& task);

}  // namespace revis::broker
