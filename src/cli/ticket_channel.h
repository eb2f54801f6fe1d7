// Where `revis submit` and `revis batch` send tickets: a node's WebSocket
// (net/client.h), or, with --broker, NATS JetStream directly
// (broker/client.h). Both carry the ticket protocol's messages: tickets
// out; accepted, token, done and error events back.
//
// Thread-safety: one thread uses a channel.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "revis/status.h"

namespace revis::cli {

class TicketChannel {
 public:
  virtual ~TicketChannel() = default;
  virtual Status send(std::string_view ticket) = 0;
  // The next event; the error "timeout" when none came in time.
  virtual Result<std::string> receive(int timeout_ms) = 0;
  virtual void close() = 0;
  // Goes away without a goodbye (a lost connection).
  virtual void abort() = 0;
};

struct ChannelTarget {
  std::string node = "127.0.0.1:8080";  // HOST:PORT, when broker is empty
  std::string token;   // the node's bearer token
  std::string broker;  // nats://HOST:PORT[,...]: NATS instead of a node
  std::string broker_creds;
};

Result<std::unique_ptr<TicketChannel>> open_channel(const ChannelTarget& target, int timeout_ms);

// "node HOST:PORT" or "broker URL", for messages.
std::string channel_name(const ChannelTarget& target);

}  // namespace revis::cli
