// What a node tells its peers about itself: enough to decide whether a
// ticket may go there (same catalogue, serves the tier, idle) and which of
// several idle nodes is best (KV checkpoints holding the longest prefix of
// the prompt, model already loaded, least recently busy),
// plus what the cluster view shows. Pushed as {"type":"peer","status":{...}}
// on a peer subscription (docs/fabric.md), at once, on every busy/idle
// change, and every heartbeat.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "revis/status.h"

namespace revis::fabric {

struct NodeState {
  std::string name;
  std::string instance;  // random per process: tells a restarted node, and a node that is its own peer
  std::string catalog;   // catalogue digest; peers with another one get no tickets
  std::string engine;    // "gguf" or "sim"
  std::vector<std::string> tiers;   // tiers of the catalogue's tasks this node serves
  std::vector<std::string> loaded;  // of those, the ones whose model is loaded now
  // Per loaded tier: digests of the prompt prefixes its KV checkpoints hold
  // (the status page's kvPrefixes: every kPrefixDigestBlock tokens, longest
  // first). Absent for a tier without any.
  std::map<std::string, std::vector<std::string>> kv_prefixes;
  bool busy = false;                // no slot free, or jobs waiting
  int queue_length = 0;
  int slots = 1;                    // jobs one forward pass may carry
  int slots_free = 1;               // of them, free now (0 while busy loading)
  int running = 0;                  // jobs running
  std::string current;              // label of the oldest running job; empty when none
  // That job's progress (for the dashboard; placement ignores it).
  struct Job {
    std::string task, phase;  // phase: "loading", "prefill", "generating"
    int prompt_tokens = 0, prompt_done = 0, generated = 0, max_tokens = 0;
    double elapsed_ms = 0;
  };
  std::optional<Job> job;
  // Where its loaded models' layers run: "cpu", or the GPU's name with the
  // layers it holds (shown, never acted on).
  std::string device = "cpu";
  int gpu_layers = 0;
  double tok_per_s = 0;             // generation speed of the last job it finished
  uint64_t executed = 0;            // jobs it has started

  bool serves(const std::string& tier) const;
  bool has_loaded(const std::string& tier) const;
};

nlohmann::json to_json(const NodeState& state);
// Errors name the field that is missing or of the wrong type.
Result<NodeState> node_state_from_json(const nlohmann::json& j);

}  // namespace revis::fabric
