// A client's end of the broker, for `revis submit --broker` and `revis
// batch --broker` (docs/scale-out.md): the same send/receive shape as the
// WebSocket client (net/client.h), talking to NATS directly.
//
// send() takes a ticket message (the WebSocket `ticket` JSON), subscribes to
// revis.*.<ticketID> (its token events and result, in order), and, unless
// REVIS_RESULTS already holds that ticket's result, publishes it to
// revis.tickets.<taskType> with Nats-Msg-Id: <ticketID>. A stored result
// is handed out by receive() like a live one, so re-running a client with
// the same ticketIDs collects what is done instead of running it again.
//
// Thread-safety: one thread calls send/receive; subscriptions deliver on
// libnats' threads into a locked queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>

#include "broker/connection.h"
#include "base/mutex.h"

namespace revis::broker {

class TicketClient {
 public:
  // Connects and makes sure the streams exist (creating missing ones with
  // the defaults; the nodes verify them).
  static Result<std::unique_ptr<TicketClient>> connect(const BrokerOptions& options);
  ~TicketClient();

  Status send(std::string_view ticket_message);
  // The next event or result of any ticket sent. Errors: "timeout".
  Result<std::string> receive(int timeout_ms);
  void close();
  void abort() { close(); }

 private:
  explicit TicketClient(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  void push(const std::string& id, std::string message, bool final) EXCLUDES(mu_);

  std::unique_ptr<Connection> conn_;
  std::map<std::string, std::unique_ptr<Subscription>> follows_;  // by ticketID; sender's thread only
  Mutex mu_;
  CondVar arrived_;
  std::deque<std::string> inbox_ GUARDED_BY(mu_);
  std::set<std::string> finished_ GUARDED_BY(mu_);  // ticketIDs whose result is in the inbox
};

}  // namespace revis::broker
