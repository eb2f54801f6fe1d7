#include "fabric/cluster_feed.h"

#include <algorithm>

#include "base/json_text.h"

namespace revis::fabric {
namespace {

using nlohmann::json;


// A number of the done event's stats, or null.
json stat(const json& stats, const char* key) {
  auto it = stats.find(key);
  return it != stats.end() && it->is_number() ? *it : json(nullptr);
}

}  // namespace

void ClusterFeed::add(const std::shared_ptr<node::ClientLink>& link, const std::string& digest, const std::string& catalog) {
  if (std::find(subscribers_.begin(), subscribers_.end(), link) == subscribers_.end()) subscribers_.push_back(link);
  json tasks = json::parse(catalog, nullptr, false);
  if (tasks.is_object() && tasks.contains("tasks")) tasks = tasks["tasks"];
  link->send(revis::json_text({{"type", "catalog"}, {"digest", digest}, {"tasks", tasks}}));
}

void ClusterFeed::remove(const std::shared_ptr<node::ClientLink>& link) { std::erase(subscribers_, link); }

std::string ClusterFeed::cluster_event(const json& view) { return revis::json_text({{"type", "cluster"}, {"view", view}}); }

std::string ClusterFeed::ticket_event(const TicketView& t) {
  json ticket = {{"ticketID", t.id},        {"taskType", t.task}, {"state", t.state},
                 {"node", t.node.empty() ? json(nullptr) : json(t.node)},
                 {"attempt", t.attempt},    {"receivedUnixMs", t.received_unix_ms}, {"openai", t.openai}};
  if (!t.terminal.empty()) {
    const json final = json::parse(t.terminal, nullptr, false);
    const bool done = final.is_object() && final.contains("type") && final["type"] == "done";
    ticket["state"] = done ? "done" : "failed";
    if (done && final.contains("stats") && final["stats"].is_object()) {
      const json& stats = final["stats"];
      if (stats.contains("node") && stats["node"].is_string()) ticket["node"] = stats["node"];
      ticket["waitMs"] = stat(stats, "queueWaitMs");
      ticket["durationMs"] = stat(stats, "totalMs");
      ticket["ttftMs"] = stat(stats, "ttftMs");
      ticket["tokens"] = stat(stats, "generatedTokens");
      ticket["tokPerSec"] = stat(stats, "genTokPerSec");
    } else if (final.is_object() && final.contains("code") && final["code"].is_string()) {
      ticket["error"] = final["code"];
    }
  }
  return revis::json_text({{"type", "ticketUpdate"}, {"ticket", ticket}});
}

void ClusterFeed::send(const std::string& event) const {
  for (const auto& s : subscribers_) s->send(event);
}

}  // namespace revis::fabric
