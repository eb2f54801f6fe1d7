// The ticket book: the tickets this node's clients sent, by ticketID,
// whatever transport runs them (fabric/dispatcher.h: this node or a peer;
// broker/desk.h: whichever node pulls it from the broker). Both ticket
// desks keep their tickets in one, so dedup, resume and kept results behave
// the same on either path.
//
//  - Dedup. One entry per ticketID: a desk looks the ID up first, and a
//    ticket sent again (from any connection) attaches to the entry instead
//    of running twice.
//  - Clients. Several client links may follow one entry; token events and
//    the final event go to each of them. A link that goes away is detached;
//    the entries it leaves without a client are the desk's to end.
//  - Resume. The token events of the current attempt are kept (event i has
//    seq i); attach() replays those after `after_seq`, or, when the ticket
//    ran again since the client's attempt, a `retry` event and all of them.
//  - Results. A finished entry that is kept (not an OpenAI request: its
//    client cannot come back) stays result_ttl, so a resend or a resume gets
//    the result; past the caps (max_results, max_bytes) the oldest go first,
//    and the newest always stays (a caller may still hold it).
//
// What runs a ticket (placement, journal, peers, subscriptions) is the
// desk's: its records derive from TicketEntry and add that state.
//
// Thread-safety: the book's mutex `mu` guards its entries, and the desk
// guards its own transport state with the same mutex (GUARDED_BY(book.mu)),
// so that a ticket's entry and its placement change together. Every method
// REQUIRES it. ClientLink::send never blocks, so events are sent under it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "node/ticket_desk.h"

namespace revis::node {

struct TicketEntry {
  virtual ~TicketEntry() = default;
  // What the desk's record holds beyond these fields (the ticket, say), as
  // counted against the kept results' max_bytes.
  virtual size_t ticket_bytes() const { return 0; }
  bool finished() const { return !terminal.empty(); }

  // Set by the desk before add().
  std::string id;
  bool kept = true;  // false: forgotten as soon as it finishes (an OpenAI request)

  // Written by the book; the desk reads them.
  int attempt = 1;
  std::vector<std::shared_ptr<ClientLink>> clients;
  std::vector<TicketEvent> events;  // token events of the current attempt; event i has seq i
  TicketEvent terminal;             // the final event (`done` or `error`), once finished
  Clock::time_point finished_at{};
  size_t kept_bytes = 0;  // finished and kept: its events' text and the ticket, as counted against max_bytes
};

struct TicketBookLimits {
  std::chrono::seconds result_ttl{0};
  size_t max_results = 0;
  size_t max_bytes = 0;
  // Whether a finished entry keeps its token events. Where the result is
  // stored elsewhere too (a journal, the broker's results stream), a resume
  // of a finished ticket gets only its final event, which holds the whole
  // text; the token events were most of what it took.
  bool keep_finished_tokens = true;
};

class TicketBook {
 public:
  using Link = std::shared_ptr<ClientLink>;
  // Called once a result is recorded and before any client hears it: a
  // desk journals it there, so that no client holds a result a restarted
  // node would not know.
  using BeforeSend = std::function<void(const TicketEntry& entry)>;

  explicit TicketBook(TicketBookLimits limits) : limits_(limits) {}

  // Guards the entries, and the desk's transport state alongside them.
  mutable Mutex mu;

  // Null when there is none (never sent, forgotten, or its result expired).
  TicketEntry* find(const std::string& id) REQUIRES(mu);
  const std::map<std::string, std::unique_ptr<TicketEntry>>& entries() const REQUIRES(mu) { return entries_; }
  // Adds an unfinished entry; its ID must not be in the book.
  TicketEntry& add(std::unique_ptr<TicketEntry> entry) REQUIRES(mu);
  // Adds a finished entry read back from a journal (`terminal`: the text
  // of its final event, read here), finished at `at`.
  void add_finished(std::unique_ptr<TicketEntry> entry, std::string terminal, Clock::time_point at) REQUIRES(mu);
  // Forgets a ticket at once (finished or not).
  void erase(const std::string& id) REQUIRES(mu);

  // Sends `link` what it missed of `entry` (see Resume; `attempt` 0: the
  // client knows of none), then the final event if there is one; otherwise
  // `link` follows it from now on. True when it follows it.
  bool attach(TicketEntry& entry, const Link& link, int attempt, int64_t after_seq) REQUIRES(mu);
  bool follows(const TicketEntry& entry, const Link& link) const REQUIRES(mu);
  // `link` no longer follows `entry` (it sent no more events to it).
  void detach(TicketEntry& entry, const Link& link) REQUIRES(mu);
  // `link` is gone: it follows nothing any more. The unfinished entries it
  // was the last client of.
  std::vector<TicketEntry*> detach_everywhere(const Link& link) REQUIRES(mu);
  // The server has stopped: no entry has a client any more.
  void detach_all() REQUIRES(mu);

  // Sends a token event to the clients and keeps it; its seq must be
  // next_seq(entry).
  void emit(TicketEntry& entry, TicketEvent event) REQUIRES(mu);
  uint64_t next_seq(const TicketEntry& entry) const REQUIRES(mu) { return entry.events.size(); }
  // Sends a token event to the clients without keeping it: one whose
  // earlier events the book never saw (the desk began following the ticket
  // in the middle of a run), so that it cannot be event seq of the entry.
  void pass(TicketEntry& entry, const TicketEvent& event) REQUIRES(mu);
  // The ticket runs again: its token events restart at seq 0, and every
  // client gets a `retry` event saying why. `attempt` is the new attempt's
  // number where the transport counts them; 0: the next one.
  void restart(TicketEntry& entry, const std::string& reason, int attempt = 0) REQUIRES(mu);
  // The run ended without a result and the desk keeps the ticket to run
  // later: its clients and token events are dropped, nothing is sent.
  void suspend(TicketEntry& entry) REQUIRES(mu);
  // Records the final event and sends it to every client. A kept entry
  // stays (see Results); any other is forgotten, so `entry` may be gone on
  // return.
  void finish(TicketEntry& entry, TicketEvent terminal, const BeforeSend& before_send = nullptr) REQUIRES(mu);

  // Forgets finished entries past result_ttl, then the oldest while more
  // than the caps are kept.
  void sweep() REQUIRES(mu);
  size_t kept_results() const REQUIRES(mu) { return kept_results_; }
  size_t kept_result_bytes() const REQUIRES(mu) { return kept_result_bytes_; }

 private:
  void keep(TicketEntry& entry) REQUIRES(mu);

  const TicketBookLimits limits_;
  std::map<std::string, std::unique_ptr<TicketEntry>> entries_ GUARDED_BY(mu);
  std::deque<std::pair<Clock::time_point, std::string>> finished_order_ GUARDED_BY(mu);  // oldest first
  size_t kept_results_ GUARDED_BY(mu) = 0;
  size_t kept_result_bytes_ GUARDED_BY(mu) = 0;
};

}  // namespace revis::node
