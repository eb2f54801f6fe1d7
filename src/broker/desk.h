// The TicketDesk of a node with --broker (docs/scale-out.md): tickets from
// the WebSocket, `revis submit` and the OpenAI API go into the broker, and
// their events and result come back to the client, so clients need not
// speak NATS. Whichever node pulls the ticket runs it (this one included).
//
//  - A ticket the node can already tell is wrong (malformed arguments,
//    unknown task) is refused at once, as without a broker.
//  - Otherwise the desk keeps the ticket in its ticket book
//    (node/ticket_book.h, as the peer path's dispatcher does), subscribes to
//    revis.*.<ticketID> (token events and the result, in order), answers
//    `accepted`, publishes the ticket with Nats-Msg-Id: <ticketID>, and
//    relays what comes back to every client attached to it. A ticketID that
//    already has a result in REVIS_RESULTS gets that result, not a new run.
//  - The same ticketID from another client of this node, and a `resume`
//    (with `after_seq`: the token events it missed are replayed), attach to
//    the one relay; a finished ticket's result is kept result_ttl_s.
//    A `resume` of a ticket this node does not hold follows it again from
//    the broker, without publishing.
//  - A relay ends with its result, or when its last client leaves (the
//    ticket runs on; a `resume` follows it again).
//  - While the broker is unreachable the node serves its clients alone:
//    the ticket runs in this node's executor.
//  - `cancel` of a ticket the client follows stores an `error`/`cancelled`
//    result (Nats-Msg-Id: ticketID, unless a result is there already) and
//    publishes revis.cancel.<ticketID>: the node running it stops the run,
//    a node that pulls it later finds the result and does not run it, and
//    every client following it gets the `cancelled` result. A ticket run
//    here while the broker was unreachable is cancelled in the executor.
//
// Thread-safety: the server calls it on its I/O thread; relays run on
// libnats' threads. The book's mutex guards the book and the relays'
// subscriptions (GUARDED_BY(book_.mu)); none is subscribed, flushed or
// destroyed under it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "broker/connection.h"
#include "broker/worker.h"
#include "node/linked_runs.h"
#include "node/node.h"
#include "node/ticket_book.h"
#include "node/ticket_desk.h"
#include "base/mutex.h"

namespace revis::broker {

class Desk : public node::TicketDesk {
 public:
  Desk(node::Node& node, Connection& conn, Worker& worker);
  ~Desk() override;

  void on_ticket(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received) override;
  void on_cancel(const std::shared_ptr<node::ClientLink>& from, const std::string& id) override;
  void on_resume(const std::shared_ptr<node::ClientLink>& from, const node::ResumeRequest& request) override;
  void on_subscribe(const std::shared_ptr<node::ClientLink>& from, const node::SubscribeRequest& request) override;
  void on_disconnect(const std::shared_ptr<node::ClientLink>& from) override;
  std::string cluster_json() override;
  void on_listening(int port) override {}
  void on_shutdown() override;
  void on_stopped() override;

 private:
  struct Relay;
  enum class Followed { kFollowing, kFinished, kUnreachable };
  Relay* relay_of(const std::string& id) REQUIRES(book_.mu);
  // Keeps ticket `id` in the book with `from` attached and relays its
  // events and result from the broker: kFinished when its result was
  // there already (and sent), kUnreachable when the broker cannot be
  // reached (the book no longer holds it then).
  Followed follow(const std::shared_ptr<node::ClientLink>& from, const std::string& id, bool kept) EXCLUDES(book_.mu);
  void on_relayed(const std::string& id, uint64_t relay, const Message& m) EXCLUDES(book_.mu);
  void finish(Relay& relay, node::TicketEvent terminal) REQUIRES(book_.mu);
  // Stops relaying and forgets the ticket (it may run on elsewhere).
  void forget(Relay& relay) REQUIRES(book_.mu);
  // The subscriptions of ended relays, to release after the lock, on the
  // I/O thread (a relay ends on the subscription's own thread).
  std::vector<std::unique_ptr<Subscription>> take_ended() REQUIRES(book_.mu);
  // Without a broker: the ticket runs here.
  void run_here(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received);

  node::Node& node_;
  Connection& conn_;
  Worker& worker_;
  node::TicketBook book_;  // the tickets relayed, each a Relay; its mutex guards the state below
  std::vector<std::unique_ptr<Subscription>> ended_ GUARDED_BY(book_.mu);
  uint64_t last_relay_ GUARDED_BY(book_.mu) = 0;
  node::LinkedRuns local_;  // run_here's jobs
};

}  // namespace revis::broker
