#include "broker/serve.h"

#include "base/log.h"
#include "broker/desk.h"
#include "broker/worker.h"
#include "net/server.h"

namespace revis::broker {

int serve_with_broker(node::Node& node) {
  const node::NodeConfig& c = node.config();
  BrokerOptions options;
  options.servers = c.broker;
  options.creds = c.broker_creds;
  options.tls_ca = c.broker_tls_ca;
  options.name = "revis node " + c.name;
  options.retry_first_connect = true;  // a node starts before its broker, or while it is down
  auto conn = Connection::connect(options);
  if (!conn.ok()) {
    revis::log_line("error", conn.status().message());
    return 1;
  }
  ConsumerSettings consumers;
  consumers.ack_wait_ms = c.broker_ack_wait_ms;
  consumers.max_deliver = c.broker_max_deliver;
  StreamSettings streams;
  streams.replicas = c.broker_replicas;
  Worker worker(node, **conn, streams, consumers);
  Desk desk(node, **conn, worker);
  node.set_transport_report({"broker", [&worker] { return worker.status_json(); }, [&worker] { return worker.metrics_text(); }});
  worker.start();
  const int code = node::serve(node, desk);
  worker.stop();
  return code;
}

}  // namespace revis::broker
