#include "net/ws_session.h"

#include "api/ticket_job.h"
#include "base/log.h"
#include "net/access_log.h"

namespace revis::node {

namespace websocket = beast::websocket;

void WsSession::start(http::request<http::string_body> req) {
  beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts take over
  // Pings find a peer that vanished; a client that answers them but
  // neither sends nor waits for anything is closed by the idle timer.
  auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
  timeouts.keep_alive_pings = true;
  ws_.set_option(timeouts);
  const bool dashboard = offers_subprotocol(field_value(req, http::field::sec_websocket_protocol), kDashboardSubprotocol);
  ws_.set_option(websocket::stream_base::decorator([dashboard](websocket::response_type& res) {
    res.set(http::field::server, "revis");
    if (dashboard) res.set(http::field::sec_websocket_protocol, std::string(kDashboardSubprotocol));
  }));
  // Messages up to 4x the limit are read, so that the client hears
  // too_long for its ticket; beyond that Beast closes with 1009.
  ws_.read_message_max(state_.node.config().max_message_bytes * 4 + 4096);
  ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) {
    if (ec) return self->disconnected();
    self->last_activity_ = Clock::now();
    self->arm_idle_timer();
    self->do_read();
  });
}

void WsSession::send(TicketEvent event) {
  net::post(events_, [self = shared_from_this(), event = std::move(event)]() mutable {
    self->write_event(std::move(event));
  });
}

void WsSession::refuse(const std::optional<std::string>& id, const NodeError& error) {
  state_.node.count_refused("ticket", error.code);
  send(error_event(id, error));
}

void WsSession::close_going_away() {
  net::post(events_, [self = shared_from_this()] { self->close_when_written(); });
}

void WsSession::close_when_written() {
  close_pending_ = true;
  if (!writing_ && !closed_ && !closing_) do_close();
}

void WsSession::arm_idle_timer() {
  const auto idle = std::chrono::seconds(state_.node.config().idle_timeout_s);
  const Clock::time_point now = Clock::now();
  Clock::time_point next = last_activity_ + idle;
  if (now >= next) {
    if (open_tickets_.empty()) return close_when_written();
    next = now + idle;
  }
  idle_timer_.expires_at(next);
  idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && !self->closed_ && !self->closing_) self->arm_idle_timer();
  });
}

void WsSession::do_read() {
  ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void WsSession::on_read(beast::error_code ec) {
  if (ec) return disconnected();
  const Clock::time_point received = Clock::now();
  last_activity_ = received;
  std::string text = beast::buffers_to_string(buffer_.data());
  buffer_.consume(buffer_.size());
  if (!ws_.got_text()) {
    refuse(std::nullopt, {ErrorCode::kBadRequest, "binary messages are not accepted; send JSON text"});
  } else if (!state_.prep.post(lane_, [self = shared_from_this(), text = std::move(text), received] {
               self->handle(text, received);
             })) {
    refuse(std::nullopt, preparation_busy(state_.node.config()));
  }
  if (!closed_) do_read();
}

void WsSession::handle(const std::string& text, Clock::time_point received) {
  auto parsed = parse_client_message(text, state_.node.config().max_message_bytes);
  if (auto* rejected = std::get_if<RejectedMessage>(&parsed)) {
    refuse(rejected->ticket_id, rejected->error);
    return;
  }
  ClientMessage& message = std::get<ClientMessage>(parsed);
  auto self = shared_from_this();
  if (auto* cancel = std::get_if<CancelRequest>(&message)) return state_.desk.on_cancel(self, cancel->id);
  if (auto* resume = std::get_if<ResumeRequest>(&message)) {
    note_open(resume->id, received);
    return state_.desk.on_resume(self, *resume);
  }
  if (auto* subscribe = std::get_if<SubscribeRequest>(&message)) return state_.desk.on_subscribe(self, *subscribe);
  Ticket& ticket = std::get<Ticket>(message);
  read_ticket_job(ticket, state_.node);
  note_open(ticket.id, received);
  state_.desk.on_ticket(self, std::move(ticket), received);
}

void WsSession::note_open(const std::string& id, Clock::time_point received) {
  net::post(events_, [self = shared_from_this(), id, received] {
    self->open_tickets_.try_emplace(id, OpenTicket{received, 0});
  });
}

void WsSession::account(const TicketEvent& event) {
  const size_t size = event.text().size();
  auto it = event.ticket_id().empty() ? open_tickets_.end() : open_tickets_.find(event.ticket_id());
  if (it != open_tickets_.end()) it->second.bytes += size;
  const TicketEvent::Type type = event.type();
  if (type != TicketEvent::Type::kDone && type != TicketEvent::Type::kError) return;
  const bool open = it != open_tickets_.end();
  log_access({.client = client_,
              .method = "TICKET",
              .route = "/v1/revis/stream",
              .status = type == TicketEvent::Type::kDone ? "done" : error_code_name(event.error().code),
              .bytes = open ? it->second.bytes : size,
              .duration_ms = open ? ms_since(it->second.received) : 0,
              .ticket_id = event.ticket_id()});
  if (open) open_tickets_.erase(it);
}

void WsSession::write_event(TicketEvent message) {
  if (closed_ || closing_) return;
  last_activity_ = Clock::now();
  account(message);
  queued_bytes_ += message.text().size();
  if (queued_bytes_ > kMaxBufferedBytes) {
    log_line("warn", "dropping a WebSocket client that does not read (" + std::to_string(queued_bytes_) + " bytes unsent)");
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    return disconnected();
  }
  outbox_.push_back(std::move(message));
  if (!writing_) do_write();
}

void WsSession::do_write() {
  writing_ = true;
  ws_.text(true);
  ws_.async_write(net::buffer(outbox_.front().text()), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return self->disconnected();
    self->queued_bytes_ -= self->outbox_.front().text().size();
    self->outbox_.pop_front();
    if (!self->outbox_.empty()) {
      self->do_write();
    } else if (self->close_pending_) {
      self->do_close();
    }
  });
}

void WsSession::do_close() {
  closing_ = true;
  ws_.async_close(websocket::close_code::going_away, [self = shared_from_this()](beast::error_code) {
    self->disconnected();
  });
}

void WsSession::disconnected() {
  if (closed_) return;
  closed_ = true;
  idle_timer_.cancel();
  slot_.release();
  // After the messages still being prepared: the desk hears of a ticket
  // before the end of its connection.
  state_.prep.post_always(lane_, [self = shared_from_this()] { self->state_.desk.on_disconnect(self); });
  if (!closing_) {
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }
}

}  // namespace revis::node
