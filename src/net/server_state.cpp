#include "net/server_state.h"

#include <unistd.h>

#include <csignal>
#include <random>

#include "base/log.h"
#include "base/mutex.h"
#include "net/http_session.h"
#include "net/service_notify.h"
#include "net/ws_session.h"

namespace revis::node {
namespace {

constexpr auto kCloseDeadline = std::chrono::seconds(3);
constexpr auto kWarningInterval = std::chrono::seconds(10);

std::string machine_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

}  // namespace

void WarningLimiter::warn(const std::string& message) {
  const Clock::time_point now = Clock::now();
  if (now < next_) {
    ++left_out_;
    return;
  }
  log_line("warn", left_out_ == 0 ? message : message + " (and " + std::to_string(left_out_) + " more since the last such line)");
  left_out_ = 0;
  next_ = now + kWarningInterval;
}

ServerState::ServerState(Node& n, TicketDesk& d, PreparationPool& p, net::io_context& io, ConnectionTable& c)
    : node(n), desk(d), prep(p), ioc(io), acceptor(io), signals(io, SIGINT, SIGTERM), stop_timer(io),
      guard(n.config(), machine_name()), connections(c), accept_timer(io) {}

NodeError preparation_busy(const NodeConfig& config) {
  return {ErrorCode::kQueueFull, "the node has " + std::to_string(config.prepare_queue) +
                                     " requests waiting to be prepared (prepare_queue); try again"};
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

}  // namespace revis::node
