#include "fabric/peer_set.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/log.h"

namespace revis::fabric {
namespace {

namespace net = boost::asio;
using nlohmann::json;
using node::Clock;

std::string random_instance() {
  std::random_device rd;
  std::mt19937_64 rng((uint64_t(rd()) << 32) ^ rd());
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// How a peer became one, as the cluster view shows it.
constexpr const char* kFoundInConfig = "config";  // --peer, or peers = [...]
constexpr const char* kFoundByMdns = "mdns";      // --discover

}  // namespace

struct PeerSet::Peer {
  PeerView view;
  const char* found = kFoundInConfig;
  std::string service;  // the mDNS service that names this peer, while one does
  uint64_t link_id = 0;
  std::unique_ptr<PeerLink> link;
  Clock::time_point last_heard{};
  std::string last_error;
};

PeerSet::PeerSet(node::Node& node, net::io_context& io, Events events)
    : node_(node), config_(node.config()), instance_(random_instance()), io_(io), events_(std::move(events)) {}

PeerSet::~PeerSet() = default;

Status PeerSet::add_configured(const std::vector<std::string>& peers) {
  MutexLock lock(mu_);
  for (const std::string& text : peers) {
    auto hp = node::parse_host_port(text, 8080);
    if (!hp.ok()) return hp.status().with_context("--peer");
    add(*hp, kFoundInConfig);
  }
  return {};
}

PeerSet::Peer& PeerSet::add(const node::HostPort& at, const char* found) {
  const std::string key = at.host + ":" + std::to_string(at.port);
  std::unique_ptr<Peer>& slot = peers_[key];
  if (slot) return *slot;  // named twice: one peer
  slot = std::make_unique<Peer>();
  Peer& peer = *slot;
  peer.view.key = key;
  peer.view.idle_since = Clock::now();
  peer.found = found;
  peer.link_id = ++last_link_id_;
  PeerLinkEvents events;
  events.on_up = [this, key, id = peer.link_id](uint64_t s) { events_.on_up(key, id, s); };
  events.on_message = [this, key, id = peer.link_id](uint64_t s, std::string text) { events_.on_message(key, id, s, text); };
  events.on_down = [this, key, id = peer.link_id](uint64_t s, const std::string& why) { events_.on_down(key, id, s, why); };
  const std::string hello = json{{"type", "subscribe"}, {"node", config_.name}}.dump();
  peer.link = std::make_unique<PeerLink>(io_, at, config_.token, hello, std::chrono::milliseconds(3 * config_.heartbeat_ms),
                                         std::move(events));
  return peer;
}

void PeerSet::start_links() {
  MutexLock lock(mu_);
  for (auto& [key, peer] : peers_) peer->link->start();
}

void PeerSet::stop_links() {
  MutexLock lock(mu_);
  for (auto& [key, peer] : peers_) peer->link->stop();
}

void PeerSet::clear() {
  MutexLock lock(mu_);
  peers_.clear();
}

size_t PeerSet::size() const {
  MutexLock lock(mu_);
  return peers_.size();
}

// ---------------------------------------------------------------- discovery

void PeerSet::start_discovery(int port) {
  const NodeState me = local_state();
  const Advertisement self{me.name, me.instance, me.catalog, me.tiers, config_.host, port};
  {
    MutexLock lock(mu_);
    discovering_ = true;
  }
  // Avahi's thread hands each event to the I/O thread, so that it never
  // waits for mu_.
  DiscoveryEvents events;
  events.on_found = [this](const DiscoveredNode& found) { net::post(io_, [this, found] { on_discovered(found); }); };
  events.on_lost = [this](const std::string& service) { net::post(io_, [this, service] { on_discovery_lost(service); }); };
  auto started = Discovery::start(self, std::move(events));
  if (!started.ok()) return revis::log_line("warn", started.status().message());
  discovery_ = std::move(*started);
}

void PeerSet::stop_discovery() {
  {
    MutexLock lock(mu_);
    discovering_ = false;
  }
  discovery_.reset();  // no discovery event is posted after this
}

// A node found on the LAN becomes a peer like a --peer, unless it is this
// node or a peer already (by address, or by instance: the same node under a
// configured host name, or found before at another address).
void PeerSet::on_discovered(const DiscoveredNode& found) {
  MutexLock lock(mu_);
  if (!discovering_ || found.instance == instance_) return;
  const std::string key = found.address + ":" + std::to_string(found.port);
  for (auto& [k, p] : peers_)
    if (k == key || (p->view.known && p->view.state.instance == found.instance)) {
      p->service = found.service;
      return;
    }
  Peer& p = add({found.address, found.port}, kFoundByMdns);
  p.service = found.service;
  p.link->start();
  revis::log_line("info", "fabric: found node " + found.name + " at " + key + " with mDNS" +
                             (found.catalog == node_.catalog().digest() ? "" : " (another catalogue: it gets no tickets)"));
}

// A withdrawn service says little about the node (mDNS records expire, a
// daemon restarts): a found peer whose link is up stays until the link
// fails; one whose link is down is forgotten now.
void PeerSet::on_discovery_lost(const std::string& service) {
  MutexLock lock(mu_);
  std::vector<std::string> gone;
  for (auto& [key, p] : peers_) {
    if (p->service != service) continue;
    p->service.clear();
    if (p->found == kFoundByMdns && !p->view.up) gone.push_back(key);
  }
  for (const std::string& key : gone) forget(key);
}

void PeerSet::forget_if_gone(const std::string& key) {
  MutexLock lock(mu_);
  auto it = peers_.find(key);
  if (it != peers_.end() && it->second->found == kFoundByMdns && it->second->service.empty() && !it->second->view.up)
    forget(key);
}

void PeerSet::forget(const std::string& key) {
  auto it = peers_.find(key);
  const std::string& name = it->second->view.state.name;
  revis::log_line("info", "fabric: peer " + key + (name.empty() ? "" : " (" + name + ")") +
                             " forgotten: its mDNS service is gone and its link is down");
  peers_.erase(it);  // its link stops; its late events find no peer
}

// ---------------------------------------------------------------- placement

std::vector<PeerView> PeerSet::views() const {
  MutexLock lock(mu_);
  std::vector<PeerView> out;
  for (const auto& [key, p] : peers_) out.push_back(p->view);
  return out;
}

bool PeerSet::contains(const std::string& key) const {
  MutexLock lock(mu_);
  return peers_.count(key) > 0;
}

std::string PeerSet::name_of(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = peers_.find(key);
  return it == peers_.end() || it->second->view.state.name.empty() ? key : it->second->view.state.name;
}

void PeerSet::send_ticket(const std::string& key, uint64_t session, std::string text) {
  MutexLock lock(mu_);
  auto it = peers_.find(key);
  if (it == peers_.end()) return;
  if (it->second->view.session == session) ++it->second->view.in_flight;
  it->second->link->send(session, std::move(text));
}

void PeerSet::send(const std::string& key, uint64_t session, std::string text) {
  MutexLock lock(mu_);
  if (auto it = peers_.find(key); it != peers_.end()) it->second->link->send(session, std::move(text));
}

void PeerSet::ticket_ended(const std::string& key, uint64_t session) {
  MutexLock lock(mu_);
  if (auto it = peers_.find(key); it != peers_.end() && it->second->view.session == session) --it->second->view.in_flight;
}

void PeerSet::mark_busy(const std::string& key) {
  MutexLock lock(mu_);
  if (auto it = peers_.find(key); it != peers_.end()) it->second->view.state.busy = true;
}

// ---------------------------------------------------------------- link events

PeerSet::Peer* PeerSet::find(const std::string& key, uint64_t link_id) {
  auto it = peers_.find(key);
  return it != peers_.end() && it->second->link_id == link_id ? it->second.get() : nullptr;
}

bool PeerSet::current(const std::string& key, uint64_t link_id) const {
  MutexLock lock(mu_);
  auto it = peers_.find(key);
  return it != peers_.end() && it->second->link_id == link_id;
}

void PeerSet::link_up(const std::string& key, uint64_t link_id, uint64_t session) {
  MutexLock lock(mu_);
  Peer* p = find(key, link_id);
  if (!p) return;
  p->view.up = true;
  p->view.session = session;
  p->view.known = false;
  p->view.in_flight = 0;
  p->last_heard = Clock::now();
}

std::optional<PeerSet::Heard> PeerSet::hear(const std::string& key, uint64_t link_id, uint64_t session, const json& message) {
  MutexLock lock(mu_);
  Peer* peer = find(key, link_id);
  if (!peer || session != peer->view.session) return std::nullopt;
  Peer& p = *peer;
  p.last_heard = Clock::now();
  const std::string type = message.value("type", "");
  if (type != "peer") {
    if (type == "error" && !(message.contains("ticketID") && message["ticketID"].is_string()))
      p.last_error = message.value("message", "");
    return Heard{};
  }
  auto state = node_state_from_json(message.value("status", json()));
  if (!state.ok()) {
    p.last_error = state.status().message();
    return std::nullopt;
  }
  PeerView& v = p.view;
  const bool was_busy = !v.known || v.state.busy;
  if (!v.known || v.state.instance != state->instance) {
    revis::log_line("info", "fabric: peer " + key + " is node " + state->name +
                               (state->catalog == node_.catalog().digest() ? "" : " (another catalogue: it gets no tickets)"));
  }
  v.state = std::move(*state);
  v.known = true;
  v.is_self = v.state.instance == instance_;
  if (was_busy && !v.state.busy) v.idle_since = Clock::now();
  return Heard{v, was_busy != v.state.busy};
}

bool PeerSet::link_down(const std::string& key, uint64_t link_id, uint64_t session, const std::string& why) {
  MutexLock lock(mu_);
  Peer* p = find(key, link_id);
  if (!p || !p->view.up || p->view.session != session) return false;
  p->view.up = false;
  p->view.known = false;
  p->view.in_flight = 0;
  p->last_error = why;
  revis::log_line("warn", "fabric: link to " + key + " (" + p->view.state.name + ") down: " + why);
  return true;
}

// ---------------------------------------------------------------- this node

NodeState PeerSet::local_state() const {
  NodeState s;
  s.name = config_.name;
  s.instance = instance_;
  s.catalog = node_.catalog().digest();
  s.engine = node_.simulated() ? "sim" : "gguf";
  std::set<std::string> tiers{config_.default_tier};
  for (const auto& [name, task] : node_.catalog().tasks()) tiers.insert(task.tier);
  const std::vector<node::TierStatus> pool = node_.tiers().status();
  for (const std::string& t : tiers) {
    if (!node_.serves_tier(t)) continue;
    s.tiers.push_back(t);
    bool loaded = node_.simulated();
    if (const node::TierSpec* spec = node_.tiers().resolve(t))
      for (const node::TierStatus& ts : pool) {
        if (ts.name != spec->name) continue;
        loaded = loaded || ts.loaded;
        if (!ts.kv_prefixes.empty()) s.kv_prefixes[t] = ts.kv_prefixes;
        if (ts.loaded && ts.gpu_layers > 0) {
          s.device = ts.device;
          s.gpu_layers = std::max(s.gpu_layers, ts.gpu_layers);
        }
      }
    if (loaded) s.loaded.push_back(t);
  }
  const node::ExecutorSnapshot snap = node_.executor().snapshot();  // without mu_: see the header
  s.busy = snap.busy();
  s.queue_length = snap.queue_length;
  s.slots = snap.slots;
  s.slots_free = snap.free_slots();
  s.running = snap.running_jobs();
  if (s.running > 0) {
    const node::CurrentJob& c = snap.running.front();
    s.current = c.label;
    s.job = NodeState::Job{c.task, c.phase, c.prompt_tokens, c.prompt_done, c.generated, c.max_tokens, c.elapsed_ms};
  }
  s.executed = snap.executed;
  MutexLock lock(mu_);
  s.tok_per_s = tok_per_s_;
  return s;
}

Clock::time_point PeerSet::self_idle_since() const {
  MutexLock lock(mu_);
  return self_idle_since_;
}

void PeerSet::note_executor(bool busy) {
  MutexLock lock(mu_);
  if (self_was_busy_ && !busy) self_idle_since_ = Clock::now();
  self_was_busy_ = busy;
}

void PeerSet::note_job_speed(double gen_tok_s) {
  MutexLock lock(mu_);
  tok_per_s_ = gen_tok_s;
}

bool PeerSet::kv_prefixes_published(const std::string& tier) const {
  if (local_state().kv_prefixes.count(tier)) return true;
  MutexLock lock(mu_);
  return std::any_of(peers_.begin(), peers_.end(), [&](const auto& entry) {
    const auto& by_tier = entry.second->view.state.kv_prefixes;
    auto it = by_tier.find(tier);
    return it != by_tier.end() && !it->second.empty();
  });
}

// ---------------------------------------------------------------- subscribers, heartbeats

node::TicketEvent PeerSet::state_event(const NodeState& state) {
  return node::TicketEvent::other(
      json{{"type", "peer"}, {"status", to_json(state)}}.dump(-1, ' ', false, json::error_handler_t::replace));
}

void PeerSet::subscribe(const std::shared_ptr<node::ClientLink>& link, const std::string& node_name) {
  MutexLock push(push_mu_);
  {
    MutexLock lock(mu_);
    if (std::find(subscribers_.begin(), subscribers_.end(), link) == subscribers_.end()) subscribers_.push_back(link);
  }
  revis::log_line("info", "fabric: " + (node_name.empty() ? std::string("a peer") : "peer " + node_name) +
                             " subscribed to this node's state");
  link->send(state_event(local_state()));
}

bool PeerSet::subscribed(const std::shared_ptr<node::ClientLink>& link) const {
  MutexLock lock(mu_);
  return std::find(subscribers_.begin(), subscribers_.end(), link) != subscribers_.end();
}

bool PeerSet::unsubscribe(const std::shared_ptr<node::ClientLink>& link) {
  MutexLock lock(mu_);
  return std::erase(subscribers_, link) > 0;
}

void PeerSet::clear_subscribers() {
  MutexLock lock(mu_);
  subscribers_.clear();
}

void PeerSet::push_state() {
  MutexLock push(push_mu_);
  std::vector<std::shared_ptr<node::ClientLink>> to;
  {
    MutexLock lock(mu_);
    to = subscribers_;
  }
  if (to.empty()) return;
  const node::TicketEvent event = state_event(local_state());
  for (const auto& s : to) s->send(event);
}

void PeerSet::start_heartbeat(std::function<void()> on_tick) {
  net::post(io_, [this, on_tick = std::move(on_tick)] { heartbeat(on_tick); });
}

void PeerSet::heartbeat(std::function<void()> on_tick) {
  push_state();
  on_tick();
  auto timer = std::make_shared<net::steady_timer>(io_, std::chrono::milliseconds(config_.heartbeat_ms));
  timer->async_wait([this, timer, on_tick = std::move(on_tick)](const boost::system::error_code& ec) {
    if (!ec) heartbeat(on_tick);
  });
}

// ---------------------------------------------------------------- the cluster view

PeerSet::ClusterNodes PeerSet::cluster_nodes(const NodeState& me) const {
  ClusterNodes out;
  out.nodes = json::array();
  json self = to_json(me);
  self["address"] = "self";
  self["self"] = true;
  self["link"] = "self";
  self["catalogMatches"] = true;
  self["lastHeartbeatMsAgo"] = 0;
  out.nodes.push_back(self);
  out.queued = me.queue_length;
  out.running = me.running;
  MutexLock lock(mu_);
  for (const auto& [key, p] : peers_) {
    const PeerView& v = p->view;
    if (v.is_self) continue;
    json n = v.known ? to_json(v.state) : json{{"name", nullptr}};
    n["address"] = key;
    n["self"] = false;
    n["link"] = v.up ? "up" : "down";
    n["found"] = p->found;
    n["catalogMatches"] = v.known && v.state.catalog == me.catalog;
    n["lastHeartbeatMsAgo"] = p->last_heard == Clock::time_point{} ? json(nullptr) : json(ms_since(p->last_heard));
    n["forwardedInFlight"] = v.in_flight;
    if (!p->last_error.empty()) n["lastError"] = p->last_error;
    out.nodes.push_back(n);
    if (v.known && v.up) {
      out.queued += v.state.queue_length;
      out.running += v.state.running;
    }
  }
  return out;
}

}  // namespace revis::fabric
