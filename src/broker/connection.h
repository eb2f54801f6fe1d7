// A connection to a NATS server (or cluster) with its JetStream context:
// the one place revis calls libnats' connection API. RAII owns the
// natsConnection, the jsCtx and every subscription; errors come back as
// Status values that name the server and what was being done.
//
// The connection reconnects by itself (forever, with a growing wait, to any
// server of the list); while it is down, publish() fails at once and
// connected() is false. With `retry_first_connect` a node starts even when
// no server answers yet and connects in the background.
//
// Thread-safety: every method may be called from any thread (libnats
// serializes); subscription callbacks run on libnats' threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "revis/status.h"

struct __natsConnection;
struct __jsCtx;
struct __natsSubscription;

namespace revis::broker {

struct BrokerOptions {
  std::string servers;      // "nats://HOST:PORT[,HOST:PORT...]" (the scheme may be omitted)
  std::string creds;        // a NATS .creds file (JWT + NKey seed); empty: none
  std::string tls_ca;       // CA bundle for tls:// servers; empty: the system's
  std::string name;         // the connection's name in the server's monitoring
  int timeout_ms = 5000;    // connect, and each JetStream request (publish acks, stream info)
  bool retry_first_connect = false;
};

// The server list as libnats takes it: "h:p" entries get "nats://".
Result<std::vector<std::string>> parse_server_list(const std::string& servers);

// An incoming core NATS message, as a subscription hands it over.
struct Message {
  std::string subject;
  std::string data;
};

// A core subscription; unsubscribes when destroyed.
class Subscription {
 public:
  explicit Subscription(__natsSubscription* sub) : sub_(sub) {}
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  __natsSubscription* sub_;
};

class Connection {
 public:
  static Result<std::unique_ptr<Connection>> connect(const BrokerOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const;
  // The server connected to now, else the configured list.
  std::string server() const;

  // JetStream publish with the Nats-Msg-Id header; returns once the stream
  // has stored it (or recognized `msg_id` as a duplicate: still ok).
  // `timeout_ms` 0: the connection's timeout.
  Status publish(const std::string& subject, std::string_view data, const std::string& msg_id, int timeout_ms = 0);
  // Core NATS publish: not stored, not acknowledged.
  Status publish_core(const std::string& subject, std::string_view data);
  // Core subscription; `on_message` runs on a libnats thread, in order.
  Result<std::unique_ptr<Subscription>> subscribe(const std::string& subject,
                                                  std::function<void(const Message&)> on_message);
  // Makes sure the server has seen every publish and subscription so far.
  Status flush();
  // The newest message stored under `subject` in `stream`; nullopt when
  // there is none.
  Result<std::optional<std::string>> last_message(const std::string& stream, const std::string& subject);
  // The message stored at sequence `seq` of `stream`; nullopt when there is
  // none (never stored, or deleted).
  Result<std::optional<std::string>> message_at(const std::string& stream, uint64_t seq);
  // Deletes the message at `seq` from `stream`: true, or false when it was
  // already gone.
  Result<bool> delete_message(const std::string& stream, uint64_t seq);

  // For the rest of the broker module (streams.cpp, pull.cpp).
  __natsConnection* nc() const { return nc_; }
  __jsCtx* js() const { return js_; }
  const BrokerOptions& options() const { return options_; }
  // "what on SERVER: libnats' words (and the last error's detail)".
  Status error(int nats_status, const std::string& what) const;

 private:
  Connection(BrokerOptions options, __natsConnection* nc, __jsCtx* js)
      : options_(std::move(options)), nc_(nc), js_(js) {}
  BrokerOptions options_;
  __natsConnection* nc_;
  __jsCtx* js_;
};

}  // namespace revis::broker
