// The dispatcher: where every ticket a node accepts is placed, and how it
// is seen through to exactly one result. It is the node's TicketDesk (the
// server hands it the ticket protocol) and the node's side of the fabric.
//
//  - Placement. A new ticket (from the WebSocket, or an OpenAI API request
//    made a ticket) goes to the best idle node that serves its tier with
//    the same catalogue, this node included (fabric/placement.h): first the
//    one whose KV checkpoints hold the longest prefix of its prompt.
//    If none is idle it waits in this node's executor queue (or, for a tier
//    only peers serve, in the dispatcher's own line); when a peer reports
//    idle, the oldest waiting ticket it can run moves there.
//  - Peers. One PeerLink per --peer, and per node found with mDNS
//    (--discover, fabric/discovery.h): a subscription to the peer's state
//    (pushed on every busy/idle change and every heartbeat) that also
//    carries the tickets forwarded there, marked `forwardedBy` so the peer
//    runs them itself. Tickets that arrive so marked run here, never
//    elsewhere, and end when their connection ends. A found peer is
//    forgotten once its service is withdrawn and its link is down: the
//    link, not mDNS, says whether a peer is alive.
//  - Failures. When a forwarded run fails (the link drops, the heartbeat
//    stops, the peer errs or shuts down), the ticket runs again elsewhere
//    (at most max_attempts runs); its clients get a `retry` event and the
//    token seq restarts at 0.
//  - Exactly once. Tickets are kept by ticketID in the ticket book
//    (node/ticket_book.h, shared with the broker's desk): the same ID sent
//    again (from any connection) or a `resume` attaches to the one ticket
//    instead of running it twice; finished results are kept for
//    result_ttl_s. The dispatcher's own part is the transport: placement,
//    peers, discovery, heartbeats and the journal. With a journal, accepted tickets survive a restart of this node: a kill
//    leaves them unfinished in it, and so does a graceful shutdown (SIGTERM)
//    for every ticket that has not finished by then (suspend()). OpenAI
//    requests are neither kept nor journaled: their client cannot come back.
//  - Hand-off. At a graceful shutdown with a journal, tickets that have not
//    started here go to a live peer that serves their tier, as plain
//    tickets: the peer keeps, journals and runs them even once this node's
//    link is gone (a peer's link leaves no orphans). The journal notes the
//    peer; after a restart this node sends such a ticket to that peer again
//    (the same ID: it attaches to the one there, or runs it if the peer
//    never got it) and relays its events, instead of running it twice.
//
// Thread-safety: one mutex, the book's (book_.mu), guards the tickets and
// all the dispatcher's state with them; the members it guards are declared
// GUARDED_BY it and the helpers that need it REQUIRES it, so clang checks
// every access (-Wthread-safety). Entry points run on the
// server's I/O thread, the executor's thread and the dispatcher's own I/O
// thread (peer links, timers, discovery events). Executor calls that may
// call back (cancel) are made without the lock held.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fabric/cluster_feed.h"
#include "fabric/discovery.h"
#include "fabric/journal.h"
#include "fabric/node_state.h"
#include "fabric/peer_link.h"
#include "fabric/placement.h"
#include "node/linked_runs.h"
#include "node/node.h"
#include "node/ticket_book.h"
#include "node/ticket_desk.h"
#include "base/mutex.h"

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
  struct Record;
  struct Peer;
  using Link = std::shared_ptr<node::ClientLink>;

  Dispatcher(node::Node& node, std::unique_ptr<Journal> journal);

  node::Outcome<int> place(Record& rec, bool first) REQUIRES(book_.mu);
  // The tier a ticket runs on: its task's, or the one its OpenAI call names;
  // null for a task the catalogue does not have.
  const std::string* tier_of(const node::Ticket& ticket) const REQUIRES(book_.mu);
  // Sets each idle candidate's cached_tokens from the KV prefixes it
  // publishes for `tier`. The ticket's prompt is tokenized (once) only when
  // one of them publishes any: without KV directories this costs nothing.
  void weigh_cached_prefixes(Record& rec, const std::string& tier, const std::vector<Peer*>& peers,
                             std::vector<Candidate>& cands) REQUIRES(book_.mu);
  std::optional<node::NodeError> admissible(const node::Ticket& ticket, node::Clock::time_point received) const REQUIRES(book_.mu);
  void run_local_pinned(const Link& from, node::Ticket ticket, node::Clock::time_point received) EXCLUDES(book_.mu);
  node::Outcome<int> submit_local(Record& rec, bool first) REQUIRES(book_.mu);
  // pinned: marked forwardedBy (runs there only while the link lasts);
  // otherwise a plain ticket that the peer keeps as its own (hand-off).
  void forward(Record& rec, Peer& peer, bool pinned = true) REQUIRES(book_.mu);
  // At shutdown: tickets not started here go to live peers (see Hand-off).
  void hand_off_unstarted() REQUIRES(book_.mu);
  // Sends the tickets handed to `peer` at an earlier shutdown to it again,
  // now that its link is up, to relay their events.
  void relay_handed(Peer& peer) REQUIRES(book_.mu);
  void retry(Record& rec, const std::string& reason) REQUIRES(book_.mu);
  void finish(Record& rec, node::TicketEvent terminal) REQUIRES(book_.mu);
  // During shutdown, with a journal: leaves a kept ticket that no client
  // cancelled unfinished (in the journal too) instead of ending it as
  // cancelled, so the next start runs it. False when it does not apply.
  bool suspend(Record& rec) REQUIRES(book_.mu);
  // Notes (in RAM and the journal) the peer a ticket was handed to; "": none.
  void set_handed_to(Record& rec, const std::string& peer) REQUIRES(book_.mu);
  // Forgets a ticket, in the journal too.
  void drop(const std::string& id) REQUIRES(book_.mu);
  // The book's entries are Records: the one for `id` (null: none), and all.
  Record* record(const std::string& id) REQUIRES(book_.mu);
  std::vector<Record*> all_records() const REQUIRES(book_.mu);
  // A ticket this node no longer holds in RAM, answered from the journal
  // when it finished there within result_ttl_s: true when it was.
  bool answer_from_journal(const Link& link, const std::string& id, bool resent) REQUIRES(book_.mu);
  void attach(Record& rec, const Link& link, int attempt, int64_t after_seq) REQUIRES(book_.mu);
  void emit_token(Record& rec, std::string_view piece, std::span<const node::LogprobEntry> logprobs = {},
                  bool reasoning = false) REQUIRES(book_.mu);
  void offload() REQUIRES(book_.mu);
  void restore_from_journal() REQUIRES(book_.mu);
  void watch_orphan(Record& rec) REQUIRES(book_.mu);
  // Cancels a ticket wherever it runs; the job id to cancel locally (after
  // unlocking), or 0.
  uint64_t cancel_ticket(Record& rec) REQUIRES(book_.mu);
  NodeState local_state() const REQUIRES(book_.mu);
  void broadcast_state() REQUIRES(book_.mu);
  // The cluster feed (fabric/cluster_feed.h): the view, and a ticket's
  // state whenever it changes.
  nlohmann::json cluster_view() const REQUIRES(book_.mu);
  void publish_cluster() REQUIRES(book_.mu);
  void publish(const Record& rec) REQUIRES(book_.mu);
  TicketView view_of(const Record& rec) const REQUIRES(book_.mu);
  std::vector<Candidate> candidates(const std::string& tier, std::vector<Peer*>& peers, bool include_self) const REQUIRES(book_.mu);

  void on_local_text(const std::string& id, uint64_t placement, std::string_view piece,
                     std::span<const node::LogprobEntry> logprobs, bool reasoning) EXCLUDES(book_.mu);
  void on_local_finish(const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome) EXCLUDES(book_.mu);
  void on_executor_change() EXCLUDES(book_.mu);
  // Peers and their links. A peer is known by HOST:PORT; a link's events
  // name the link too, so those of a forgotten peer's link are ignored.
  Peer& add_peer(const node::HostPort& at, const char* found) REQUIRES(book_.mu);
  Peer* peer_of(const std::string& key, uint64_t link_id) REQUIRES(book_.mu);
  void on_peer_up(const std::string& key, uint64_t link_id, uint64_t session) EXCLUDES(book_.mu);
  void on_peer_message(const std::string& key, uint64_t link_id, uint64_t session, const std::string& text) EXCLUDES(book_.mu);
  void on_peer_down(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why) EXCLUDES(book_.mu);
  void start_discovery(int port) EXCLUDES(book_.mu);
  void on_discovered(const DiscoveredNode& found) EXCLUDES(book_.mu);
  void on_discovery_lost(const std::string& service) EXCLUDES(book_.mu);
  void forget_peer(const std::string& key) REQUIRES(book_.mu);
  void heartbeat_tick() EXCLUDES(book_.mu);

  node::Node& node_;
  const node::NodeConfig& config_;
  const std::string instance_;
  std::unique_ptr<boost::asio::io_context> io_;
  std::thread io_thread_;

  // The tickets (node/ticket_book.h), each a Record; its mutex guards the
  // rest of the dispatcher's state too.
  node::TicketBook book_;
  CondVar handed_over_;  // a peer answered about a ticket, or a link dropped
  std::deque<std::string> waiting_ GUARDED_BY(book_.mu);  // tickets for tiers only peers serve, oldest first
  std::map<std::string, std::unique_ptr<Peer>> peers_ GUARDED_BY(book_.mu);  // by HOST:PORT
  uint64_t last_link_id_ GUARDED_BY(book_.mu) = 0;
  // Set and reset on the server's thread (on_listening, on_shutdown) and in
  // the destructor only; its events reach book_.mu through io_.
  std::unique_ptr<Discovery> discovery_;
  std::vector<Link> subscribers_ GUARDED_BY(book_.mu);
  ClusterFeed feed_ GUARDED_BY(book_.mu);
  std::string running_label_ GUARDED_BY(book_.mu);  // the executor's current job, as last seen
  node::LinkedRuns pinned_;  // forwarded here, run for the peer's link (its own lock, taken after book_.mu)
  std::unique_ptr<Journal> journal_ GUARDED_BY(book_.mu);
  node::Clock::time_point self_idle_since_ GUARDED_BY(book_.mu) = node::Clock::now();
  bool self_was_busy_ GUARDED_BY(book_.mu) = false;
  double tok_per_s_ GUARDED_BY(book_.mu) = 0;
  bool shutting_down_ GUARDED_BY(book_.mu) = false;
  bool started_ GUARDED_BY(book_.mu) = false;
};

}  // namespace revis::fabric
