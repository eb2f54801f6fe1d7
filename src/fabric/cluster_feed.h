// The cluster feed: what a client that sent {"type":"subscribe","feed":
// "cluster"} hears (the dashboard, web/; docs/protocol.md, "Following the
// cluster"): the catalogue once, the cluster view at once, on every change
// of this node and every heartbeat, and an update of each ticket this node
// accepted whenever its state changes (queued, running, done, failed).
// The feed keeps the subscribers and makes the events from the ticket book
// (the dispatcher's records), the dispatcher's waiting line and the peer
// set.
//
// Thread-safety: any thread; mu_ guards the subscribers. What reads the
// book REQUIRES its lock (book.mu), held by the dispatcher, so that the
// events about its tickets go out in the order their changes were made
// (order: book, then mu_, then the peer set's). Sending only queues
// (ClientLink::send), so it is done under mu_.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "fabric/peer_set.h"
#include "fabric/ticket_record.h"
#include "node/node.h"
#include "node/ticket_book.h"
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
  ClusterFeed(const node::Node& node, const PeerSet& peers);

  // Adds a subscriber (once) and sends it the catalogue, the cluster view
  // and the most recent tickets of `book`.
  void add(const std::shared_ptr<node::ClientLink>& link, const node::TicketBook& book, size_t waiting,
           const std::set<std::string>& running_labels) REQUIRES(book.mu) EXCLUDES(mu_);
  void remove(const std::shared_ptr<node::ClientLink>& link) EXCLUDES(mu_);
  void clear() EXCLUDES(mu_);

  // GET /v1/revis/cluster's object: the nodes (PeerSet::cluster_nodes),
  // `waiting` tickets in the dispatcher's own line, and those of `book`.
  nlohmann::json cluster_view(const node::TicketBook& book, size_t waiting) const REQUIRES(book.mu);
  // The view, to every subscriber.
  void publish_cluster(const node::TicketBook& book, size_t waiting) const REQUIRES(book.mu) EXCLUDES(mu_);
  // A ticket's state, to every subscriber: `running_labels` are the
  // executor's running jobs, as last seen.
  void publish(const TicketRecord& rec, const std::set<std::string>& running_labels) const EXCLUDES(mu_);

  // {"type":"cluster","view":VIEW}: `view` is GET /v1/revis/cluster's object.
  static node::TicketEvent cluster_event(const nlohmann::json& view);
  // {"type":"ticketUpdate","ticket":{...}}.
  static node::TicketEvent ticket_event(const TicketView& ticket);

 private:
  TicketView view_of(const TicketRecord& rec, const std::set<std::string>& running_labels) const;
  bool empty() const EXCLUDES(mu_);
  void send(const node::TicketEvent& event) const EXCLUDES(mu_);

  const node::Node& node_;
  const PeerSet& peers_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<node::ClientLink>> subscribers_ GUARDED_BY(mu_);
};

}  // namespace revis::fabric
