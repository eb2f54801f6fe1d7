// The TicketDesk of a node with --broker (docs/scale-out.md): tickets from
// the WebSocket, `revis submit` and the OpenAI API go into the broker, and
// their events and result come back to the client, so clients need not
// speak NATS. Whichever node pulls the ticket runs it (this one included).
//
//  - A ticket the node can already tell is wrong (malformed arguments,
//    unknown task) is refused at once, as without a broker.
//  - Otherwise the desk subscribes to revis.*.<ticketID> (token events and
//    the result, in order), answers `accepted`, publishes the ticket with
//    Nats-Msg-Id: <ticketID>, and relays what comes back. A ticketID that
//    already has a result in REVIS_RESULTS gets that result, not a new run.
//  - `resume` follows a ticket again the same way, without publishing.
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
// libnats' threads; one mutex guards the follows.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/connection.h"
#include "broker/worker.h"
#include "node/linked_runs.h"
#include "node/node.h"
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
  struct Follow;
  // Subscribes `from` to the ticket's events and result; false (and the
  // client told) when the broker cannot be reached.
  std::shared_ptr<Follow> follow(const std::shared_ptr<node::ClientLink>& from, const std::string& id);
  void drop(node::ClientLink* link, const std::string& id) EXCLUDES(mu_);
  bool following(node::ClientLink* link, const std::string& id) EXCLUDES(mu_);
  // Without a broker: the ticket runs here.
  void run_here(const std::shared_ptr<node::ClientLink>& from, node::Ticket ticket, node::Clock::time_point received);

  node::Node& node_;
  Connection& conn_;
  Worker& worker_;
  Mutex mu_;
  std::map<node::ClientLink*, std::map<std::string, std::shared_ptr<Follow>>> follows_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Follow>> finished_ GUARDED_BY(mu_);  // released on the I/O thread
  node::LinkedRuns local_;  // run_here's jobs
};

}  // namespace revis::broker
