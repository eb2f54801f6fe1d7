// The peer set: the other nodes this one sends tickets to, and this node as
// they see it.
//
//  - Peers. One PeerLink per --peer, and per node found with mDNS
//    (--discover, fabric/discovery.h), known by HOST:PORT: the peer's state
//    as it last pushed it, whether its link is up and on which session, the
//    tickets this node sent there that have not ended. A found peer is
//    forgotten once its service is withdrawn and its link is down: the
//    link, not mDNS, says whether a peer is alive.
//  - This node's state (NodeState): what a peer that subscribed here hears,
//    at once, on every busy/idle change of the executor and every
//    heartbeat, and what discovery advertises.
//  - Heartbeats: every heartbeat_ms the state goes to the subscribers and
//    the owner's tick runs (the dispatcher's cluster feed).
//
// The set knows nothing of tickets. Its links' events go to the owner (the
// dispatcher), which calls link_up, hear and link_down with its ticket
// book's lock held, so that a peer's link and state change only with that
// lock held: a view taken under it (views()) stays true until it is
// released, and the peer it names stays in the set.
//
// Thread-safety: every method may be called from any thread; mu_ guards the
// peers and this node's counters, and no callback runs under it. The owner
// may call in with the book's lock held (order: book, then mu_); the set
// never waits for the book. State pushes are serialised by push_mu_ (order:
// push_mu_, then mu_) so that a subscriber never hears an older state after
// a newer one. mu_ is not held while the executor is asked for its state,
// since the executor calls the owner's placement predicates under its own
// lock, and those read views, not the set.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "fabric/discovery.h"
#include "fabric/node_state.h"
#include "fabric/peer_link.h"
#include "node/node.h"
#include "node/ticket_desk.h"

namespace boost::asio {
class io_context;
}

namespace revis::fabric {

// A peer as the dispatcher places tickets with: a copy, taken under the
// book's lock (see above).
struct PeerView {
  std::string key;  // HOST:PORT
  uint64_t session = 0;
  bool up = false;
  bool known = false;  // a state has arrived on this session
  bool is_self = false;
  NodeState state;
  int in_flight = 0;  // tickets this node sent there that have not ended
  node::Clock::time_point idle_since{};
  // Up, its state known, not this node, and the same catalogue: it may get
  // tickets of the tiers it serves.
  bool takes_tickets(const std::string& catalog) const { return up && known && !is_self && state.catalog == catalog; }
};

class PeerSet {
 public:
  // A link's events, naming the peer and the link (a forgotten peer's link
  // is not the one of a peer found again at the same address).
  struct Events {
    std::function<void(const std::string& key, uint64_t link_id, uint64_t session)> on_up;
    std::function<void(const std::string& key, uint64_t link_id, uint64_t session, const std::string& text)> on_message;
    std::function<void(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why)> on_down;
  };

  PeerSet(node::Node& node, boost::asio::io_context& io, Events events);
  ~PeerSet();

  // The configured peers (--peer); their links start with start_links().
  Status add_configured(const std::vector<std::string>& peers) EXCLUDES(mu_);
  void start_links() EXCLUDES(mu_);
  // Advertises this node on `port` and adds the nodes it finds.
  void start_discovery(int port) EXCLUDES(mu_, push_mu_);
  // No more nodes are found; the ones found stay.
  void stop_discovery() EXCLUDES(mu_);
  // Pushes the state now and every heartbeat, then runs `on_tick`.
  void start_heartbeat(std::function<void()> on_tick) EXCLUDES(mu_, push_mu_);
  // Stops every link (no more events), then forgets the peers.
  void stop_links() EXCLUDES(mu_);
  void clear() EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

  // ---- for placement (see the top: the owner holds the book's lock)
  std::vector<PeerView> views() const EXCLUDES(mu_);
  bool contains(const std::string& key) const EXCLUDES(mu_);
  // The peer's node name, or `key` while it has none.
  std::string name_of(const std::string& key) const EXCLUDES(mu_);
  // Sends a ticket on `session` and counts it in flight there; a session
  // that is over reports its link down instead (PeerLink::send).
  void send_ticket(const std::string& key, uint64_t session, std::string text) EXCLUDES(mu_);
  void send(const std::string& key, uint64_t session, std::string text) EXCLUDES(mu_);
  // A ticket sent on `session` ended (done or error).
  void ticket_ended(const std::string& key, uint64_t session) EXCLUDES(mu_);
  // It refused a ticket as busy: busy until its next state says otherwise.
  void mark_busy(const std::string& key) EXCLUDES(mu_);

  // ---- the links' events, as the owner hands them back
  void link_up(const std::string& key, uint64_t link_id, uint64_t session) EXCLUDES(mu_);
  // A message on the current session of the peer's link: noted as heard;
  // a state (`peer`) or an error about no ticket is taken in. Null for a
  // message of another link or session, or an unreadable state.
  struct Heard {
    std::optional<PeerView> new_state;  // a state arrived: the peer as it is now
    bool busy_changed = false;           // with new_state: it went busy or idle
  };
  std::optional<Heard> hear(const std::string& key, uint64_t link_id, uint64_t session, const nlohmann::json& message)
      EXCLUDES(mu_);
  // The link's session ended: true when it was the peer's current one (it
  // is down now; logged).
  bool link_down(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why) EXCLUDES(mu_);
  // A peer of the current link: false for a forgotten peer's late event.
  bool current(const std::string& key, uint64_t link_id) const EXCLUDES(mu_);
  // Forgets a found peer whose service is gone and whose link is down.
  void forget_if_gone(const std::string& key) EXCLUDES(mu_);

  // ---- this node
  NodeState local_state() const EXCLUDES(mu_);
  node::Clock::time_point self_idle_since() const EXCLUDES(mu_);
  void note_executor(bool busy) EXCLUDES(mu_);
  void note_job_speed(double gen_tok_s) EXCLUDES(mu_);
  // Any node (this one included) publishes KV prefixes for `tier`.
  bool kv_prefixes_published(const std::string& tier) const EXCLUDES(mu_);

  // ---- the peers subscribed to this node's state
  // Adds a subscriber (once) and sends it the state.
  void subscribe(const std::shared_ptr<node::ClientLink>& link, const std::string& node_name) EXCLUDES(mu_, push_mu_);
  bool subscribed(const std::shared_ptr<node::ClientLink>& link) const EXCLUDES(mu_);
  // False when `link` was no subscriber.
  bool unsubscribe(const std::shared_ptr<node::ClientLink>& link) EXCLUDES(mu_);
  void clear_subscribers() EXCLUDES(mu_);
  void push_state() EXCLUDES(mu_, push_mu_);

  // The cluster view's nodes (this node first) and what they queue and run.
  struct ClusterNodes {
    nlohmann::json nodes;
    int queued = 0, running = 0;
  };
  ClusterNodes cluster_nodes(const NodeState& self) const EXCLUDES(mu_);

 private:
  struct Peer;
  Peer& add(const node::HostPort& at, const char* found) REQUIRES(mu_);
  Peer* find(const std::string& key, uint64_t link_id) REQUIRES(mu_);
  void forget(const std::string& key) REQUIRES(mu_);
  void on_discovered(const DiscoveredNode& found) EXCLUDES(mu_);
  void on_discovery_lost(const std::string& service) EXCLUDES(mu_);
  void heartbeat(std::function<void()> on_tick) EXCLUDES(mu_, push_mu_);
  static node::TicketEvent state_event(const NodeState& state);

  node::Node& node_;
  const node::NodeConfig& config_;
  const std::string instance_;  // random per process: tells this node among the peers
  boost::asio::io_context& io_;
  const Events events_;

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Peer>> peers_ GUARDED_BY(mu_);  // by HOST:PORT
  uint64_t last_link_id_ GUARDED_BY(mu_) = 0;
  bool discovering_ GUARDED_BY(mu_) = false;  // false once stopped: late events add no peer
  std::vector<std::shared_ptr<node::ClientLink>> subscribers_ GUARDED_BY(mu_);
  node::Clock::time_point self_idle_since_ GUARDED_BY(mu_) = node::Clock::now();
  bool self_was_busy_ GUARDED_BY(mu_) = false;
  double tok_per_s_ GUARDED_BY(mu_) = 0;

  Mutex push_mu_;  // serialises state pushes (see the top)

  // Set on the server's thread (start_discovery, stop_discovery) and in the
  // destructor only; its events reach mu_ through io_.
  std::unique_ptr<Discovery> discovery_;
};

}  // namespace revis::fabric
