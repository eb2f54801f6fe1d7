// The cluster feed: what a client that sent {"type":"subscribe","feed":
// "cluster"} hears (the dashboard, web/; docs/protocol.md, "Following the
// cluster"): the catalogue once, the cluster view at once, on every change
// of this node and every heartbeat, and an update of each ticket this node
// accepted whenever its state changes (queued, running, done, failed).
// The dispatcher knows all of it; this file keeps the subscribers and
// writes the events.
//
// Thread-safety: none of its own; the dispatcher calls it with its mutex
// held. Sending only queues (ClientLink::send).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "node/ticket_desk.h"

namespace revis::fabric {

// A ticket as the feed shows it.
struct TicketView {
  std::string id, task;
  std::string state;  // "queued", "running"; "done" or "failed" from `terminal`
  std::string node;   // where it runs or ran; empty while it waits for a node
  int attempt = 1;
  int64_t received_unix_ms = 0;
  bool openai = false;            // an OpenAI API request: its result is not kept
  node::TicketEvent terminal;     // done or failed: the final event, whose stats and error it reports
};

class ClusterFeed {
 public:
  bool empty() const { return subscribers_.empty(); }
  // Adds a subscriber (once) and sends it the catalogue: `catalog` is its
  // canonical JSON, `digest` the digest of that.
  void add(const std::shared_ptr<node::ClientLink>& link, const std::string& digest, const std::string& catalog);
  void remove(const std::shared_ptr<node::ClientLink>& link);
  void clear() { subscribers_.clear(); }

  // {"type":"cluster","view":VIEW}: `view` is GET /v1/revis/cluster's object.
  static node::TicketEvent cluster_event(const nlohmann::json& view);
  // {"type":"ticketUpdate","ticket":{...}}.
  static node::TicketEvent ticket_event(const TicketView& ticket);

  // To every subscriber.
  void send(const node::TicketEvent& event) const;

 private:
  std::vector<std::shared_ptr<node::ClientLink>> subscribers_;
};

}  // namespace revis::fabric
