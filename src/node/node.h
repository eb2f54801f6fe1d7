// A node: the pieces of `revis serve` that are not networking, wired
// together (configuration, catalogue, tiers, executor, metrics), and the
// decisions the front ends share: a catalogue ticket's job, admitting a
// ticket (catalogue pin, tier, seed), an OpenAI request's ticket, and
// describing the node for /health, /v1/revis/status and /metrics. The node
// reads no wire format: an OpenAI request arrives as a job already
// (Ticket::job, made by api/ticket_job.h).
//
// Thread-safety: everything may be called from any thread once start() has
// returned.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node/catalog.h"
#include "node/config.h"
#include "node/executor.h"
#include "node/metrics.h"
#include "node/tier_pool.h"
#include "protocol/request_limits.h"
#include "protocol/ticket.h"

namespace revis::node {

enum class Health { kLoading, kOk, kStopping, kFailed };

class Node {
 public:
  // Loads the catalogue (built-ins plus config.catalog) and sets up the
  // tiers; no model is loaded yet. `config` must have passed validate_config.
  static Result<std::unique_ptr<Node>> create(NodeConfig config);
  ~Node();

  // Starts the executor, which first loads the default tier's model;
  // on_loaded hears how that went (on the executor thread).
  void start(std::function<void(const Status&)> on_loaded);
  // Stops the executor (see Executor::shutdown).
  void stop(std::chrono::milliseconds grace);

  const NodeConfig& config() const { return config_; }
  const Catalog& catalog() const { return catalog_; }
  // Runs the simulated engine (config engine = "sim"), which serves every tier.
  bool simulated() const { return config_.engine == "sim"; }
  bool serves_tier(const std::string& tier) const;
  Executor& executor() { return *executor_; }
  const TierPool& tiers() const { return *pool_; }

  // A catalogue ticket's job (its task's template rendered with its args),
  // or why there is none; what admit() adds (label, seed, when) is not in it.
  Outcome<JobSpec> catalogue_job(const Ticket& ticket) const;
  // The job a ticket asks for, to submit now: its Ticket::job (a catalogue
  // ticket without one, from a journal, is rendered here) checked against
  // this node (catalogue pin, tier) and given its label, seed and arrival.
  // Parses and renders nothing for a ticket that has its job: a desk may
  // call it under its lock, and as often as it places the ticket.
  Outcome<JobSpec> admit(const Ticket& ticket, Clock::time_point received) const;
  // What preparing a request may cost (max_json_depth, max_grammar_elements).
  RequestLimits request_limits() const;

  // Digests of the job's prompt prefixes, every kPrefixDigestBlock tokens,
  // shortest first, as nodes publish those of their KV checkpoints
  // (kvPrefixes): what placement compares to prefer the node that already
  // holds the longest. Empty when the tier's model is not loaded here (this
  // does not load it) and with the simulated engine.
  std::vector<std::string> prompt_prefix_digests(const JobSpec& spec) const;

  std::vector<std::string> model_ids() const;
  // A tier name, a tier's model file name (with or without .gguf), or the
  // default tier for anything else ("gpt-4o").
  std::string tier_for_model(const std::string& model) const;
  // What an OpenAI request's ticket carries (`body`, as posted): its tier
  // (from `model`) and its seed (`seed`, the client's, or else a fresh one)
  // are settled here, once, so that every run of it, here or on a peer,
  // first or retried, is the same computation.
  OpenAiCall openai_call(const std::string& model, std::string body, std::optional<uint64_t> seed) const;

  // Counts a request refused before it reached the executor (malformed,
  // unknown task, queue full, ...), so /metrics and the status page see
  // every outcome, not only the jobs that ran.
  void count_refused(const std::string& source, ErrorCode code);

  // A transport's own state (the broker's connection and consumers): a
  // JSON object shown under `key` in status_json(), and Prometheus lines
  // appended to metrics_text(). Set once, before the server starts; the
  // functions are called from the server's thread.
  struct TransportReport {
    std::string key;
    std::function<std::string()> status_json;
    std::function<std::string()> metrics;
  };
  void set_transport_report(TransportReport report) { transport_report_ = std::move(report); }

  Health health() const;
  std::string status_json() const;
  std::string metrics_text() const;
  double uptime_s() const;

 private:
  Node(NodeConfig config, Catalog catalog);
  // With the simulated engine: every tier the catalogue uses, and the default one.
  std::vector<std::string> simulated_tiers() const;

  NodeConfig config_;
  Catalog catalog_;
  Clock::time_point start_time_ = Clock::now();
  Metrics metrics_;
  std::unique_ptr<TierPool> pool_;
  std::unique_ptr<Executor> executor_;
  TransportReport transport_report_;
};

}  // namespace revis::node
