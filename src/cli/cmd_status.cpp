// revis status: the cluster as one node sees it (GET /v1/revis/cluster):
// every node it knows, its tiers and loaded models, busy (no slot free) or
// idle, its slots in use, the oldest running ticket, speed and last
// heartbeat; tickets queued and running.
// A node with --broker shows its broker link and the consumers it pulls
// from instead (exit status 1 when disconnected or not pulling).
//
//   revis status --node 127.0.0.1:8080 [--token T] [--json]
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "net/client.h"

namespace revis::cli {
namespace {

using nlohmann::json;

struct StatusArgs {
  std::string node = "127.0.0.1:8080";
  std::string token;
  bool json = false;
};

std::string joined(const json& list) {
  std::string out;
  if (!list.is_array()) return "-";
  for (const json& v : list) out += (out.empty() ? "" : ",") + v.get<std::string>();
  return out.empty() ? "-" : out;
}

std::string text_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// A node with --broker (docs/scale-out.md): its broker link and the
// consumers it pulls from; the other nodes are the broker's, not its own.
int print_broker(const json& c) {
  const json& b = c["broker"];
  std::printf("node %s, broker %s: %s%s\n", text_or(c, "node", "?").c_str(), text_or(b, "server", "?").c_str(),
              b.value("connected", false) ? "connected" : "DISCONNECTED",
              b.contains("refusal") && b["refusal"].is_string() ? (", NOT PULLING: " + b["refusal"].get<std::string>()).c_str() : "");
  std::printf("\n%-20s %8s %11s %11s %8s\n", "TASK TYPE", "PENDING", "ACK-PENDING", "REDELIVERED", "WAITING");
  if (b.contains("consumers") && b["consumers"].is_object())
    for (const auto& [task, n] : b["consumers"].items())
      std::printf("%-20s %8lld %11lld %11lld %8lld\n", task.c_str(), n.value("pending", 0LL), n.value("ackPending", 0LL),
                  n.value("redelivered", 0LL), n.value("waiting", 0LL));
  const json counters = b.value("counters", json::object());
  std::printf("\nthis node: pulled %lld, done %lld, failed %lld, cancelled %lld, terminated %lld, given back %lld, "
              "duplicates %lld, given up %lld\n",
              counters.value("pulled", 0LL), counters.value("done", 0LL), counters.value("failed", 0LL),
              counters.value("cancelled", 0LL), counters.value("terminated", 0LL), counters.value("givenBack", 0LL),
              counters.value("duplicates", 0LL), counters.value("givenUp", 0LL));
  return b.value("connected", false) && !(b.contains("refusal") && b["refusal"].is_string()) ? 0 : 1;
}

int status(const StatusArgs& a) {
  auto node = node::parse_host_port(a.node, 8080);
  if (!node.ok()) return fail(node.status().message());
  std::vector<std::pair<std::string, std::string>> headers;
  if (!a.token.empty()) headers.emplace_back("Authorization", "Bearer " + a.token);
  auto r = node::http_request(*node, "GET", "/v1/revis/cluster", "", headers, 10000);
  if (!r.ok()) return fail(r.status().message());
  if (r->status != 200) return fail(a.node + ": HTTP " + std::to_string(r->status) + ": " + r->body);
  json c = json::parse(r->body, nullptr, false);
  if (!c.is_discarded() && c.is_object() && a.json) {
    std::printf("%s\n", c.dump(2).c_str());
    return 0;
  }
  if (!c.is_discarded() && c.is_object() && c.contains("broker") && c["broker"].is_object()) return print_broker(c);
  if (c.is_discarded() || !c.is_object() || !c.contains("nodes") || !c["nodes"].is_array())
    return fail(a.node + ": the cluster view is not the expected JSON");
  const json& t = c["tickets"];
  std::printf("cluster seen from %s: %zu node(s); tickets queued %d, running %d; accepted here: %d local, %d forwarded\n\n",
              text_or(c, "node", "?").c_str(), c["nodes"].size(), t.value("queued", 0), t.value("running", 0),
              t["acceptedHere"].value("local", 0), t["acceptedHere"].value("forwarded", 0));
  std::printf("%-14s %-22s %-5s %-20s %-20s %-5s %-6s %-24s %8s %10s\n", "NODE", "ADDRESS", "LINK", "TIERS", "LOADED",
              "STATE", "SLOTS", "CURRENT", "TOK/S", "HEARTBEAT");
  for (const json& n : c["nodes"]) {
    const bool known = n.contains("busy");
    std::string state = !known ? "?" : n["busy"].get<bool>() ? "busy" : "idle";
    if (known && !n.value("catalogMatches", true)) state += "*";
    // Jobs running of the slots (a forward pass carries them together).
    char slots[32] = "-";
    if (known)
      std::snprintf(slots, sizeof slots, "%d/%d", n.value("running", 0), n.value("slots", 1));
    char beat[32] = "-";
    if (n.contains("lastHeartbeatMsAgo") && n["lastHeartbeatMsAgo"].is_number() && !n.value("self", false))
      std::snprintf(beat, sizeof beat, "%.0f ms", n["lastHeartbeatMsAgo"].get<double>());
    std::printf("%-14s %-22s %-5s %-20s %-20s %-5s %-6s %-24s %8.1f %10s\n", text_or(n, "name", "?").c_str(),
                text_or(n, "address", "?").c_str(), text_or(n, "link", "?").c_str(), joined(n.value("tiers", json())).c_str(),
                joined(n.value("loaded", json())).c_str(), state.c_str(), slots, text_or(n, "current", "-").c_str(),
                n.value("tokPerSec", 0.0), beat);
    if (n.contains("lastError")) std::printf("%-14s   last error: %s\n", "", n["lastError"].get<std::string>().c_str());
  }
  bool mismatch = false;
  for (const json& n : c["nodes"]) mismatch = mismatch || (n.contains("busy") && !n.value("catalogMatches", true));
  if (mismatch) std::printf("\n* another task catalogue: listed, but never sent tickets\n");
  return 0;
}

}  // namespace

void register_status(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("status", "Show the cluster a node sees: nodes, models, busy/idle, tickets");
  auto a = std::make_shared<StatusArgs>();
  cmd->add_option("--node", a->node, "Node address HOST:PORT")->capture_default_str();
  cmd->add_option("--token", a->token, "Bearer token the node requires");
  cmd->add_flag("--json", a->json, "Print the cluster view as JSON");
  cmd->callback([a, &exit_code] { exit_code = status(*a); });
}

}  // namespace revis::cli
