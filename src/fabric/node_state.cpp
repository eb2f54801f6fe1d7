#include "fabric/node_state.h"

#include <algorithm>

namespace revis::fabric {
namespace {

using nlohmann::json;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// `list`, named `name` in errors, as strings.
Status read_strings(const json* list, const std::string& name, std::vector<std::string>& out) {
  if (!list || !list->is_array()) return Status::error("peer status: \"" + name + "\" must be a list");
  for (const json& v : *list) {
    if (!v.is_string()) return Status::error("peer status: \"" + name + "\" must hold strings");
    out.push_back(v.get<std::string>());
  }
  return {};
}

Status read_strings(const json& j, const char* key, std::vector<std::string>& out) {
  auto it = j.find(key);
  return read_strings(it == j.end() ? nullptr : &*it, key, out);
}

}  // namespace

bool NodeState::serves(const std::string& tier) const { return contains(tiers, tier); }
bool NodeState::has_loaded(const std::string& tier) const { return contains(loaded, tier); }

json to_json(const NodeState& s) {
  return {{"name", s.name},
          {"instance", s.instance},
          {"catalog", s.catalog},
          {"engine", s.engine},
          {"tiers", s.tiers},
          {"loaded", s.loaded},
          {"kvPrefixes", s.kv_prefixes},
          {"busy", s.busy},
          {"queueLength", s.queue_length},
          {"slots", s.slots},
          {"slotsFree", s.slots_free},
          {"running", s.running},
          {"current", s.current.empty() ? json(nullptr) : json(s.current)},
          {"device", s.device},
          {"gpuLayers", s.gpu_layers},
          {"tokPerSec", s.tok_per_s},
          {"executed", s.executed},
          {"job", s.job ? json{{"task", s.job->task},
                               {"phase", s.job->phase},
                               {"promptTokens", s.job->prompt_tokens},
                               {"promptDone", s.job->prompt_done},
                               {"generated", s.job->generated},
                               {"maxTokens", s.job->max_tokens},
                               {"elapsedMs", s.job->elapsed_ms}}
                        : json(nullptr)}};
}

Result<NodeState> node_state_from_json(const json& j) {
  if (!j.is_object()) return Status::error("peer status: expected an object");
  NodeState s;
  for (const char* key : {"name", "instance", "catalog", "engine"}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Status::error(std::string("peer status: \"") + key + "\" must be a string");
  }
  s.name = j["name"].get<std::string>();
  s.instance = j["instance"].get<std::string>();
  s.catalog = j["catalog"].get<std::string>();
  s.engine = j["engine"].get<std::string>();
  if (Status st = read_strings(j, "tiers", s.tiers); !st.ok()) return st;
  if (Status st = read_strings(j, "loaded", s.loaded); !st.ok()) return st;
  if (auto it = j.find("kvPrefixes"); it != j.end()) {  // absent from nodes that predate it
    if (!it->is_object()) return Status::error("peer status: \"kvPrefixes\" must be an object (tier -> digests)");
    for (const auto& [tier, digests] : it->items())
      if (Status st = read_strings(&digests, "kvPrefixes." + tier, s.kv_prefixes[tier]); !st.ok()) return st;
  }
  if (!j.contains("busy") || !j["busy"].is_boolean()) return Status::error("peer status: \"busy\" must be true or false");
  s.busy = j["busy"].get<bool>();
  if (!j.contains("queueLength") || !j["queueLength"].is_number_integer())
    return Status::error("peer status: \"queueLength\" must be an integer");
  s.queue_length = j["queueLength"].get<int>();
  if (j.contains("current") && j["current"].is_string()) s.current = j["current"].get<std::string>();
  // Absent from nodes that predate slots: one slot, free unless busy.
  auto count = [&](const char* key, int fallback) -> Result<int> {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1 << 20)
      return Status::error(std::string("peer status: \"") + key + "\" must be a count (a non-negative integer)");
    return it->get<int>();
  };
  auto slots = count("slots", 1), slots_free = count("slotsFree", s.busy ? 0 : 1),
       running = count("running", s.current.empty() ? 0 : 1);
  for (const auto* r : {&slots, &slots_free, &running})
    if (!r->ok()) return r->status();
  s.slots = *slots;
  s.slots_free = *slots_free;
  s.running = *running;
  if (j.contains("tokPerSec") && j["tokPerSec"].is_number()) s.tok_per_s = j["tokPerSec"].get<double>();
  // Shown, never acted on; absent from nodes that predate the GPU.
  if (j.contains("device") && j["device"].is_string()) s.device = j["device"].get<std::string>();
  if (j.contains("gpuLayers") && j["gpuLayers"].is_number_integer()) s.gpu_layers = j["gpuLayers"].get<int>();
  if (j.contains("executed") && j["executed"].is_number_unsigned()) s.executed = j["executed"].get<uint64_t>();
  if (auto it = j.find("job"); it != j.end() && it->is_object()) {  // absent from nodes that predate it
    // Shown, never acted on: fields of another type read as empty.
    const json& job = *it;
    auto text = [&](const char* key) { return job.contains(key) && job[key].is_string() ? job[key].get<std::string>() : ""; };
    auto count = [&](const char* key) { return job.contains(key) && job[key].is_number_integer() ? job[key].get<int>() : 0; };
    s.job = NodeState::Job{text("task"),          text("phase"),      count("promptTokens"), count("promptDone"),
                           count("generated"),    count("maxTokens"),
                           job.contains("elapsedMs") && job["elapsedMs"].is_number() ? job["elapsedMs"].get<double>() : 0};
  }
  return s;
}

}  // namespace revis::fabric
