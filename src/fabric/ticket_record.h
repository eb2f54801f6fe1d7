// A ticket in the dispatcher's book and where it runs: the ticket book's
// entry (node/ticket_book.h) plus the fabric's transport state (this node's
// executor, a peer, the dispatcher's waiting line, a hand-off). The desk
// (fabric/dispatcher.h) creates records; it, the placer
// (fabric/ticket_placer.h) and the journal (fabric/ticket_journal.h) move
// them; the cluster feed (fabric/cluster_feed.h) shows them.
//
// Thread-safety: a record lives in the book and is read and written only
// with the book's mutex held: the functions that take one are called with
// it, and those that find one (find_record) REQUIRE it. `job` is made
// before the record enters the book.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/catalog.h"
#include "node/ticket_book.h"
#include "protocol/job.h"
#include "protocol/ticket.h"

namespace revis::fabric {

inline int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct TicketRecord : node::TicketEntry {
  // A ticket is journaled and its result kept for clients that resend or
  // resume it; an OpenAI request is neither, its HTTP client cannot come
  // back for it.
  explicit TicketRecord(node::Ticket t) : ticket(std::move(t)) {
    id = ticket.id;
    kept = !ticket.openai;
  }
  size_t ticket_bytes() const override {
    size_t bytes = sizeof(TicketRecord) - sizeof(node::TicketEntry) + ticket.task.size();
    for (const auto& [name, value] : ticket.args) bytes += name.size() + value.size();
    return bytes;
  }

  node::Ticket ticket;
  node::Clock::time_point received;
  int64_t received_unix_ms = unix_ms_now();
  // Small enough for a peer's message limit; otherwise it runs here.
  bool travels = true;
  // The job this node runs for it (Node::admit), made once outside the
  // book's lock when the ticket arrives or is read back from the journal;
  // the error when this node cannot run it (a tier only peers serve).
  // Dropped once the ticket is done.
  std::optional<node::Outcome<node::JobSpec>> job;
  // The prompt's prefix digests (Node::prompt_prefix_digests), computed
  // when a node publishes KV prefixes for its tier.
  std::optional<std::vector<std::string>> prompt_digests;
  uint64_t placement = 0;  // bumped at every placement; callbacks of an earlier one are ignored
  // kWaiting: in the desk's waiting line, for a peer (this node does not
  // serve its tier).
  // kSuspended: the node is shutting down before it ran; the journal keeps
  // it unfinished, and the next start runs it (TicketJournal::suspend).
  // kHandedOff: handed to peer `handed_to` at a shutdown; waits for that
  // peer's link to relay it (TicketPlacer::relay_handed).
  // kDone: ended; its final event is the book's `terminal`, or, until the
  // journal has written it, waits in the desk's unannounced events.
  enum class Where { kLocal, kPeer, kWaiting, kSuspended, kHandedOff, kDone } where = Where::kLocal;
  uint64_t job_id = 0;  // kLocal: the executor's job
  std::string peer;     // kPeer: which peer, on which link session
  uint64_t session = 0;
  bool cancel_requested = false;
  bool orphaned = false;  // cancelled because no client came back: not kept as a result
  uint64_t orphan_watch = 0;
  std::string handed_to;     // the peer it was handed to at a shutdown; it runs nowhere else
  bool peer_has_it = false;  // kPeer: the peer answered `accepted`
};

// The tier a ticket runs on: its task's, or the one its OpenAI call names;
// null for a task the catalogue does not have.
inline const std::string* tier_of(const node::Catalog& catalog, const node::Ticket& ticket) {
  if (ticket.openai) return &ticket.openai->tier;
  const node::Task* task = catalog.find(ticket.task);
  return task ? &task->tier : nullptr;
}

// The book's entries are records: the one for `id`, or null.
inline TicketRecord* find_record(node::TicketBook& book, const std::string& id) REQUIRES(book.mu) {
  return static_cast<TicketRecord*>(book.find(id));
}

}  // namespace revis::fabric
