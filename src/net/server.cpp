#include "net/server.h"

#include <sys/resource.h>

#include <cerrno>
#include <csignal>

#include <boost/beast/core.hpp>

#include "base/log.h"
#include "net/http_session.h"
#include "net/service_notify.h"
#include "net/ws_session.h"

namespace revis::node {
namespace {

// Descriptors kept for what is not a client connection (models, journal,
// KV files, peer links, the resolver); the rest of the limit is for clients.
constexpr size_t kReservedDescriptors = 64;

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
