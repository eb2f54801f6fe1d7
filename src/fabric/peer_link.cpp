#include "fabric/peer_link.h"

#include <deque>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace revis::fabric {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr auto kFirstRetry = std::chrono::milliseconds(200);
constexpr auto kMaxRetry = std::chrono::seconds(4);

}  // namespace

// Everything below runs on the io_context's thread; public calls post to it.
struct PeerLink::Impl : std::enable_shared_from_this<PeerLink::Impl> {
  net::io_context& io;
  node::HostPort peer;
  std::string token, hello;
  std::chrono::milliseconds heartbeat_timeout;
  PeerLinkEvents events;

  tcp::resolver resolver{io};
  net::steady_timer retry_timer{io}, heartbeat_timer{io};
  std::unique_ptr<websocket::stream<beast::tcp_stream>> ws;
  beast::flat_buffer buffer;
  std::deque<std::string> outbox;
  bool writing = false, up = false, stopped = false;
  uint64_t session = 0;  // the current (or last) session
  Clock::time_point last_heard;
  std::chrono::milliseconds retry_delay = kFirstRetry;

  Impl(net::io_context& i, node::HostPort p, std::string t, std::string h, std::chrono::milliseconds hb, PeerLinkEvents e)
      : io(i), peer(std::move(p)), token(std::move(t)), hello(std::move(h)), heartbeat_timeout(hb), events(std::move(e)) {}

  std::string where() const { return peer.host + ":" + std::to_string(peer.port); }

  void connect() {
    if (stopped) return;
    ws = std::make_unique<websocket::stream<beast::tcp_stream>>(io);
    resolver.async_resolve(peer.host, std::to_string(peer.port),
                           [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                             if (ec) return self->retry_later();
                             self->on_resolved(results);
                           });
  }

  void on_resolved(const tcp::resolver::results_type& results) {
    if (stopped) return;
    beast::get_lowest_layer(*ws).expires_after(kConnectTimeout);
    beast::get_lowest_layer(*ws).async_connect(results, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return self->retry_later();
      self->on_connected();
    });
  }

  void on_connected() {
    if (stopped) return;
    beast::error_code ignored;
    beast::get_lowest_layer(*ws).socket().set_option(tcp::no_delay(true), ignored);
    ws->set_option(websocket::stream_base::decorator([token = token](websocket::request_type& req) {
      req.set(http::field::user_agent, "revis-peer");
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    }));
    ws->read_message_max(64u << 20);
    ws->async_handshake(where(), "/v1/revis/stream", [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->retry_later();
      self->on_handshake();
    });
  }

  void on_handshake() {
    if (stopped) return;
    beast::get_lowest_layer(*ws).expires_never();  // liveness is the heartbeat's job
    up = true;
    ++session;
    retry_delay = kFirstRetry;
    last_heard = Clock::now();
    outbox.clear();
    write(hello);
    arm_heartbeat();
    read();
    if (events.on_up) events.on_up(session);
  }

  void read() {
    ws->async_read(buffer, [self = shared_from_this(), s = session](beast::error_code ec, size_t) {
      if (s != self->session || !self->up) return;
      if (ec) return self->down("connection closed: " + ec.message());
      self->last_heard = Clock::now();
      std::string text = beast::buffers_to_string(self->buffer.data());
      self->buffer.consume(self->buffer.size());
      if (self->events.on_message) self->events.on_message(s, std::move(text));
      if (self->up && s == self->session) self->read();
    });
  }

  void arm_heartbeat() {
    heartbeat_timer.expires_after(heartbeat_timeout / 4);
    heartbeat_timer.async_wait([self = shared_from_this(), s = session](beast::error_code ec) {
      if (ec || s != self->session || !self->up) return;
      if (Clock::now() - self->last_heard > self->heartbeat_timeout)
        return self->down("no heartbeat for " + std::to_string(self->heartbeat_timeout.count()) + " ms");
      self->arm_heartbeat();
    });
  }

  void write(std::string text) {
    outbox.push_back(std::move(text));
    if (!writing) write_next();
  }

  void write_next() {
    writing = true;
    ws->text(true);
    ws->async_write(net::buffer(outbox.front()), [self = shared_from_this(), s = session](beast::error_code ec, size_t) {
      if (s != self->session || !self->up) return;
      self->writing = false;
      if (ec) return self->down("send failed: " + ec.message());
      self->outbox.pop_front();
      if (!self->outbox.empty()) self->write_next();
    });
  }

  // The session is over: close the socket (pending handlers finish with
  // errors and see the session is gone), tell the dispatcher, reconnect.
  void down(const std::string& why) {
    if (!up) return;
    up = false;
    writing = false;
    outbox.clear();
    heartbeat_timer.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(*ws).socket().close(ignored);
    if (events.on_down) events.on_down(session, why);
    retry_later();
  }

  void retry_later() {
    if (stopped) return;
    retry_timer.expires_after(retry_delay);
    retry_delay = std::min<std::chrono::milliseconds>(retry_delay * 2, kMaxRetry);
    retry_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->connect();
    });
  }

  void send(uint64_t s, std::string text) {
    if (stopped) return;
    if (!up || s != session) {
      if (events.on_down) events.on_down(s, "the link to " + where() + " is down");
      return;
    }
    write(std::move(text));
  }

  void stop() {
    stopped = true;
    retry_timer.cancel();
    heartbeat_timer.cancel();
    resolver.cancel();
    up = false;
    if (ws) {
      beast::error_code ignored;
      beast::get_lowest_layer(*ws).socket().close(ignored);
    }
  }
};

PeerLink::PeerLink(net::io_context& io, node::HostPort peer, std::string token, std::string hello,
                   std::chrono::milliseconds heartbeat_timeout, PeerLinkEvents events)
    : impl_(std::make_shared<Impl>(io, std::move(peer), std::move(token), std::move(hello), heartbeat_timeout,
                                   std::move(events))) {}

PeerLink::~PeerLink() { stop(); }

void PeerLink::start() {
  net::post(impl_->io, [impl = impl_] { impl->connect(); });
}

void PeerLink::send(uint64_t session, std::string text) {
  net::post(impl_->io, [impl = impl_, session, text = std::move(text)]() mutable { impl->send(session, std::move(text)); });
}

void PeerLink::stop() {
  net::post(impl_->io, [impl = impl_] { impl->stop(); });
}

const node::HostPort& PeerLink::peer() const { return impl_->peer; }

}  // namespace revis::fabric
