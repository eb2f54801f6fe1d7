// What the server's connections share (net/server.h): the node, the desk,
// the preparation pool, the I/O context, the connection caps and the
// shutdown state, and the helpers both sessions use (header fields, the
// token, ids). Internal to net/: server.cpp, ws_session.cpp and the
// http_session files include it; nothing outside net/ does.
//
// Thread-safety: ServerState belongs to the I/O thread. A session's work
// on a preparation thread reads only `node` and `desk`, which are safe from
// any thread, and `prep` and `responses`, which are.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

#include "api/response_store.h"
#include "net/connection_table.h"
#include "net/preparation_pool.h"
#include "net/request_guard.h"
#include "node/node.h"
#include "node/ticket_desk.h"
#include "protocol/bearer.h"

namespace revis::node {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A client that stops reading while tokens keep coming would make the node
// buffer without bound; past this many unsent bytes the connection is
// dropped and its tickets cancelled.
constexpr size_t kMaxBufferedBytes = 16u << 20;
constexpr auto kHttpReadTimeout = std::chrono::seconds(30);
// A request's header (request line included) and its number of fields.
constexpr size_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kMaxHeaderFields = 100;
// accept() out of descriptors: wait this long before trying again, doubling
// up to the maximum, instead of failing in a loop.
constexpr auto kFirstAcceptBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxAcceptBackoff = std::chrono::milliseconds(1000);

class WsSession;
class HttpSession;

// At most one line per interval (10 s) for a warning that repeats (a flood
// must not fill the disk with log); the lines left out are counted in the
// next one.
class WarningLimiter {
 public:
  void warn(const std::string& message);

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
  ResponseStore responses;  // the Responses API's kept responses (safe from any thread)

  ServerState(Node& n, TicketDesk& d, PreparationPool& p, net::io_context& io, ConnectionTable& c);
  // Stops accepting, tells the desk, and stops the executor on a thread of
  // its own (the I/O thread keeps delivering the running job's tokens);
  // then the sessions close and the I/O context stops.
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

// The node's token in Authorization: Bearer or x-api-key (any request when
// there is no token).
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

// A request refused because the preparation threads have prepare_queue
// requests waiting already.
NodeError preparation_busy(const NodeConfig& config);

double ms_since(Clock::time_point start);

// `prefix` and 16 random hex digits: a response's id.
std::string random_id(const char* prefix);

}  // namespace revis::node
