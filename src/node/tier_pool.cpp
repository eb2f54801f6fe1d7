#include "node/tier_pool.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "base/log.h"

namespace revis::node {
namespace {

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// The slots whose KV caches fit in the memory budget beside the model's
// file (budget 0: no limit), within [1, kDefaultSlotsMax].
int slots_within(uint64_t budget, uint64_t file_bytes, uint64_t slot_kv_bytes) {
  if (budget == 0 || slot_kv_bytes == 0) return kDefaultSlotsMax;
  const uint64_t room = budget > file_bytes ? budget - file_bytes : 0;
  return static_cast<int>(std::clamp<uint64_t>(room / slot_kv_bytes, 1, kDefaultSlotsMax));
}

bool same_model(const LoadedModel& m, const TierSpec& t) {
  return m.path == t.model_path && m.ctx == t.ctx && m.threads == t.threads && m.chat_template_path == t.chat_template &&
         m.draft_path == t.draft_path && m.device == t.device && m.gpu_layers == t.gpu_layers;
}

}  // namespace

TierPool::TierPool(std::vector<TierSpec> tiers, std::optional<TierSpec> fallback, uint64_t budget_bytes,
                   KvCacheConfig kv)
    : tiers_(std::move(tiers)), fallback_(std::move(fallback)), budget_(budget_bytes), kv_(std::move(kv)) {}

TierPool::~TierPool() = default;

const TierSpec* TierPool::resolve(std::string_view tier) const {
  for (const TierSpec& t : tiers_)
    if (t.name == tier) return &t;
  return fallback_ ? &*fallback_ : nullptr;
}

void TierPool::unload_lru_until(uint64_t needed, const LoadedModel* keep) {
  while (budget_ > 0 && resident_bytes() + needed > budget_) {
    std::unique_ptr<LoadedModel> victim;
    {
      MutexLock lock(mutex_);
      auto it = models_.end();
      for (auto m = models_.begin(); m != models_.end(); ++m)
        if (m->get() != keep && (it == models_.end() || (*m)->last_used < (*it)->last_used)) it = m;
      if (it == models_.end()) return;  // nothing left to unload
      victim = std::move(*it);
      models_.erase(it);
    }
    log_line("info", "unloading " + victim->path + " (" + mib(victim->footprint_bytes) + ") to stay within the " +
                         mib(budget_) + " memory budget");
  }
}

Result<LoadedModel*> TierPool::acquire(const TierSpec& tier, double* load_ms) {
  if (load_ms) *load_ms = 0;
  {
    MutexLock lock(mutex_);
    for (auto& m : models_)
      if (same_model(*m, tier)) {
        m->last_used = ++tick_;
        return m.get();
      }
  }
  std::error_code ec;
  uint64_t file_bytes = std::filesystem::file_size(tier.model_path, ec);
  if (ec) return Status::error(tier.model_path + ": " + ec.message());
  if (!tier.draft_path.empty() && tier.draft_path != kMtpDraft) {  // the MTP head is inside the model's file
    file_bytes += std::filesystem::file_size(tier.draft_path, ec);
    if (ec) return Status::error("draft model " + tier.draft_path + ": " + ec.message());
  }
  unload_lru_until(file_bytes, nullptr);

  log_line("info", "loading tier " + tier.name + " from " + tier.model_path);
  const auto start = std::chrono::steady_clock::now();
  auto engine = Engine::load({.model_path = tier.model_path,
                              .n_ctx = tier.ctx,
                              .n_threads = tier.threads,
                              .device = tier.device,
                              .gpu_layers = tier.gpu_layers});
  if (!engine.ok()) return engine.status();
  auto m = std::make_unique<LoadedModel>();
  m->path = tier.model_path;
  m->ctx = tier.ctx;
  m->threads = tier.threads;
  m->device = tier.device;
  m->gpu_layers = tier.gpu_layers;
  m->chat_template_path = tier.chat_template;
  m->engine = std::move(*engine);
  const ModelInfo& info = m->engine->info();
  m->draft_path = tier.draft_path;
  if (!tier.draft_path.empty()) {
    auto draft = load_drafter(*m->engine, tier.draft_path);
    if (!draft.ok()) return draft.status();
    m->draft_model = std::move(*draft);
  }

  std::string template_source;
  if (!tier.chat_template.empty()) {
    auto source = read_chat_template_file(tier.chat_template);
    if (!source.ok()) return source.status();
    template_source = std::move(*source);
  }
  auto chat = model_chat(info, template_source, tier.chat_template);
  if (!chat.ok()) return Status::error(tier.model_path + ": " + chat.status().message());
  m->chat = std::move(*chat);
  if (!m->chat.warning.empty()) log_line("warn", tier.model_path + ": " + m->chat.warning);
  m->shown_tokens = shown_special_tokens(*m->engine, m->chat);
  // Every slot holds a session of its own; a session keeps a whole
  // context's KV cache (and a hybrid's recurrent state with its copies,
  // plus one per draft token and one more where the tier drafts:
  // Session::keep_recent_states). A draft model's drafter is copied for
  // each slot that drafts at once, each copy with its own session.
  const bool drafts = !tier.draft_path.empty() || tier.lookup;
  const uint64_t draft_states =
      drafts ? static_cast<uint64_t>((tier.draft_max > 0 ? tier.draft_max : kDefaultDraftMax) + 1) *
                   info.draft_state_bytes
             : 0;
  m->slot_kv_bytes = info.kv_bytes_per_token * static_cast<uint64_t>(info.n_ctx) + info.session_state_bytes +
                     draft_states + (m->draft_model ? m->draft_model->state_bytes() : 0);
  m->slots = tier.slots > 0 ? tier.slots : slots_within(budget_, file_bytes, m->slot_kv_bytes);
  if (info.gpu_layers > 0) {
    log_line("info", "tier " + tier.name + ": GPU " + info.device + " runs " + std::to_string(info.gpu_layers) + " of " +
                         std::to_string(info.n_layer) + " layers (" + mib(info.device_bytes) + ")");
    // Each slot's session keeps the GPU's layers' cache in its memory too.
    if (tier.slots == 0 && info.device_kv_bytes_per_token > 0) {
      const uint64_t per_slot = info.device_kv_bytes_per_token * static_cast<uint64_t>(info.n_ctx);
      const uint64_t room = info.device_memory_bytes > info.device_bytes ? info.device_memory_bytes - info.device_bytes : 0;
      m->slots = std::clamp(static_cast<int>(std::min<uint64_t>(room / per_slot, kDefaultSlotsMax)), 1, m->slots);
    }
  }
  for (const std::string& warning : info.device_warnings) log_line("warn", "tier " + tier.name + ": GPU: " + warning);
  auto cache = kvstore::PrefixCache::open(
      *m->engine, {.ram_sessions = std::max({1, kv_.ram_sessions, m->slots}),
                   .kv_dir = kv_.dir,
                   .disk_budget_bytes = kv_.budget_bytes,
                   .warn = [](const std::string& message) { log_line("warn", message); }});
  if (!cache.ok()) return cache.status();
  m->cache = std::move(*cache);
  if (m->cache->store()) {
    m->kv_prefixes =
        m->cache->store()->prefix_digests(kPrefixDigestBlock, kPrefixDigestLimit, info.kv_resume_interval);
    log_line("info", "KV checkpoints in " + kv_.dir + ": " + std::to_string(m->cache->store()->entries().size()) +
                         " files, " + mib(m->cache->store()->total_bytes()));
  }

  // A draft model counts its file; its KV cache is a small model's.
  m->footprint_bytes = file_bytes + m->slot_kv_bytes * std::max({1, kv_.ram_sessions, m->slots});
  m->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (load_ms) *load_ms = m->load_ms;
  log_line("info", "loaded " + tier.model_path + " (" + info.architecture + ", context " + std::to_string(info.n_ctx) +
                       ", " + std::to_string(info.n_threads) + " threads, ~" + mib(m->footprint_bytes) + ", " +
                       m->chat.origin + " chat template, " + info.digest + ") in " +
                       std::to_string(static_cast<int>(m->load_ms)) + " ms");
  log_line("info", "tier " + tier.name + ": " + std::to_string(m->slots) + (m->slots == 1 ? " slot" : " slots") + " of " +
                       mib(m->slot_kv_bytes) + " KV cache each (" +
                       (tier.slots > 0 ? "--parallel" : "as many as the memory budget holds, at most " +
                                                            std::to_string(kDefaultSlotsMax)) +
                       ")");
  if (budget_ > 0 && m->footprint_bytes > budget_)
    log_line("warn", tier.model_path + " alone needs ~" + mib(m->footprint_bytes) + ", more than the memory budget (" +
                         mib(budget_) + ")");

  LoadedModel* raw = m.get();
  {
    MutexLock lock(mutex_);
    m->last_used = ++tick_;
    models_.push_back(std::move(m));
    ++loads_;
  }
  unload_lru_until(0, raw);
  return raw;
}

bool TierPool::with_loaded(std::string_view tier, const std::function<void(const LoadedModel&)>& use) const {
  const TierSpec* spec = resolve(tier);
  if (!spec) return false;
  MutexLock lock(mutex_);
  for (const auto& m : models_)
    if (same_model(*m, *spec)) {
      use(*m);
      return true;
    }
  return false;
}

void TierPool::refresh_kv_prefixes(LoadedModel& m) {
  if (!m.cache || !m.cache->store()) return;
  std::vector<std::string> digests = m.cache->store()->prefix_digests(kPrefixDigestBlock, kPrefixDigestLimit,
                                                                       m.engine->info().kv_resume_interval);
  MutexLock lock(mutex_);
  m.kv_prefixes = std::move(digests);
}

void TierPool::finish_kv_saves() {
  // Only this (the executor) thread adds or removes models, so the pointers
  // stay valid after the lock is dropped; the waits must not block status().
  std::vector<LoadedModel*> loaded;
  {
    MutexLock lock(mutex_);
    for (const auto& m : models_) loaded.push_back(m.get());
  }
  for (LoadedModel* m : loaded)
    if (m->cache) {
      m->cache->wait_for_save();
      refresh_kv_prefixes(*m);
    }
}

std::vector<TierStatus> TierPool::status() const {
  MutexLock lock(mutex_);
  std::vector<const TierSpec*> specs;
  for (const TierSpec& t : tiers_) specs.push_back(&t);
  if (fallback_) specs.push_back(&*fallback_);
  std::vector<TierStatus> out;
  // A loop, not a lambda: the lock analysis checks a lambda as holding nothing.
  for (const TierSpec* spec : specs) {
    const TierSpec& t = *spec;
    TierStatus s;
    s.name = t.name;
    s.model_path = t.model_path;
    s.ctx = t.ctx;
    for (const auto& m : models_)
      if (same_model(*m, t)) {
        s.loaded = true;
        s.digest = m->engine->info().digest;
        s.chat_template = m->chat.origin;
        s.ctx = m->engine->info().n_ctx;
        s.footprint_bytes = m->footprint_bytes;
        s.kv_prefixes = m->kv_prefixes;
        s.device = m->engine->info().device;
        s.gpu_layers = m->engine->info().gpu_layers;
        s.device_bytes = m->engine->info().device_bytes;
      }
    out.push_back(std::move(s));
  }
  return out;
}

uint64_t TierPool::resident_bytes() const {
  MutexLock lock(mutex_);
  uint64_t total = 0;
  for (const auto& m : models_) total += m->footprint_bytes;
  return total;
}

int TierPool::loaded_count() const {
  MutexLock lock(mutex_);
  return static_cast<int>(models_.size());
}

uint64_t TierPool::loads() const {
  MutexLock lock(mutex_);
  return loads_;
}

}  // namespace revis::node
