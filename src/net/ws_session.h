// One WebSocket connection on /v1/revis/stream: the ticket protocol
// (docs/protocol.md). Messages are parsed and handed to the desk on a
// preparation thread, in this connection's lane (a ticket's job read there,
// once: api/ticket_job.h); the desk's events go out in the order they were
// sent, each ticket's last one writing its access-log line.
//
// Thread-safety: send() and refuse() may be called from any thread (they
// post to the connection's strand); everything else runs on the I/O thread.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "net/server_state.h"

namespace revis::node {

class WsSession : public ClientLink, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream&& stream, ConnectionTable::Slot slot, ServerState& state)
      : ws_(std::move(stream)), events_(net::make_strand(ws_.get_executor())), state_(state),
        lane_(state.prep.new_lane()), slot_(std::move(slot)), idle_timer_(ws_.get_executor()), client_(slot_.address()) {}

  void start(http::request<http::string_body> req);

  void send(TicketEvent event) override;

  void refuse(const std::optional<std::string>& id, const NodeError& error) override;

  // Shutdown: send what is queued, then a close frame. Through the strand,
  // like send(): a job's last event, sent from the executor's thread just
  // before shutdown calls this, is then written first and not lost.
  void close_going_away();

 private:
  void close_when_written();

  // Closes the connection once it has been idle for idle_timeout_s: no
  // message either way and no ticket of its own open (a client waiting for
  // a long answer is not idle).
  void arm_idle_timer();

  void do_read();

  void on_read(beast::error_code ec);

  // On a preparation thread, in this connection's lane: the message is
  // parsed, a ticket's job read (its task rendered, or a peer's OpenAI body
  // parsed and its grammar compiled), and handed to the desk, off the I/O
  // thread.
  void handle(const std::string& text, Clock::time_point received);

  // A ticket's events are accounted on the I/O thread; through the strand
  // its events take, so it is known there before the first of them.
  void note_open(const std::string& id, Clock::time_point received);

  // The access log's line for each ticket that ends here (and for each
  // message refused before it became a ticket).
  void account(const TicketEvent& event);

  // On the I/O thread.
  void write_event(TicketEvent message);

  void do_write();

  void do_close();

  // The client is gone (or misbehaved): the desk decides what becomes of
  // its tickets.
  void disconnected();

  beast::websocket::stream<beast::tcp_stream> ws_;
  // Events are sent from several threads (the server's, the executor's, the
  // peer links'). A strand runs them in the order send() was called, which
  // the io_context alone does not promise (a handler posted on its own
  // thread may run after one posted later from another), so `accepted`
  // never trails the ticket's first token or result.
  net::strand<net::any_io_executor> events_;
  ServerState& state_;
  const std::shared_ptr<PreparationPool::Lane> lane_;  // this connection's calls to the desk, in order
  beast::flat_buffer buffer_;
  std::deque<TicketEvent> outbox_;
  size_t queued_bytes_ = 0;
  bool writing_ = false, closed_ = false, close_pending_ = false, closing_ = false;
  ConnectionTable::Slot slot_;
  net::steady_timer idle_timer_;
  Clock::time_point last_activity_;
  const std::string client_;  // the source address
  struct OpenTicket {
    Clock::time_point received;
    uint64_t bytes = 0;  // of its events sent so far
  };
  std::map<std::string, OpenTicket, std::less<>> open_tickets_;  // sent (or resumed) here, not yet done or failed
};

}  // namespace revis::node
