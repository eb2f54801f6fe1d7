// The dispatcher: where every ticket a node accepts is placed, and how it
// is seen through to exactly one result. It is the node's TicketDesk (the
// server hands it the ticket protocol) and the node's side of the fabric:
// a thin desk that composes the ticket book (node/ticket_book.h) with the
// parts that do the work:
//
//  - the ticket placer (fabric/ticket_placer.h): where a ticket runs, this
//    node or a peer, and when a waiting one moves to a peer that frees up;
//  - the peer set (fabric/peer_set.h): peers and their links, discovery,
//    heartbeats, this node's state as its peers hear it;
//  - the ticket journal (fabric/ticket_journal.h): the SQLite record of
//    the tickets, suspend and hand-off at a shutdown, restore at start-up;
//  - the cluster feed (fabric/cluster_feed.h): what the dashboard hears.
//
// The desk itself takes the ticket protocol's messages, the executor's and
// the peers' events about tickets, and decides each ticket's life:
//
//  - Peers. Tickets forwarded to a peer are marked `forwardedBy` so the
//    peer runs them itself. Tickets that arrive so marked run here, never
//    elsewhere, and end when their connection ends.
//  - Failures. When a forwarded run fails (the link drops, the heartbeat
//    stops, the peer errs or shuts down), the ticket runs again elsewhere
//    (at most max_attempts runs); its clients get a `retry` event and the
//    token seq restarts at 0.
//  - Exactly once. Tickets are kept by ticketID in the ticket book (shared
//    with the broker's desk): the same ID sent again (from any connection)
//    or a `resume` attaches to the one ticket instead of running it twice;
//    finished results are kept for result_ttl_s. With a journal, accepted
//    tickets survive a restart of this node: a kill leaves them unfinished
//    in it, and so does a graceful shutdown (SIGTERM) for every ticket that
//    has not finished by then (suspend()). OpenAI requests are neither kept
//    nor journaled: their client cannot come back.
//  - Hand-off. At a graceful shutdown with a journal, tickets that have not
//    started here go to a live peer that serves their tier, as plain
//    tickets: the peer keeps, journals and runs them even once this node's
//    link is gone (a peer's link leaves no orphans). The journal notes the
//    peer; after a restart this node sends such a ticket to that peer again
//    (the same ID: it attaches to the one there, or runs it if the peer
//    never got it) and relays its events, instead of running it twice.
//
// Thread-safety: the book's mutex (book_.mu) guards the book's state and
// only that: the tickets (TicketRecord: where each runs), the waiting
// line, the events waiting for the journal, and the desk's flags. The
// members are declared GUARDED_BY it, the helpers that need it REQUIRES
// it, and the parts' methods that move records REQUIRES(book.mu) of the
// book they are handed, so clang checks every access (-Wthread-safety).
// The parts have locks of their own, taken after the book's, never before
// it. Entry points run on the server's threads, the executor's thread and
// the dispatcher's I/O thread (peer links, timers, discovery events); each
// takes the book's lock through a DeskLock.
//
// Outside the book's lock run:
//  - Node::admit (rendering a task, parsing an OpenAI body) and the prompt's
//    prefix digests (tokenizing it): once per ticket, when it arrives or is
//    read back from the journal, before the lock is taken (prepare()); the
//    job is kept with the record for every later placement here. admit_job
//    is the desk's one call of Node::admit.
//  - SQLite. The desk queues each write under the lock, in the order of its
//    decisions, and the journal writes the queue once the lock is released
//    (DeskLock, settle()). This is safe because an event that must not
//    precede its write (the `accepted` of a journaled ticket, a journaled
//    result) is not sent under the lock but held in unannounced_ until the
//    write is on disk, then sent in order, and before the entry point that
//    caused it returns (so a connection's next message finds its client
//    attached). Meanwhile the record is already kDone (or placed), so
//    nothing else acts on it; a journaled ticket's first client is attached
//    when its `accepted` goes out, and the book replays what the ticket
//    emitted before. Journal reads (a result no longer in RAM, the restore
//    at start-up) happen before the lock is taken, and the book is looked
//    at again under it. A shutdown's hand-off notes are written with the
//    lock released too, before the tickets leave; meanwhile they are
//    kHandedOff, which nothing moves while the node shuts down.
//  - Executor calls that may call back (cancel).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "fabric/cluster_feed.h"
#include "fabric/peer_set.h"
#include "fabric/ticket_journal.h"
#include "fabric/ticket_placer.h"
#include "fabric/ticket_record.h"
#include "node/linked_runs.h"
#include "node/node.h"
#include "node/ticket_book.h"
#include "node/ticket_desk.h"

namespace boost::asio {
class io_context;
}

namespace revis::fabric {

class Dispatcher : public node::TicketDesk {
 public:
  // Opens the journal (config.journal) and hooks into the node's executor;
  // peers are contacted once the server listens (on_listening).
  static Result<std::unique_ptr<Dispatcher>> create(node::Node& node);
  ~Dispatcher() override;

  void on_ticket(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received) override;
  void on_cancel(const std::shared_ptr<node::ClientLink>& from, const std::string& id) override;
  void on_resume(const std::shared_ptr<node::ClientLink>& from, const node::ResumeRequest& request) override;
  void on_subscribe(const std::shared_ptr<node::ClientLink>& from, const node::SubscribeRequest& request) override;
  void on_disconnect(const std::shared_ptr<node::ClientLink>& from) override;
  std::string cluster_json() override;
  void on_listening(int port) override;
  void on_shutdown() override;
  void on_stopped() override;

 private:
  using Record = TicketRecord;
  using Link = std::shared_ptr<node::ClientLink>;
  class DeskLock;
  // An event held until the journal has written `write` (see the top).
  struct Unannounced {
    TicketJournal::Write write = 0;
    std::string id;
    Link client;           // set: its `accepted` (at `position`), then it follows the ticket
    int position = 0;
    node::TicketEvent terminal;  // otherwise: the ticket's final event
  };

  Dispatcher(node::Node& node, std::unique_ptr<TicketJournal> journal);

  // The one call of Node::admit: the job a ticket asks of this node.
  node::Outcome<node::JobSpec> admit_job(const node::Ticket& ticket, node::Clock::time_point received) const
      EXCLUDES(book_.mu);
  // A new ticket's job and prefix digests, made before the lock is taken.
  void prepare(Record& rec) const EXCLUDES(book_.mu);
  // The same ticketID again, on `from`: the one ticket, not a second run.
  void attach_again(Record& rec, const Link& from) REQUIRES(book_.mu);

  // TicketPlacer::place, unless the node is shutting down.
  node::Outcome<int> place(Record& rec, bool first) REQUIRES(book_.mu);
  void run_local_pinned(const Link& from, node::Ticket ticket, node::Clock::time_point received) EXCLUDES(book_.mu);
  // At shutdown: tickets not started here go to live peers (see Hand-off),
  // chosen under the lock and noted after it (TicketJournal), sent here (or
  // suspended, if the note failed).
  void send_hand_offs(const std::vector<TicketJournal::HandOff>& hand_offs) REQUIRES(book_.mu);

  void retry(Record& rec, const std::string& reason) REQUIRES(book_.mu);
  void finish(Record& rec, node::TicketEvent terminal) REQUIRES(book_.mu);
  void announce(Unannounced& event) REQUIRES(book_.mu);
  // Writes what the journal has queued, then sends the events that waited
  // for it (see the top).
  void settle() EXCLUDES(book_.mu);
  // During shutdown, with a journal: TicketJournal::suspend.
  bool suspend(Record& rec) REQUIRES(book_.mu);
  // Forgets a ticket, in the journal too.
  void drop(const std::string& id) REQUIRES(book_.mu);
  // The book's entries are Records: the one for `id` (null: none), and all.
  Record* record(const std::string& id) REQUIRES(book_.mu);
  std::vector<Record*> all_records() const REQUIRES(book_.mu);
  // A ticket this node no longer holds in RAM, answered from the journal
  // when it finished there within result_ttl_s: true when it was.
  bool answer_from_journal(const Link& link, const std::string& id, bool resent) EXCLUDES(book_.mu);
  void restore_from_journal() EXCLUDES(book_.mu);
  void attach(Record& rec, const Link& link, int attempt, int64_t after_seq) REQUIRES(book_.mu);
  void emit_token(Record& rec, std::string_view piece, std::span<const node::LogprobEntry> logprobs = {},
                  bool reasoning = false) REQUIRES(book_.mu);
  void watch_orphan(Record& rec) REQUIRES(book_.mu);
  // Cancels a ticket wherever it runs; the job id to cancel locally (after
  // unlocking), or 0.
  uint64_t cancel_ticket(Record& rec) REQUIRES(book_.mu);
  // To the cluster feed: the view, and a ticket's state whenever it changes.
  void publish_cluster() REQUIRES(book_.mu);
  void publish(const Record& rec) REQUIRES(book_.mu);

  void on_local_text(const std::string& id, uint64_t placement, std::string_view piece,
                     std::span<const node::LogprobEntry> logprobs, bool reasoning) EXCLUDES(book_.mu);
  void on_local_finish(const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome) EXCLUDES(book_.mu);
  void on_executor_change() EXCLUDES(book_.mu);
  // The peer links' events (PeerSet::Events).
  void on_peer_up(const std::string& key, uint64_t link_id, uint64_t session) EXCLUDES(book_.mu);
  void on_peer_message(const std::string& key, uint64_t link_id, uint64_t session, const std::string& text) EXCLUDES(book_.mu);
  void on_peer_ticket_event(const std::string& key, uint64_t session, const std::string& type, const nlohmann::json& j,
                            const std::string& text) REQUIRES(book_.mu);
  void on_peer_down(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why) EXCLUDES(book_.mu);

  node::Node& node_;
  const node::NodeConfig& config_;
  const std::unique_ptr<boost::asio::io_context> io_;
  std::thread io_thread_;

  node::TicketBook book_;
  CondVar handed_over_;  // a peer answered about a ticket, or a link dropped
  std::deque<std::string> waiting_ GUARDED_BY(book_.mu);  // tickets for tiers only peers serve, oldest first
  std::deque<Unannounced> unannounced_ GUARDED_BY(book_.mu);  // in write order
  std::set<std::string> running_labels_ GUARDED_BY(book_.mu);  // the executor's running jobs, as last seen
  bool shutting_down_ GUARDED_BY(book_.mu) = false;
  bool started_ GUARDED_BY(book_.mu) = false;

  // The parts, each with its own lock (see the top).
  PeerSet peers_;
  TicketPlacer placer_;
  const std::unique_ptr<TicketJournal> journal_;  // null without --journal
  ClusterFeed feed_;
  node::LinkedRuns pinned_;  // forwarded here, run for the peer's link
};

}  // namespace revis::fabric
