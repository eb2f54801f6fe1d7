#include "cli/ticket_channel.h"

#ifdef REVIS_HAVE_NATS
#include "broker/client.h"
#endif
#include "net/client.h"

namespace revis::cli {
namespace {

// The two clients have the same four calls; this puts them behind one type.
template <class Client>
class ChannelOver : public TicketChannel {
 public:
  explicit ChannelOver(std::unique_ptr<Client> client) : client_(std::move(client)) {}
  Status send(std::string_view ticket) override { return client_->send(ticket); }
  Result<std::string> receive(int timeout_ms) override { return client_->receive(timeout_ms); }
  void close() override { client_->close(); }
  void abort() override { client_->abort(); }

 private:
  std::unique_ptr<Client> client_;
};

template <class Client>
Result<std::unique_ptr<TicketChannel>> wrap(Result<std::unique_ptr<Client>> client) {
  if (!client.ok()) return client.status();
  return std::unique_ptr<TicketChannel>(new ChannelOver<Client>(std::move(*client)));
}

}  // namespace

std::string channel_name(const ChannelTarget& t) { return t.broker.empty() ? "node " + t.node : "broker " + t.broker; }

Result<std::unique_ptr<TicketChannel>> open_channel(const ChannelTarget& t, int timeout_ms) {
  if (!t.broker.empty()) {
#ifdef REVIS_HAVE_NATS
    broker::BrokerOptions o;
    o.servers = t.broker;
    o.creds = t.broker_creds;
    o.name = "revis client";
    o.timeout_ms = timeout_ms;
    return wrap(broker::TicketClient::connect(o));
#else
    return Status::error("--broker: this build of revis has no NATS client (it was built without libnats-dev)");
#endif
  }
  auto node = node::parse_host_port(t.node, 8080);
  if (!node.ok()) return node.status();
  return wrap(node::WsClient::connect(*node, "/v1/revis/stream", t.token, timeout_ms));
}

}  // namespace revis::cli
