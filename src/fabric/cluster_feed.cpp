#include "fabric/cluster_feed.h"

#include <algorithm>

#include "base/json_text.h"

namespace revis::fabric {

using nlohmann::json;

ClusterFeed::ClusterFeed(const node::Node& node, const PeerSet& peers) : node_(node), peers_(peers) {}

TicketView ClusterFeed::view_of(const TicketRecord& rec, const std::set<std::string>& running_labels) const {
  using Where = TicketRecord::Where;
  TicketView v;
  v.id = rec.ticket.id;
  v.task = rec.ticket.task;
  v.attempt = rec.attempt;
  v.received_unix_ms = rec.received_unix_ms;
  v.openai = !rec.kept;
  switch (rec.where) {
    case Where::kWaiting:
    case Where::kSuspended:  // runs at the next start
      v.state = "queued";
      break;
    case Where::kLocal:
      v.state = running_labels.contains(rec.ticket.id) ? "running" : "queued";
      v.node = node_.config().name;
      break;
    case Where::kPeer:
      v.state = "running";
      v.node = peers_.name_of(rec.peer);
      break;
    case Where::kHandedOff:  // the peer holds it; its link relays it once up
      v.state = "queued";
      v.node = rec.handed_to;
      break;
    case Where::kDone:
      v.terminal = rec.terminal;  // done or failed: ticket_event reads which
      if (rec.terminal.empty()) v.state = "running";  // ended; its result waits for the journal
      break;
  }
  return v;
}

bool ClusterFeed::empty() const {
  MutexLock lock(mu_);
  return subscribers_.empty();
}

void ClusterFeed::add(const std::shared_ptr<node::ClientLink>& link, const node::TicketBook& book, size_t waiting,
                      const std::set<std::string>& running_labels) {
  {
    MutexLock lock(mu_);
    if (std::find(subscribers_.begin(), subscribers_.end(), link) == subscribers_.end()) subscribers_.push_back(link);
  }
  json tasks = json::parse(node_.catalog().canonical_json(), nullptr, false);
  if (tasks.is_object() && tasks.contains("tasks")) tasks = tasks["tasks"];
  link->send(node::TicketEvent::other(revis::json_text({{"type", "catalog"}, {"digest", node_.catalog().digest()}, {"tasks", tasks}})));
  link->send(cluster_event(cluster_view(book, waiting)));
  std::vector<const TicketRecord*> kept;
  for (const auto& [id, entry] : book.entries()) kept.push_back(static_cast<const TicketRecord*>(entry.get()));
  std::sort(kept.begin(), kept.end(),
            [](const TicketRecord* a, const TicketRecord* b) { return a->received_unix_ms < b->received_unix_ms; });
  constexpr size_t kMostRecent = 200;
  if (kept.size() > kMostRecent) kept.erase(kept.begin(), kept.end() - kMostRecent);
  for (const TicketRecord* rec : kept) link->send(ticket_event(view_of(*rec, running_labels)));
}

void ClusterFeed::remove(const std::shared_ptr<node::ClientLink>& link) {
  MutexLock lock(mu_);
  std::erase(subscribers_, link);
}

void ClusterFeed::clear() {
  MutexLock lock(mu_);
  subscribers_.clear();
}

json ClusterFeed::cluster_view(const node::TicketBook& book, size_t waiting) const {
  using Where = TicketRecord::Where;
  const node::NodeConfig& config = node_.config();
  const PeerSet::ClusterNodes nodes = peers_.cluster_nodes(peers_.local_state());
  int here_local = 0, here_forwarded = 0, finished = 0;
  for (const auto& [id, entry] : book.entries()) {
    const Where where = static_cast<const TicketRecord&>(*entry).where;
    if (where == Where::kLocal) ++here_local;
    else if (where == Where::kPeer || where == Where::kWaiting || where == Where::kHandedOff) ++here_forwarded;
    else ++finished;
  }
  return json{{"node", config.name},
              {"nodes", nodes.nodes},
              {"tickets",
               {{"queued", nodes.queued + static_cast<int>(waiting)},
                {"running", nodes.running},
                {"acceptedHere", {{"local", here_local}, {"forwarded", here_forwarded}, {"finishedKept", finished}}},
                {"keptResults",
                 {{"count", book.kept_results()},
                  {"bytes", book.kept_result_bytes()},
                  {"maxCount", config.max_kept_results},
                  {"maxBytes", config.max_kept_results_mb << 20}}}}}};
}

void ClusterFeed::publish_cluster(const node::TicketBook& book, size_t waiting) const {
  if (!empty()) send(cluster_event(cluster_view(book, waiting)));
}

void ClusterFeed::publish(const TicketRecord& rec, const std::set<std::string>& running_labels) const {
  if (!empty()) send(ticket_event(view_of(rec, running_labels)));
}

node::TicketEvent ClusterFeed::cluster_event(const json& view) {
  return node::TicketEvent::other(revis::json_text({{"type", "cluster"}, {"view", view}}));
}

node::TicketEvent ClusterFeed::ticket_event(const TicketView& t) {
  json ticket = {{"ticketID", t.id},        {"taskType", t.task}, {"state", t.state},
                 {"node", t.node.empty() ? json(nullptr) : json(t.node)},
                 {"attempt", t.attempt},    {"receivedUnixMs", t.received_unix_ms}, {"openai", t.openai}};
  // Read from the final event's values: nothing is parsed under the
  // dispatcher's lock.
  if (!t.terminal.empty()) {
    const bool done = t.terminal.type() == node::TicketEvent::Type::kDone;
    ticket["state"] = done ? "done" : "failed";
    if (done) {
      const node::JobStats& stats = t.terminal.result().stats;
      if (!stats.node.empty()) ticket["node"] = stats.node;
      ticket["waitMs"] = stats.queue_wait_ms;
      ticket["durationMs"] = stats.total_ms;
      ticket["ttftMs"] = stats.ttft_ms;
      ticket["tokens"] = stats.generated_tokens;
      ticket["tokPerSec"] = stats.gen_tok_s;
    } else if (t.terminal.type() == node::TicketEvent::Type::kError) {
      ticket["error"] = node::error_code_name(t.terminal.error().code);
    }
  }
  return node::TicketEvent::other(revis::json_text({{"type", "ticketUpdate"}, {"ticket", ticket}}));
}

void ClusterFeed::send(const node::TicketEvent& event) const {
  MutexLock lock(mu_);
  for (const auto& s : subscribers_) s->send(event);
}

}  // namespace revis::fabric
