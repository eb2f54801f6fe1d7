// Where the server hands the ticket protocol over: tickets, cancels,
// resumes and peer subscriptions arriving on WebSocket connections, OpenAI
// API requests as tickets (node/node.h, openai_call), and the cluster
// view. The fabric's dispatcher (src/fabric/dispatcher.h) implements it
// and decides where each ticket runs, this node's executor or a peer; with
// --broker the broker's desk (src/broker/desk.h) does, relaying tickets
// through the broker. Both keep their tickets in a ticket book
// (node/ticket_book.h). The server only parses, authenticates and delivers
// events.
//
// Thread-safety: the server calls the on_ticket, on_cancel, on_resume,
// on_subscribe and on_disconnect of a connection from its preparation
// threads (net/preparation_pool.h), one at a time and in the order the
// connection sent them; different connections' calls may run at once. The
// other methods it calls on its I/O thread. ClientLink::send may be called
// from any thread.
#pragma once

#include <memory>
#include <string>

#include "protocol/job.h"
#include "protocol/ticket.h"

namespace revis::node {

// A client connection as the desk sees it: a WebSocket, or an HTTP
// connection waiting for the answer to an OpenAI request.
class ClientLink {
 public:
  virtual ~ClientLink() = default;
  // Queues one event for sending, in call order. Never blocks; a no-op
  // once the connection has closed.
  virtual void send(TicketEvent event) = 0;
  // Counts a refusal in the node's metrics and sends the error event.
  virtual void refuse(const std::optional<std::string>& id, const NodeError& error) = 0;
};

class TicketDesk {
 public:
  virtual ~TicketDesk() = default;
  virtual void on_ticket(const std::shared_ptr<ClientLink>& from, Ticket ticket, Clock::time_point received) = 0;
  virtual void on_cancel(const std::shared_ptr<ClientLink>& from, const std::string& id) = 0;
  virtual void on_resume(const std::shared_ptr<ClientLink>& from, const ResumeRequest& request) = 0;
  virtual void on_subscribe(const std::shared_ptr<ClientLink>& from, const SubscribeRequest& request) = 0;
  // The connection is gone; no event is sent to it any more.
  virtual void on_disconnect(const std::shared_ptr<ClientLink>& from) = 0;
  // GET /v1/revis/cluster.
  virtual std::string cluster_json() = 0;
  // The server listens on `port` (the real one when 0 was asked for).
  virtual void on_listening(int port) = 0;
  // Shutdown has begun: tickets that run elsewhere end now (cancelled, or
  // kept unfinished in a journal), unstarted ones may go to peers, the
  // running one is the executor's.
  virtual void on_shutdown() = 0;
  // The server has stopped: every ClientLink must be released now, while
  // the server's I/O context still exists; none is used any more.
  virtual void on_stopped() = 0;
};

}  // namespace revis::node
