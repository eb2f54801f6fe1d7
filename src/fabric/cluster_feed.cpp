#include "fabric/cluster_feed.h"

#include <algorithm>

#include "base/json_text.h"

namespace revis::fabric {

using nlohmann::json;

void ClusterFeed::add(const std::shared_ptr<node::ClientLink>& link, const std::string& digest, const std::string& catalog) {
  if (std::find(subscribers_.begin(), subscribers_.end(), link) == subscribers_.end()) subscribers_.push_back(link);
  json tasks = json::parse(catalog, nullptr, false);
  if (tasks.is_object() && tasks.contains("tasks")) tasks = tasks["tasks"];
  link->send(node::TicketEvent::other(revis::json_text({{"type", "catalog"}, {"digest", digest}, {"tasks", tasks}})));
}

void ClusterFeed::remove(const std::shared_ptr<node::ClientLink>& link) { std::erase(subscribers_, link); }

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
  for (const auto& s : subscribers_) s->send(event);
}

}  // namespace revis::fabric
