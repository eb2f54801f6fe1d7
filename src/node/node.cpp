#include "node/node.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <sys/sysinfo.h>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/log.h"
#include "base/mutex.h"
#include "kvstore/store.h"
#include "node/build_info.h"
#include "node/job_prompt.h"

namespace revis::node {
namespace {

using nlohmann::json;

uint64_t default_budget_bytes() {
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return 0;
  return static_cast<uint64_t>(info.totalram) * info.mem_unit / 4 * 3;
}

Health health_of(const ExecutorSnapshot& s) {
  if (s.stopping) return Health::kStopping;
  if (!s.ready) return Health::kLoading;
  if (!s.preload_error.empty()) return Health::kFailed;
  return Health::kOk;
}

const char* health_name(Health h) {
  switch (h) {
    case Health::kLoading: return "loading";
    case Health::kStopping: return "stopping";
    case Health::kFailed: return "failed";
    case Health::kOk: break;
  }
  return "ok";
}

uint64_t fresh_seed() {
  static Mutex mutex;
  static std::mt19937_64 rng GUARDED_BY(mutex){std::random_device{}()};
  MutexLock lock(mutex);
  return rng();
}

}  // namespace

Node::Node(NodeConfig config, Catalog catalog) : config_(std::move(config)), catalog_(std::move(catalog)) {}
Node::~Node() {
  if (executor_) executor_->shutdown(std::chrono::milliseconds(0));
}

Result<std::unique_ptr<Node>> Node::create(NodeConfig config) {
  Catalog catalog = Catalog::builtin();
  if (!config.catalog.empty())
    if (Status s = catalog.apply_file(config.catalog); !s.ok()) return s;
  std::unique_ptr<Node> node(new Node(std::move(config), std::move(catalog)));
  const NodeConfig& c = node->config_;
  std::vector<TierSpec> tiers;
  for (const TierConfig& t : c.tiers)
    tiers.push_back({.name = t.name,
                     .model_path = t.model,
                     .ctx = t.ctx > 0 ? t.ctx : c.ctx,
                     .threads = t.threads > 0 ? t.threads : c.threads,
                     .chat_template = t.chat_template.empty() ? c.chat_template : t.chat_template,
                     .draft_path = t.draft,
                     .lookup = t.lookup.value_or(c.lookup),
                     .draft_max = t.draft_max > 0 ? t.draft_max : c.draft_max,
                     .slots = t.parallel > 0 ? t.parallel : c.parallel,
                     .device = c.device,
                     .gpu_layers = t.gpu_layers.value_or(c.gpu_layers)});
  std::optional<TierSpec> fallback;
  if (!c.model.empty())
    fallback = TierSpec{.name = "default",
                        .model_path = c.model,
                        .ctx = c.ctx,
                        .threads = c.threads,
                        .chat_template = c.chat_template,
                        .draft_path = c.draft,
                        .lookup = c.lookup,
                        .draft_max = c.draft_max,
                        .slots = c.parallel,
                        .device = c.device,
                        .gpu_layers = c.gpu_layers};
  const uint64_t budget = c.memory_budget_mb > 0 ? c.memory_budget_mb << 20 : default_budget_bytes();
  node->pool_ = std::make_unique<TierPool>(std::move(tiers), std::move(fallback), budget,
                                           KvCacheConfig{.dir = c.kv_dir, .budget_bytes = c.kv_budget_mb << 20});
  for (const TierSpec& t : node->pool_->tiers())
    if (!std::filesystem::exists(t.model_path))
      log_line("warn", "tier " + t.name + ": " + t.model_path + " does not exist (yet); its tasks will fail until it does");
  for (const auto& [name, task] : node->catalog_.tasks())
    if (!node->serves_tier(task.tier))
      log_line("warn", "task " + name + " needs tier " + task.tier + ", which this node does not serve");
  ExecutorOptions options;
  if (c.engine == "sim") {
    options.sim = SimEngineOptions{c.sim_tokens_per_s, c.sim_prefill_tokens_per_s, c.ctx > 0 ? c.ctx : 4096};
    char line[160];
    std::snprintf(line, sizeof line, "engine sim: no model; every tier simulated at %g tok/s (prefill %g tok/s); the text is meaningless",
                  c.sim_tokens_per_s, c.sim_prefill_tokens_per_s);
    log_line("info", line);
  }
  options.queue_limit = static_cast<size_t>(c.queue_limit);
  options.node_name = c.name;
  options.catalog_digest = node->catalog_.digest();
  options.node_start = node->start_time_;
  node->executor_ = std::make_unique<Executor>(*node->pool_, node->metrics_, options);
  return node;
}

void Node::start(std::function<void(const Status&)> on_loaded) {
  if (simulated()) {
    executor_->start();
    if (on_loaded) on_loaded(Status{});
    return;
  }
  executor_->start(config_.default_tier, std::move(on_loaded));
}

bool Node::serves_tier(const std::string& tier) const { return simulated() || pool_->resolve(tier) != nullptr; }

std::vector<std::string> Node::simulated_tiers() const {
  std::set<std::string> names{config_.default_tier};
  for (const auto& [name, task] : catalog_.tasks()) names.insert(task.tier);
  return {names.begin(), names.end()};
}

void Node::stop(std::chrono::milliseconds grace) { executor_->shutdown(grace); }

Outcome<JobSpec> Node::catalogue_job(const Ticket& t) const {
  const Task* task = catalog_.find(t.task);
  if (!task) return NodeError{ErrorCode::kUnknownTask, "no task \"" + t.task + "\" in this node's catalogue"};
  auto prompt = catalog_.render(*task, t.args);
  if (!prompt.ok()) return prompt.error();
  JobSpec spec;
  spec.source = "ticket";
  spec.task = task->name;
  spec.tier = task->tier;
  spec.raw = task->raw;
  if (task->raw) {
    spec.prompt = prompt->user;
    spec.prompt_literals = prompt->user_args;
  } else {
    if (!prompt->system.empty()) spec.messages.push_back({"system", prompt->system});
    spec.messages.push_back({"user", prompt->user});
  }
  spec.max_tokens = task->max_tokens;
  spec.sampling.temperature = static_cast<float>(task->temperature);
  spec.sampling.top_p = static_cast<float>(task->top_p);
  spec.sampling.top_k = task->top_k;
  spec.sampling.min_p = static_cast<float>(task->min_p);
  spec.stop = task->stop;
  spec.lookup = task->lookup;
  spec.grammar = task->output_grammar;
  return spec;
}

Outcome<JobSpec> Node::admit(const Ticket& t, Clock::time_point received) const {
  if (t.catalog && *t.catalog != catalog_.digest())
    return NodeError{ErrorCode::kCatalogMismatch,
                     "this node's catalogue is " + catalog_.digest() + ", the ticket expects " + *t.catalog};
  if (t.openai && !serves_tier(t.openai->tier))
    return NodeError{ErrorCode::kModelUnavailable, "this node serves no tier \"" + t.openai->tier + "\""};
  std::shared_ptr<const Outcome<JobSpec>> job = t.job;
  if (!job && t.openai) return NodeError{ErrorCode::kInternal, "ticket " + t.id + ": its OpenAI body was never read"};
  if (!job) job = std::make_shared<const Outcome<JobSpec>>(catalogue_job(t));
  if (!job->ok()) return job->error();
  JobSpec spec = **job;
  spec.label = t.id;
  spec.received = received;
  if (t.openai) {
    // Settled when the call became a ticket (openai_call), the same for
    // every run of it.
    spec.tier = t.openai->tier;
    spec.sampling.seed = t.openai->seed;
    return spec;
  }
  if (!serves_tier(spec.tier))
    return NodeError{ErrorCode::kModelUnavailable, "task " + spec.task + " runs on tier " + spec.tier +
                                                       ", which this node does not serve"};
  const std::optional<uint64_t> seed = catalog_.find(t.task)->seed;
  spec.sampling.seed = seed ? *seed : fresh_seed();
  return spec;
}

std::vector<std::string> Node::prompt_prefix_digests(const JobSpec& spec) const {
  std::vector<std::string> digests;
  if (simulated()) return digests;
  pool_->with_loaded(spec.tier, [&](const LoadedModel& m) {
    if (auto tokens = job_prompt_tokens(m, spec); tokens.ok())
      digests = kvstore::KvStore::aligned_prefix_digests(m.engine->info().fingerprint, tokens->tokens, kPrefixDigestBlock);
  });
  return digests;
}

std::vector<std::string> Node::model_ids() const {
  if (simulated()) return simulated_tiers();
  std::vector<std::string> ids;
  for (const TierSpec& t : pool_->tiers()) ids.push_back(t.name);
  if (pool_->fallback()) ids.push_back(pool_->fallback()->name);
  return ids;
}

std::string Node::tier_for_model(const std::string& model) const {
  if (simulated()) {
    const std::vector<std::string> tiers = simulated_tiers();
    return std::find(tiers.begin(), tiers.end(), model) != tiers.end() ? model : config_.default_tier;
  }
  for (const TierSpec& t : pool_->tiers())
    if (t.name == model) return t.name;
  if (pool_->fallback() && model == pool_->fallback()->name) return model;
  auto matches_file = [&](const TierSpec& t) {
    const std::filesystem::path p(t.model_path);
    return !model.empty() && (p.filename().string() == model || p.stem().string() == model);
  };
  for (const TierSpec& t : pool_->tiers())
    if (matches_file(t)) return t.name;
  if (pool_->fallback() && matches_file(*pool_->fallback())) return pool_->fallback()->name;
  return config_.default_tier;
}

OpenAiCall Node::openai_call(const std::string& model, std::string body, std::optional<uint64_t> seed) const {
  return OpenAiCall{std::move(body), tier_for_model(model), seed ? *seed : fresh_seed()};
}

RequestLimits Node::request_limits() const {
  return {.max_json_depth = config_.max_json_depth,
          .grammar = {.max_nesting = GrammarLimits{}.max_nesting, .max_elements = config_.max_grammar_elements}};
}

void Node::count_refused(const std::string& source, ErrorCode code) {
  metrics_.job_finished(source, error_code_name(code), nullptr);
}

Health Node::health() const { return health_of(executor_->snapshot()); }

double Node::uptime_s() const { return std::chrono::duration<double>(Clock::now() - start_time_).count(); }

std::string Node::status_json() const {
  const ExecutorSnapshot s = executor_->snapshot();
  json tiers = json::array();
  for (const TierStatus& t : pool_->status())
    tiers.push_back({{"name", t.name},
                     {"model", t.model_path},
                     {"loaded", t.loaded},
                     {"ctx", t.ctx},
                     {"digest", t.loaded ? json(t.digest) : json(nullptr)},
                     {"chatTemplate", t.loaded ? json(t.chat_template) : json(nullptr)},
                     {"memoryBytes", t.footprint_bytes},
                     {"kvPrefixes", t.kv_prefixes},
                     {"device", t.device},
                     {"gpuLayers", t.gpu_layers},
                     {"deviceBytes", t.device_bytes}});
  if (simulated())
    for (const std::string& name : simulated_tiers())
      tiers.push_back({{"name", name}, {"model", "sim"}, {"loaded", true}, {"ctx", config_.ctx > 0 ? config_.ctx : 4096},
                       {"digest", "sim"}, {"chatTemplate", "sim"}, {"memoryBytes", 0}});
  json running = json::array();
  for (const CurrentJob& c : s.running)
    running.push_back({{"source", c.source},           {"label", c.label},
                       {"task", c.task},               {"tier", c.tier},
                       {"phase", c.phase},             {"promptTokens", c.prompt_tokens},
                       {"promptDone", c.prompt_done},  {"generated", c.generated},
                       {"maxTokens", c.max_tokens},    {"elapsedMs", c.elapsed_ms}});
  json outcomes = json::object();
  uint64_t done = 0, failed = 0;
  for (const auto& [key, n] : metrics_.outcomes()) {
    outcomes[key.first][key.second] = n;
    (key.second == "done" ? done : failed) += n;
  }
  json tasks = json::array();
  for (const auto& [name, task] : catalog_.tasks()) tasks.push_back({{"name", name}, {"tier", task.tier}});
  const BuildInfo build = build_info();
  json doc{{"name", config_.name},
              {"version", build.version},
              {"commit", build.commit},
              {"kernels", {{"builtIn", build.kernels}, {"active", build.active_kernel}}},
              {"health", health_name(health_of(s))},
              {"uptimeS", uptime_s()},
              {"engine", config_.engine},
              {"sim", simulated() ? json{{"tokensPerS", config_.sim_tokens_per_s},
                                         {"prefillTokensPerS", config_.sim_prefill_tokens_per_s}}
                                  : json(nullptr)},
              {"catalog", catalog_.digest()},
              {"tasks", tasks},
              {"tiers", tiers},
              {"defaultTier", config_.default_tier},
              {"busy", s.busy()},
              {"slots", {{"total", s.slots}, {"free", s.free_slots()}}},
              {"current", running.empty() ? json(nullptr) : running[0]},
              {"running", running},
              {"queue", {{"length", s.queue_length}, {"limit", s.queue_limit}}},
              {"counters",
               {{"executed", s.executed},
                {"done", done},
                {"failed", failed},
                {"byOutcome", outcomes},
                {"promptTokens", metrics_.prompt_tokens()},
                {"generatedTokens", metrics_.generated_tokens()}}}};
  if (transport_report_.status_json) doc[transport_report_.key] = json::parse(transport_report_.status_json());
  return json_text(doc);
}

std::string Node::metrics_text() const {
  const ExecutorSnapshot s = executor_->snapshot();
  LiveGauges g;
  g.queue_length = s.queue_length;
  g.queue_limit = s.queue_limit;
  g.busy = s.running_jobs() > 0;
  g.slots = s.slots;
  g.slots_busy = s.running_jobs();
  g.models_loaded = pool_->loaded_count();
  g.resident_bytes = pool_->resident_bytes();
  std::set<std::string> counted;  // tiers that share a loaded model count it once
  for (const TierStatus& t : pool_->status())
    if (t.loaded && counted.insert(t.digest).second) {
      g.gpu_layers += t.gpu_layers;
      g.gpu_bytes += t.device_bytes;
    }
  g.model_loads = pool_->loads();
  g.uptime_s = uptime_s();
  std::string text = metrics_.prometheus(g);
  if (transport_report_.metrics) text += transport_report_.metrics();
  return text;
}

}  // namespace revis::node
