#include "net/server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <deque>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "api/anthropic_api.h"
#include "api/embeddings_api.h"
#include "api/openai_relay.h"
#include "api/ticket_job.h"
#include "base/log.h"
#include "base/mutex.h"
#include "net/access_log.h"
#include "net/connection_table.h"
#include "net/preparation_pool.h"
#include "net/request_guard.h"
#include "net/service_notify.h"
#include "net/web_assets.h"
#include "node/node.h"
#include "node/ticket_desk.h"
#include "protocol/bearer.h"

namespace revis::node {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A client that stops reading while tokens keep coming would make the node
// buffer without bound; past this many unsent bytes the connection is
// dropped and its tickets cancelled.
constexpr size_t kMaxBufferedBytes = 16u << 20;
constexpr auto kHttpReadTimeout = std::chrono::seconds(30);
constexpr auto kCloseDeadline = std::chrono::seconds(3);
// A request's header (request line included) and its number of fields.
constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxHeaderFields = 100;
// After refusing a request whose bytes were not all read, the connection
// reads and discards for this long (and this much) before it closes, so that
// the client reads the refusal instead of a reset.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 4u << 20;
// Descriptors kept for what is not a client connection (models, journal,
// KV files, peer links, the resolver); the rest of the limit is for clients.
constexpr size_t kReservedDescriptors = 64;
// accept() out of descriptors: wait this long before trying again, doubling
// up to the maximum, instead of failing in a loop.
constexpr auto kFirstAcceptBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxAcceptBackoff = std::chrono::milliseconds(1000);
// A warning that repeats is logged at most once per interval.
constexpr auto kWarningInterval = std::chrono::seconds(10);

std::string machine_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

class WsSession;
class HttpSession;

// At most one line per kWarningInterval for a warning that repeats (a
// flood must not fill the disk with log); the lines left out are counted
// in the next one.
class WarningLimiter {
 public:
  void warn(const std::string& message) {
    const Clock::time_point now = Clock::now();
    if (now < next_) {
      ++left_out_;
      return;
    }
    log_line("warn", left_out_ == 0 ? message : message + " (and " + std::to_string(left_out_) + " more since the last such line)");
    left_out_ = 0;
    next_ = now + kWarningInterval;
  }

 private:
  Clock::time_point next_{};
  uint64_t left_out_ = 0;
};

struct ServerState {
  Node& node;
  TicketDesk& desk;
  PreparationPool& prep;
  net::io_context& ioc;
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer stop_timer;
  std::vector<std::weak_ptr<WsSession>> ws_sessions;
  std::vector<std::weak_ptr<HttpSession>> http_sessions;
  bool stopping = false;
  int exit_code = 0;
  std::thread stopper;
  Clock::time_point stop_deadline;
  const RequestGuard guard;
  ConnectionTable& connections;  // outlives the I/O context, whose handlers may hold sessions
  net::steady_timer accept_timer;
  std::chrono::milliseconds accept_backoff = kFirstAcceptBackoff;
  WarningLimiter accept_warnings, refusal_warnings;

  ServerState(Node& n, TicketDesk& d, PreparationPool& p, net::io_context& io, ConnectionTable& c)
      : node(n), desk(d), prep(p), ioc(io), acceptor(io), signals(io, SIGINT, SIGTERM), stop_timer(io),
        guard(n.config(), machine_name()), connections(c), accept_timer(io) {}
  void begin_shutdown(int code, const std::string& why);
  void after_executor_stopped();
  void poll_connections_closed();
};

// `f`: an http::field, or a field's name.
template <class Message, class Field>
std::string_view field_value(const Message& m, Field f) {
  auto it = m.find(f);
  return it == m.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

// A request refused because the preparation threads have prepare_queue
// requests waiting already.
NodeError preparation_busy(const NodeConfig& config) {
  return {ErrorCode::kQueueFull, "the node has " + std::to_string(config.prepare_queue) +
                                     " requests waiting to be prepared (prepare_queue); try again"};
}

template <class Request>
bool authorized(const ServerState& state, const Request& req) {
  const std::string& token = state.node.config().token;
  if (token.empty()) return true;
  return bearer_matches(field_value(req, http::field::authorization), token) ||
         api_key_matches(field_value(req, "x-api-key"), token);
}

// A browser's WebSocket upgrade: the token as a subprotocol (the dashboard).
template <class Request>
bool authorized_by_subprotocol(const ServerState& state, const Request& req) {
  const std::string& token = state.node.config().token;
  return !token.empty() && subprotocol_matches(field_value(req, http::field::sec_websocket_protocol), token);
}

// The status for a request the parser refused (docs/protocol.md), or none
// when the connection just ended or timed out. Over the header limit, the
// request line decides: the parser fills in the target once it has read it.
std::optional<http::status> refusal_status(beast::error_code ec, bool request_line_read) {
  if (ec == http::error::body_limit) return http::status::payload_too_large;
  if (ec == http::error::header_limit)
    return request_line_read ? http::status::request_header_fields_too_large : http::status::uri_too_long;
  if (ec.category() != make_error_code(http::error::bad_method).category() || ec == http::error::end_of_stream ||
      ec == http::error::partial_message || ec == http::error::short_read)
    return std::nullopt;
  return http::status::bad_request;  // broken framing: line endings, fields, lengths, chunks
}

// Framing the parser lets through but that a smuggling front could read
// differently: more than one Content-Length, or too many fields.
template <class Request>
std::optional<std::pair<http::status, const char*>> framing_problem(const Request& req) {
  if (std::distance(req.begin(), req.end()) > static_cast<std::ptrdiff_t>(kMaxHeaderFields))
    return std::pair{http::status::request_header_fields_too_large, "too many header fields"};
  if (req.count(http::field::content_length) > 1) return std::pair{http::status::bad_request, "more than one Content-Length"};
  return std::nullopt;
}

// The string value of `name` in an event, empty if none. Events are
// compact JSON with every string value escaped, so the pattern only
// matches the event's own fields, never text inside a value.
std::string_view string_field(std::string_view event, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":\"";
  const size_t at = event.find(key);
  if (at == std::string_view::npos) return {};
  const size_t begin = at + key.size(), end = event.find('"', begin);
  return end == std::string_view::npos ? std::string_view() : event.substr(begin, end - begin);
}

// What an event says of its ticket: the ID, and for the ticket's last
// event (done or error) its outcome: "done" or the error code.
struct EventSummary {
  std::string_view ticket, outcome;
};

EventSummary summarize_event(std::string_view event) {
  EventSummary summary{string_field(event, "ticketID"), {}};
  const std::string_view type = string_field(event, "type");
  if (type == "done") summary.outcome = type;
  if (type == "error") summary.outcome = string_field(event, "code");
  return summary;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string random_id(const char* prefix) {
  static Mutex mutex;
  static std::mt19937_64 rng GUARDED_BY(mutex){std::random_device{}()};
  MutexLock lock(mutex);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%016llx", prefix, static_cast<unsigned long long>(rng()));
  return buf;
}

// ---------------------------------------------------------------- WebSocket

class WsSession : public ClientLink, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream&& stream, ConnectionTable::Slot slot, ServerState& state)
      : ws_(std::move(stream)), events_(net::make_strand(ws_.get_executor())), state_(state),
        lane_(state.prep.new_lane()), slot_(std::move(slot)), idle_timer_(ws_.get_executor()), client_(slot_.address()) {}

  void start(http::request<http::string_body> req) {
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

  void send(std::string event) override {
    net::post(events_, [self = shared_from_this(), event = std::move(event)]() mutable {
      self->write_event(std::move(event));
    });
  }

  void refuse(const std::optional<std::string>& id, const NodeError& error) override {
    state_.node.count_refused("ticket", error.code);
    send(error_event(id, error));
  }

  // Shutdown: send what is queued, then a close frame. Through the strand,
  // like send(): a job's last event, sent from the executor's thread just
  // before shutdown calls this, is then written first and not lost.
  void close_going_away() {
    net::post(events_, [self = shared_from_this()] { self->close_when_written(); });
  }

 private:
  void close_when_written() {
    close_pending_ = true;
    if (!writing_ && !closed_ && !closing_) do_close();
  }

  // Closes the connection once it has been idle for idle_timeout_s: no
  // message either way and no ticket of its own open (a client waiting for
  // a long answer is not idle).
  void arm_idle_timer() {
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

  void do_read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
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

  // On a preparation thread, in this connection's lane: the message is
  // parsed, a ticket's job read (its task rendered, or a peer's OpenAI body
  // parsed and its grammar compiled), and handed to the desk, off the I/O
  // thread.
  void handle(const std::string& text, Clock::time_point received) {
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

  // A ticket's events are accounted on the I/O thread; through the strand
  // its events take, so it is known there before the first of them.
  void note_open(const std::string& id, Clock::time_point received) {
    net::post(events_, [self = shared_from_this(), id, received] {
      self->open_tickets_.try_emplace(id, OpenTicket{received, 0});
    });
  }

  // The access log's line for each ticket that ends here (and for each
  // message refused before it became a ticket).
  void account(const std::string& event) {
    const EventSummary summary = summarize_event(event);
    auto it = open_tickets_.find(summary.ticket);
    if (it != open_tickets_.end()) it->second.bytes += event.size();
    if (summary.outcome.empty()) return;
    const bool open = it != open_tickets_.end();
    log_access({.client = client_,
                .method = "TICKET",
                .route = "/v1/revis/stream",
                .status = summary.outcome,
                .bytes = open ? it->second.bytes : event.size(),
                .duration_ms = open ? ms_since(it->second.received) : 0,
                .ticket_id = summary.ticket});
    if (open) open_tickets_.erase(it);
  }

  // On the I/O thread.
  void write_event(std::string message) {
    if (closed_ || closing_) return;
    last_activity_ = Clock::now();
    account(message);
    queued_bytes_ += message.size();
    if (queued_bytes_ > kMaxBufferedBytes) {
      log_line("warn", "dropping a WebSocket client that does not read (" + std::to_string(queued_bytes_) + " bytes unsent)");
      beast::error_code ignored;
      beast::get_lowest_layer(ws_).socket().close(ignored);
      return disconnected();
    }
    outbox_.push_back(std::move(message));
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(net::buffer(outbox_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->disconnected();
      self->queued_bytes_ -= self->outbox_.front().size();
      self->outbox_.pop_front();
      if (!self->outbox_.empty()) {
        self->do_write();
      } else if (self->close_pending_) {
        self->do_close();
      }
    });
  }

  void do_close() {
    closing_ = true;
    ws_.async_close(websocket::close_code::going_away, [self = shared_from_this()](beast::error_code) {
      self->disconnected();
    });
  }

  // The client is gone (or misbehaved): the desk decides what becomes of
  // its tickets.
  void disconnected() {
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

  websocket::stream<beast::tcp_stream> ws_;
  // Events are sent from several threads (the server's, the executor's, the
  // peer links'). A strand runs them in the order send() was called, which
  // the io_context alone does not promise (a handler posted on its own
  // thread may run after one posted later from another), so `accepted`
  // never trails the ticket's first token or result.
  net::strand<net::any_io_executor> events_;
  ServerState& state_;
  const std::shared_ptr<PreparationPool::Lane> lane_;  // this connection's calls to the desk, in order
  beast::flat_buffer buffer_;
  std::deque<std::string> outbox_;
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

// ---------------------------------------------------------------- HTTP

// One HTTP connection. While an OpenAI request runs it is that request's
// ClientLink: the desk sends it the ticket's events.
class HttpSession : public ClientLink, public ConnectionTable::Idle, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, ConnectionTable::Slot slot, ServerState& state)
      : stream_(std::move(socket)), events_(net::make_strand(stream_.get_executor())), state_(state),
        lane_(state.prep.new_lane()), slot_(std::move(slot)), client_(slot_.address()), first_request_by_(Clock::now() + std::chrono::seconds(state.node.config().handshake_timeout_s)) {}

  void send(std::string event) override {
    net::post(events_, [self = shared_from_this(), event = std::move(event)] { self->on_openai_event(event); });
  }

  void refuse(const std::optional<std::string>& id, const NodeError& error) override {
    state_.node.count_refused("openai", error.code);
    send(error_event(id, error));
  }

  void start() { do_read(); }

  // Only while it waits for a request (ConnectionTable::set_idle).
  void evict() override { close(); }

  // Shutdown: connections waiting for a next request are closed; one with
  // a job in progress finishes its response first.
  void close_if_idle() {
    if (job_active_ || writing_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  // Waits for the first byte of the next request: idle, so the connection
  // may be evicted for a new one, and closed when the wait runs out (the
  // handshake timeout for a new connection, the idle timeout after a
  // request was answered).
  void do_read() {
    cors_origin_.clear();
    if (buffer_.size() > 0) return read_request();  // the client sent it already (pipelining)
    state_.connections.set_idle(slot_, weak_from_this());
    if (served_) stream_.expires_after(std::chrono::seconds(state_.node.config().idle_timeout_s));
    else stream_.expires_at(first_request_by_);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->state_.connections.set_busy(self->slot_);
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_request();
    });
  }

  void read_request() {
    started_ = Clock::now();
    method_ = route_ = "-";
    request_id_.clear();
    parser_.emplace();
    parser_->body_limit(state_.node.config().max_request_bytes);
    parser_->header_limit(kMaxHeaderBytes);
    if (served_) stream_.expires_after(kHttpReadTimeout);
    else stream_.expires_at(first_request_by_);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      const std::optional<http::status> status = refusal_status(ec, !parser_->get().target().empty());
      if (!status) return close();
      std::string why = ec.message();
      if (*status == http::status::payload_too_large)
        why = "the request body is larger than " + std::to_string(state_.node.config().max_request_bytes) + " bytes";
      if (*status == http::status::uri_too_long) why = "the request line is longer than " + std::to_string(kMaxHeaderBytes) + " bytes";
      if (*status == http::status::request_header_fields_too_large)
        why = "the request header is larger than " + std::to_string(kMaxHeaderBytes) + " bytes";
      return refuse_framing(*status, why);
    }
    received_ = Clock::now();
    http::request<http::string_body> req = parser_->release();
    method_ = std::string(req.method_string());
    route_ = std::string(req.target().substr(0, req.target().find('?')));
    if (auto problem = framing_problem(req)) return refuse_framing(problem->first, problem->second);
    keep_alive_ = req.keep_alive();
    if (!admitted(req)) return;
    if (req.method() == http::verb::options) return preflight(req);
    const std::string path = route_;

    if (websocket::is_upgrade(req)) {
      if (path != "/v1/revis/stream") return respond_json(http::status::not_found, R"({"error":"no WebSocket endpoint here; use /v1/revis/stream"})");
      if (!authorized(state_, req) && !authorized_by_subprotocol(state_, req)) return unauthorized();
      if (state_.stopping) return respond_json(http::status::service_unavailable, R"({"error":"the node is shutting down"})");
      stream_.expires_never();
      log_request(101, 0);
      auto ws = std::make_shared<WsSession>(std::move(stream_), std::move(slot_), state_);
      state_.ws_sessions.push_back(ws);
      ws->start(std::move(req));
      return;
    }
    route(req, path);
  }

  // Host and Origin (net/request_guard.h); false when refused. Remembers
  // an allowed cross-site origin, whose responses carry CORS headers.
  bool admitted(const http::request<http::string_body>& req) {
    const std::string_view host = field_value(req, http::field::host), origin = field_value(req, http::field::origin);
    if (host.empty() && req.version() >= 11) {
      refuse_request(http::status::bad_request, "an HTTP/1.1 request needs a Host header", "bad_request");
      return false;
    }
    if (!state_.guard.host_allowed(host)) {
      refuse_request(http::status::forbidden,
                     "this node does not answer to the Host this request names (a node without a token answers its "
                     "addresses, localhost and its names; see --allow-host)",
                     "forbidden_host");
      return false;
    }
    switch (state_.guard.classify_origin(origin, host)) {
      case RequestGuard::Origin::kForeign:
        refuse_request(http::status::forbidden, "web pages from this request's Origin may not call this node (see --allow-origin)",
                       "forbidden_origin");
        return false;
      case RequestGuard::Origin::kAllowed: cors_origin_ = origin; break;
      case RequestGuard::Origin::kNone:
      case RequestGuard::Origin::kSame: break;
    }
    return true;
  }

  // OPTIONS: a CORS preflight from an allowed origin gets the methods and
  // the headers it asked for (the OpenAI SDKs send several of their own).
  void preflight(const http::request<http::string_body>& req) {
    http::response<http::string_body> res{http::status::no_content, 11};
    res.set(http::field::allow, "GET, POST, OPTIONS");
    if (!cors_origin_.empty()) {
      res.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
      const std::string_view asked = field_value(req, http::field::access_control_request_headers);
      res.set(http::field::access_control_allow_headers, asked.empty() ? std::string("Authorization, Content-Type") : std::string(asked));
      res.set(http::field::access_control_max_age, "600");
    }
    send_response(std::move(res));
  }

  void route(http::request<http::string_body>& req, const std::string& path) {
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
    if (path == "/health") {
      if (!get) return method_not_allowed();
      switch (state_.node.health()) {
        case Health::kOk: return respond_json(http::status::ok, R"({"status":"ok"})");
        case Health::kLoading: return respond_json(http::status::service_unavailable, R"({"status":"loading"})");
        case Health::kStopping: return respond_json(http::status::service_unavailable, R"({"status":"stopping"})");
        case Health::kFailed: return respond_json(http::status::service_unavailable, R"({"status":"failed"})");
      }
    }
    if (const WebAsset* asset = find_web_asset(path)) {  // static, no data: no token
      if (!get) return method_not_allowed();
      return web_asset(req, *asset);
    }
    if (!authorized(state_, req)) return unauthorized();
    if (path == "/v1/revis/status") {
      if (!get) return method_not_allowed();
      return respond_json(http::status::ok, state_.node.status_json());
    }
    if (path == "/v1/revis/cluster") {
      if (!get) return method_not_allowed();
      return respond_json(http::status::ok, state_.desk.cluster_json());
    }
    if (path == "/metrics") {
      if (!get) return method_not_allowed();
      return respond(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", state_.node.metrics_text());
    }
    if (path == "/v1/models") {
      if (!get) return method_not_allowed();
      return respond_json(http::status::ok, models_list(state_.node.model_ids(), std::time(nullptr), "revis"));
    }
    if (path.starts_with("/v1/models/")) {
      if (!get) return method_not_allowed();
      const std::string id = path.substr(std::string_view("/v1/models/").size());
      if (auto entry = model_entry(state_.node.model_ids(), id, std::time(nullptr), "revis"))
        return respond_json(http::status::ok, std::move(*entry));
      return respond_json(http::status::not_found,
                          openai_error("the model '" + id + "' does not exist", "invalid_request_error", "model_not_found"));
    }
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (!post) return method_not_allowed();
      return openai(std::move(req.body()), path == "/v1/chat/completions");
    }
    if (path == "/v1/embeddings") {
      if (!post) return method_not_allowed();
      return embeddings(std::move(req.body()));
    }
    if (path == "/v1/messages") {
      if (!post) return method_not_allowed();
      return messages(std::move(req.body()));
    }
    if (path == "/v1/revis/stream")
      return respond_json(http::status::upgrade_required, R"({"error":"this endpoint speaks WebSocket only"})");
    respond_json(http::status::not_found, openai_error("no such endpoint: " + path, "invalid_request_error", "not_found"));
  }

  void web_asset(const http::request<http::string_body>& req, const WebAsset& asset) {
    const bool fresh = field_value(req, http::field::if_none_match) == asset.file->etag;
    http::response<http::string_body> res{fresh ? http::status::not_modified : http::status::ok, 11};
    res.set(http::field::content_type, std::string(asset.content_type));
    for (const auto& [name, value] : web_asset_headers(asset)) res.set(std::string(name), std::string(value));
    if (!fresh) res.body() = std::string(asset.file->body);
    send_response(std::move(res));
  }

  // `work` runs on a preparation thread (net/preparation_pool.h): it
  // parses and checks the request, touching nothing of the session, and
  // returns what to do with the result, which runs back on the I/O thread
  // (unless the connection closed meanwhile).
  void prepare(std::function<std::function<void()>()> work) {
    auto self = shared_from_this();
    const bool queued = state_.prep.post(lane_, [self, work = std::move(work)] {
      net::post(self->stream_.get_executor(), [self, then = work()] {
        if (!self->dead_) then();
      });
    });
    if (!queued) respond_error(preparation_busy(state_.node.config()));
  }

  // A request refused while it was prepared, in its API's error shape.
  void refuse_prepared(const NodeError& error, bool anthropic) {
    state_.node.count_refused("openai", error.code);
    if (anthropic) return respond_error(error, anthropic_error_for(error));
    respond_error(error);
  }

  // The request becomes a ticket for the desk, which places it like any
  // other (here or on a peer); its events come back through send() and the
  // relay turns them into the OpenAI response. A request for n choices is
  // n tickets, each sent when the one before is done.
  void openai(std::string body, bool chat) {
    prepare([self = shared_from_this(), body = std::move(body), chat,
             limits = state_.node.request_limits()]() -> std::function<void()> {
      auto request = chat ? parse_chat_request(body, limits) : parse_completion_request(body, limits);
      if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, false); };
      return [self, body, request = std::move(*request)]() mutable { self->start_openai(body, std::move(request)); };
    });
  }

  void start_openai(std::string body, OpenAiRequest request) {
    const bool chat = request.chat;
    const std::string id = random_id(chat ? "chatcmpl-" : "cmpl-");
    relay_.emplace(OpenAiRelay::Shape{.stream = request.stream, .choices = static_cast<size_t>(request.n), .id = id},
                   openai_format({.chat = chat,
                                  .id = id,
                                  .model = state_.node.tier_for_model(request.model),
                                  .created = std::time(nullptr),
                                  .include_usage = request.include_usage,
                                  .logprobs = request.logprobs}));
    const std::string model = request.model;
    const bool stream = request.stream;
    const std::optional<uint64_t> seed = request.seed_given ? std::optional(request.sampling.seed) : std::nullopt;
    start_api_request(model, stream, std::move(body), seed, openai_job(std::move(request)));
  }

  // Anthropic's Messages API: the request as a chat request, the answer
  // in Anthropic's shapes.
  void messages(std::string body) {
    prepare([self = shared_from_this(), body = std::move(body),
             limits = state_.node.request_limits()]() -> std::function<void()> {
      auto request = parse_messages_request(body, limits);
      if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, true); };
      return [self, request = std::move(*request)]() mutable {
        const std::string id = random_id("msg_");
        const std::string model = request.chat.model;
        const bool stream = request.chat.stream;
        self->relay_.emplace(OpenAiRelay::Shape{.stream = stream, .choices = 1, .id = id},
                             anthropic_format(id, self->state_.node.tier_for_model(model)));
        self->start_api_request(model, stream, std::move(request.chat_body), std::nullopt, openai_job(std::move(request.chat)));
      };
    });
  }

  void embeddings(std::string body) {
    prepare([self = shared_from_this(), body = std::move(body),
             limits = state_.node.request_limits()]() -> std::function<void()> {
      auto request = parse_embedding_request(body, limits);
      if (!request.ok()) return [self, error = request.error()] { self->refuse_prepared(error, false); };
      return [self, body, request = std::move(*request)]() mutable {
        const std::string id = random_id("embd-");
        const std::string model = request.model;
        self->relay_.emplace(OpenAiRelay::Shape{.stream = false, .choices = 1, .id = id},
                             embeddings_format(self->state_.node.tier_for_model(model), request.base64));
        self->start_api_request(model, false, body, std::nullopt, embeddings_job(std::move(request)));
      };
    });
  }

  // The first ticket of a request whose relay_ is set: `job`, read from
  // `body` here, once. Choice 0 runs with `seed` (or a fresh one), the
  // others with seeds derived from it.
  void start_api_request(const std::string& model, bool stream, std::string body, std::optional<uint64_t> seed,
                         JobSpec job) {
    request_id_ = relay_->ticket_id(0);
    api_ticket_ = Ticket{.task = job.task,
                         .streaming = stream,
                         .openai = state_.node.openai_call(model, std::move(body), seed),
                         .job = std::make_shared<const Outcome<JobSpec>>(std::move(job))};
    job_active_ = true;
    ++job_generation_;
    stream_.expires_never();  // a long generation is not an idle connection
    watch_for_disconnect();
    send_choice(0, received_);
  }

  // The desk takes the ticket (its job read already: admitting it parses
  // nothing) on a preparation thread, in this connection's lane.
  void send_choice(size_t choice, Clock::time_point received) {
    Ticket ticket = *api_ticket_;
    ticket.id = relay_->ticket_id(choice);
    ticket.openai->seed = choice_seed(api_ticket_->openai->seed, choice);
    auto self = shared_from_this();
    if (!state_.prep.post(lane_, [self, ticket, received]() mutable {
          self->state_.desk.on_ticket(self, std::move(ticket), received);
        }))
      refuse(relay_->ticket_id(choice), preparation_busy(state_.node.config()));
  }

  // Cancels and the end of the connection follow the tickets the lane
  // still holds, whatever the load.
  void tell_desk_cancel(const std::string& id) {
    state_.prep.post_always(lane_, [self = shared_from_this(), id] { self->state_.desk.on_cancel(self, id); });
  }
  void tell_desk_disconnect() {
    state_.prep.post_always(lane_, [self = shared_from_this()] { self->state_.desk.on_disconnect(self); });
  }

  // On the I/O thread: one event of the request in progress.
  void on_openai_event(const std::string& event) {
    if (!job_active_ || !relay_) return;
    OpenAiRelay::Step step = relay_->on_event(event);
    if (step.open_stream) {
      sse_bytes_ = 0;
      // SSE over HTTP/1.1 chunked encoding, framed here so that the header
      // and every event go through one ordered write queue.
      raw_write(
          "HTTP/1.1 200 OK\r\nServer: revis\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
          (cors_origin_.empty() ? "" : "Access-Control-Allow-Origin: " + cors_origin_ + "\r\nVary: Origin\r\n") +
          "Transfer-Encoding: chunked\r\nConnection: " + std::string(keep_alive_ ? "keep-alive" : "close") + "\r\n\r\n");
    }
    for (const SseEvent& e : step.events) sse_event(e);
    if (step.cancel) tell_desk_cancel(relay_->ticket_id(relay_->current_choice()));
    if (step.next_choice) send_choice(*step.next_choice, Clock::now());
    if (!step.finished) return;
    job_active_ = false;
    api_ticket_.reset();
    if (step.response) return respond_json(http::status::ok, std::move(*step.response));
    if (step.error) return respond_error(*step.error, relay_->error_body(*step.error));
    raw_write("0\r\n\r\n");
    sse_finished_ = true;
  }

  void sse_event(const SseEvent& e) {
    std::string payload = (e.name.empty() ? "" : "event: " + e.name + "\n") + "data: " + e.data + "\n\n";
    char size[20];
    std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
    raw_write(size + payload + "\r\n");
  }

  void raw_write(std::string bytes) {
    if (dead_) return;
    queued_bytes_ += bytes.size();
    if (queued_bytes_ > kMaxBufferedBytes) return close();
    sse_bytes_ += bytes.size();
    outbox_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    writing_ = true;
    net::async_write(stream_.socket(), net::buffer(outbox_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec) return self->close();
                       self->queued_bytes_ -= self->outbox_.front().size();
                       self->outbox_.pop_front();
                       if (!self->outbox_.empty()) return self->write_next();
                       if (self->sse_finished_) {
                         self->sse_finished_ = false;
                         self->log_request(200, self->sse_bytes_);
                         if (!self->keep_alive_) return self->close();
                         self->served_ = true;
                         self->do_read();
                       }
                     });
  }

  // While a job runs nothing is read from the connection, so a client that
  // hangs up would go unnoticed until the answer is written. Waiting for
  // readability notices it: readable with nothing to read means the peer
  // closed, and the job is cancelled.
  void watch_for_disconnect() {
    const uint64_t generation = job_generation_;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || !self->job_active_ || self->job_generation_ != generation) return;
      beast::error_code avail_ec;
      if (self->stream_.socket().available(avail_ec) == 0 || avail_ec) self->tell_desk_disconnect();
    });
  }

  // The request could not be framed, so nothing after it on this
  // connection can be either: answer, then close.
  void refuse_framing(http::status status, const std::string& why) {
    linger_ = true;
    refuse_request(status, why, status == http::status::payload_too_large ? "too_long" : "bad_request");
  }

  // A request refused before routing: answered, and the connection closed.
  void refuse_request(http::status status, const std::string& why, const char* code) {
    keep_alive_ = false;
    respond_json(status, openai_error(why, "invalid_request_error", code));
  }

  void respond_error(const NodeError& e) { respond_error(e, openai_error_for(e)); }

  // `body`: the error in the request's API's shape.
  void respond_error(const NodeError& e, std::string body) {
    http::response<http::string_body> res{static_cast<http::status>(http_status_for(e.code)), 11};
    if (e.code == ErrorCode::kQueueFull)
      res.set(http::field::retry_after, std::to_string(state_.node.executor().retry_after_seconds()));
    res.set(http::field::content_type, "application/json");
    res.body() = std::move(body);
    send_response(std::move(res));
  }

  void unauthorized() {
    keep_alive_ = false;  // a connection without the token gets no second try
    http::response<http::string_body> res{http::status::unauthorized, 11};
    res.set(http::field::www_authenticate, "Bearer");
    res.set(http::field::content_type, "application/json");
    const std::string why = "missing or wrong token (Authorization: Bearer ..., or x-api-key)";
    res.body() = anthropic_route() ? anthropic_error("authentication_error", why)
                                   : openai_error(why, "invalid_request_error", "invalid_api_key");
    send_response(std::move(res));
  }

  void method_not_allowed() {
    respond_json(http::status::method_not_allowed,
                 anthropic_route() ? anthropic_error("invalid_request_error", "method not allowed")
                                   : openai_error("method not allowed", "invalid_request_error", "method_not_allowed"));
  }

  // Anthropic's clients read errors in Anthropic's shape.
  bool anthropic_route() const { return route_ == "/v1/messages"; }

  void respond_json(http::status status, std::string body) { respond(status, "application/json", std::move(body)); }

  void respond(http::status status, const char* content_type, std::string body) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, content_type);
    res.body() = std::move(body);
    send_response(std::move(res));
  }

  void send_response(http::response<http::string_body> res) {
    res.set(http::field::server, "revis");
    if (!cors_origin_.empty()) {
      res.set(http::field::access_control_allow_origin, cors_origin_);
      res.set(http::field::vary, "Origin");
    }
    res.keep_alive(keep_alive_ && !state_.stopping);
    res.prepare_payload();
    auto msg = std::make_shared<http::response<http::string_body>>(std::move(res));
    writing_ = true;
    stream_.expires_after(kHttpReadTimeout);
    http::async_write(stream_, *msg, [self = shared_from_this(), msg](beast::error_code ec, size_t n) {
      self->writing_ = false;
      self->log_request(msg->result_int(), n);
      if (!ec && self->linger_) return self->linger();
      if (ec || !msg->keep_alive()) return self->close();
      self->served_ = true;
      self->do_read();
    });
  }

  void log_request(unsigned status, uint64_t bytes) {
    log_access({.client = client_,
                .method = method_,
                .route = route_,
                .status = std::to_string(status),
                .bytes = bytes,
                .duration_ms = ms_since(started_),
                .ticket_id = request_id_});
  }

  // Reads and discards what the client still sends, until it closes or the
  // linger time or size runs out, then closes: closing with unread bytes
  // would reset the connection, and the client could lose the response.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    buffer_.clear();
    drain();
  }

  void drain() {
    stream_.async_read_some(buffer_.prepare(16 * 1024), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > kLingerBytes) return self->close();
      self->drain();
    });
  }

  void close() {
    if (dead_) return;
    dead_ = true;
    if (job_active_) tell_desk_disconnect();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
    slot_.release();
  }

  beast::tcp_stream stream_;
  net::strand<net::any_io_executor> events_;  // in send() order, as WsSession's
  ServerState& state_;
  const std::shared_ptr<PreparationPool::Lane> lane_;  // this connection's calls to the desk, in order
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point received_;
  bool keep_alive_ = true, writing_ = false, dead_ = false;
  bool linger_ = false;      // close through linger() after the response
  std::string cors_origin_;  // the request's Origin, when CORS headers answer it
  ConnectionTable::Slot slot_;
  const std::string client_;  // the source address
  // The request in progress, for the access log.
  std::string method_ = "-", route_ = "-";
  Clock::time_point started_ = Clock::now();  // its first byte
  uint64_t sse_bytes_ = 0;
  const Clock::time_point first_request_by_;  // the handshake timeout
  bool served_ = false;                       // a response went out: the idle timeout applies
  size_t lingered_ = 0;
  // The OpenAI request in progress on this connection.
  bool job_active_ = false, sse_finished_ = false;
  uint64_t job_generation_ = 0;
  std::string request_id_;
  std::optional<OpenAiRelay> relay_;
  std::optional<Ticket> api_ticket_;  // what the tickets of its choices have in common
  std::deque<std::string> outbox_;
  size_t queued_bytes_ = 0;
};

// ---------------------------------------------------------------- accept + shutdown

void do_accept(ServerState& state);

// The caps are full of busy connections: a short 503 if the socket takes
// it at once, then close.
void refuse_connection(ServerState& state, tcp::socket& socket) {
  static const std::string kBody = R"({"error":{"message":"too many connections; try again","type":"server_error","code":"too_many_connections"}})";
  static const std::string kResponse =
      "HTTP/1.1 503 Service Unavailable\r\nServer: revis\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\nConnection: close\r\n\r\n" + kBody;
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(net::buffer(kResponse), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
  state.refusal_warnings.warn("refused a connection: " + std::to_string(state.connections.size()) +
                              " open, none idle (max_connections " + std::to_string(state.connections.max_total()) +
                              ", max_connections_per_ip " + std::to_string(state.connections.max_per_address()) + ")");
}

void on_accept_failed(ServerState& state, beast::error_code ec) {
  state.accept_warnings.warn("accept failed: " + ec.message());
  const bool out_of_descriptors = ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
                                  ec == net::error::no_memory || ec.value() == ENFILE;
  if (!out_of_descriptors) return do_accept(state);
  // Closing the longest idle connection frees a descriptor at once; with
  // none idle, wait (doubling) instead of failing again in a loop.
  if (state.connections.evict_one()) return do_accept(state);
  state.accept_timer.expires_after(state.accept_backoff);
  state.accept_backoff = std::min(state.accept_backoff * 2, kMaxAcceptBackoff);
  state.accept_timer.async_wait([&state](beast::error_code wait_ec) {
    if (!wait_ec && !state.stopping) do_accept(state);
  });
}

void do_accept(ServerState& state) {
  state.acceptor.async_accept([&state](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (state.stopping || ec == net::error::operation_aborted) return;
      return on_accept_failed(state, ec);
    }
    state.accept_backoff = kFirstAcceptBackoff;
    beast::error_code address_ec;
    const tcp::endpoint remote = socket.remote_endpoint(address_ec);
    std::optional<ConnectionTable::Slot> slot = state.connections.admit(address_ec ? std::string() : remote.address().to_string());
    if (!slot) {
      refuse_connection(state, socket);
    } else {
      // Token events are small writes that must leave at once; with Nagle's
      // algorithm each would wait for the previous one's ACK (tens of ms).
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto session = std::make_shared<HttpSession>(std::move(socket), std::move(*slot), state);
      // Forget sessions that have ended, so the list stays as long as the
      // number of live connections.
      std::erase_if(state.http_sessions, [](const auto& w) { return w.expired(); });
      state.http_sessions.push_back(session);
      session->start();
    }
    do_accept(state);
  });
}

// Raises the soft descriptor limit to the hard one, and returns how many
// client connections the limit leaves room for.
size_t connection_room() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? rlim_t(1) << 20 : limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const size_t descriptors = limit.rlim_cur == RLIM_INFINITY ? size_t(1) << 20 : static_cast<size_t>(limit.rlim_cur);
  return descriptors > 2 * kReservedDescriptors ? descriptors - kReservedDescriptors : descriptors / 2;
}

void ServerState::begin_shutdown(int code, const std::string& why) {
  if (stopping) return;
  stopping = true;
  exit_code = code;
  log_line("info", "shutting down: " + why);
  notify_stopping("shutting down: " + why);
  desk.on_shutdown();
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_timer.cancel();
  signals.cancel(ignored);
  // Stopping the executor blocks (up to the grace period) while the running
  // job finishes; the I/O thread must keep delivering its tokens meanwhile.
  const auto grace = std::chrono::milliseconds(node.config().shutdown_grace_ms);
  stopper = std::thread([this, grace] {
    node.stop(grace);
    net::post(ioc, [this] { after_executor_stopped(); });
  });
}

void ServerState::after_executor_stopped() {
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->close_going_away();
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->close_if_idle();
  stop_deadline = Clock::now() + kCloseDeadline;
  poll_connections_closed();
}

void ServerState::poll_connections_closed() {
  std::erase_if(ws_sessions, [](const auto& w) { return w.expired(); });
  std::erase_if(http_sessions, [](const auto& w) { return w.expired(); });
  if ((ws_sessions.empty() && http_sessions.empty()) || Clock::now() >= stop_deadline) {
    ioc.stop();
    return;
  }
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->close_if_idle();
  stop_timer.expires_after(std::chrono::milliseconds(20));
  stop_timer.async_wait([this](beast::error_code) { poll_connections_closed(); });
}

}  // namespace

int serve(Node& node, TicketDesk& desk) {
  const NodeConfig& config = node.config();
  const size_t room = connection_room();
  ConnectionTable connections(std::min(static_cast<size_t>(config.max_connections), room),
                              static_cast<size_t>(config.max_connections_per_ip));
  net::io_context ioc{1};
  // Declared after the I/O context: destroyed first, its tasks hold sessions.
  PreparationPool prep(static_cast<size_t>(config.prepare_queue));
  if (Status s = prep.start(config.prepare_threads, config.prepare_stack_kb * 1024); !s.ok()) {
    log_line("error", s.message());
    return 1;
  }
  ServerState state(node, desk, prep, ioc, connections);

  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(config.host, std::to_string(config.port), ec);
  if (ec || endpoints.empty()) {
    log_line("error", "cannot resolve " + config.host + ": " + ec.message());
    return 1;
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  state.acceptor.open(endpoint.protocol(), ec);
  if (!ec) state.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) state.acceptor.bind(endpoint, ec);
  if (!ec) state.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    log_line("error", "cannot listen on " + config.host + ":" + std::to_string(config.port) + ": " + ec.message());
    return 1;
  }
  const tcp::endpoint bound = state.acceptor.local_endpoint();
  desk.on_listening(bound.port());
  std::string host = bound.address().to_string();
  if (bound.address().is_v6()) host = "[" + host + "]";
  log_line("info", "node " + config.name + " listening on http://" + host + ":" + std::to_string(bound.port()) +
                       " (tickets: ws://" + host + ":" + std::to_string(bound.port()) + "/v1/revis/stream; catalogue " +
                       node.catalog().digest() + ")");

  log_line("info", "connections: at most " + std::to_string(state.connections.max_total()) + " (" +
                       std::to_string(room) + " fit the descriptor limit), " +
                       std::to_string(state.connections.max_per_address()) + " per address");
  node.start([&state, name = config.name](const Status& s) {
    if (s.ok()) {
      log_line("info", "ready");
      notify_ready("node " + name + " ready");
      return;
    }
    net::post(state.ioc, [&state, message = s.message()] {
      log_line("error", "the default tier's model did not load: " + message);
      state.begin_shutdown(1, "startup failed");
    });
  });
  state.signals.async_wait([&state](beast::error_code ec, int signal) {
    if (ec) return;
    state.begin_shutdown(0, signal == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  do_accept(state);
  keep_watchdog_fed(ioc);

  // Handlers do not throw by design; should one (allocation failure), the
  // node logs it and keeps serving rather than dying with jobs in flight.
  while (true) {
    try {
      ioc.run();
      break;
    } catch (const std::exception& e) {
      log_line("error", std::string("I/O handler failed: ") + e.what());
    }
  }
  if (state.stopper.joinable()) state.stopper.join();
  node.stop(std::chrono::milliseconds(0));
  prep.stop();
  desk.on_stopped();
  log_line("info", "stopped");
  return state.exit_code;
}

}  // namespace revis::node
