#include "kvstore/prefix_cache.h"

#include <chrono>
#include <optional>

namespace revis::kvstore {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

KvShape shape_of(const ModelInfo& info) {
  return {.n_layer = static_cast<uint32_t>(info.n_kv_layer),
          .n_head_kv = static_cast<uint32_t>(info.n_head_kv),
          .head_dim_k = static_cast<uint32_t>(info.head_dim_k),
          .head_dim_v = static_cast<uint32_t>(info.head_dim_v),
          .type = KvType::kF16,
          .state_bytes = static_cast<uint32_t>(info.kv_state_bytes_per_token),
          .recurrent_bytes = static_cast<uint32_t>(info.recurrent_state_bytes)};
}

}  // namespace

PrefixCache::PrefixCache(Engine& engine, PrefixCacheOptions options)
    : options_(std::move(options)),
      pool_(engine, options_.ram_sessions),
      resume_interval_(engine.info().kv_resume_interval),
      keeps_state_(engine.info().recurrent_state_bytes > 0) {}

// A checkpoint on its way to disk: what it holds, where the rows are read
// from, and how the write went.
struct PrefixCache::SaveJob {
  const Session* session = nullptr;
  std::string path;
  CheckpointHeader header;
  CheckpointContents contents;
  std::vector<KvRun> runs;
  // A hybrid's recurrent state after the tokens, copied: the session's own
  // moves on as it decodes, and its kept copies may be dropped meanwhile.
  std::vector<float> state;
  Status status;
  double ms = 0;
  std::thread thread;  // a background save's

  void run() {
    const auto start = std::chrono::steady_clock::now();
    status = write_checkpoint(path, header, contents, runs, state);
    ms = ms_since(start);
  }
};

PrefixCache::~PrefixCache() { flush(); }

Result<std::unique_ptr<PrefixCache>> PrefixCache::open(Engine& engine, PrefixCacheOptions options) {
  if (options.ram_sessions < 1)
    return Status::error("RAM sessions: " + std::to_string(options.ram_sessions) + " (expected >= 1)");
  std::unique_ptr<PrefixCache> cache(new PrefixCache(engine, std::move(options)));
  if (!cache->options_.kv_dir.empty()) {
    auto store = KvStore::open({.dir = cache->options_.kv_dir,
                                .budget_bytes = cache->options_.disk_budget_bytes,
                                .clock = cache->options_.clock},
                               engine.info().fingerprint, shape_of(engine.info()));
    if (!store.ok()) return store.status();
    cache->store_ = std::move(*store);
    for (const std::string& problem : cache->store_->scan_problems()) cache->warn("KV store: skipped " + problem);
  }
  return cache;
}

void PrefixCache::warn(const std::string& message) const {
  if (options_.warn) options_.warn(message);
}

Result<PrefixCache::Lease> PrefixCache::acquire(std::span<const int32_t> prompt) {
  const auto start = std::chrono::steady_clock::now();
  const int n_prompt = static_cast<int>(prompt.size());
  Lease lease;
  auto evicting = [this](Session& s, CachedPrompt& c) { save(s, c); };

  // The checkpoint sharing the most with the prompt, and how much of it may
  // be used. A hybrid's checkpoint holds its recurrent state at its end
  // only: it serves a prompt that starts with all of it, from there.
  // deepseek4's serves its end or a resume point (ModelInfo::kv_resume_interval).
  const bool whole_only = resume_interval_ == 0;
  std::optional<KvStore::Match> disk;
  auto resumable_from_disk = [&] {
    if (!store_) return 0;
    disk = whole_only ? store_->longest_prefix_of(prompt) : store_->longest_common(prompt);
    if (!disk) return 0;
    const CheckpointHeader& h = disk->entry->header;
    const int n = resumable_prefix(disk->common, n_prompt, static_cast<int>(h.n_tokens), h.has_logits);
    if (n == static_cast<int>(h.n_tokens)) return n;
    return whole_only ? 0 : n / resume_interval_ * resume_interval_;
  };
  const int from_ram = pool_.peek(prompt);
  int from_disk = resumable_from_disk();

  if (from_ram > 0 && from_ram >= from_disk) {
    SessionPool::Checkout c = pool_.checkout(prompt, evicting);
    lease.session = std::move(c.session);
    settle(*lease.session, c.reused);
    lease.cached.cached_tokens = c.reused;
    lease.source = "ram";
    if (c.reused == n_prompt) lease.next_logits = std::move(c.cached.next_logits);
  } else {
    // A session with nothing worth keeping for this prompt (an empty query
    // matches none). Freeing it may save a checkpoint, which may evict
    // others: look the prompt up again afterwards.
    SessionPool::Checkout c = pool_.checkout({}, evicting);
    lease.session = std::move(c.session);
    settle(*lease.session, 0);
    from_disk = resumable_from_disk();
    if (from_disk > 0) {
      // The rows go straight into the (empty) session's cache; its history
      // stays empty until the whole file has been verified.
      auto contents =
          store_->load(*disk->entry, lease.session->kv_runs(), lease.session->recurrent_state(), &last_restore_);
      // On failure the entry is dropped and disk->entry dangles.
      Status s = contents.ok() ? lease.session->adopt_kv(prompt.first(from_disk), contents->tokens.size())
                               : contents.status();
      if (s.ok()) {
        lease.cached.cached_tokens = from_disk;
        lease.source = "disk";
        if (from_disk == n_prompt) lease.next_logits = std::move(contents->logits);
        store_->record_hit(*disk->entry, from_disk);
      } else {
        warn("KV store: " + s.message() + "; evaluating the prompt instead");
        lease.session->truncate(0);
      }
    }
  }
  lease.cached.next_logits = lease.next_logits;
  lease.cached.restore_ms = ms_since(start);
  return lease;
}

void PrefixCache::release(Lease lease, std::span<const int32_t> prompt, std::span<const float> next_logits) {
  CachedPrompt cached;
  cached.tokens.assign(prompt.begin(), prompt.end());
  cached.next_logits.assign(next_logits.begin(), next_logits.end());
  cached.on_disk = store_ && (store_->contains(cached.tokens) || (pending_ && pending_->contents.tokens == cached.tokens));
  if (static_cast<int>(cached.tokens.size()) >= options_.save_min_tokens) save_in_background(*lease.session, cached);
  pool_.checkin(std::move(lease.session), std::move(cached));
}

void PrefixCache::discard(Lease lease) {
  lease.session->truncate(0);
  pool_.checkin(std::move(lease.session), {});
}

void PrefixCache::flush() {
  wait_for_save();
  pool_.for_each([this](Session& s, CachedPrompt& c) { save(s, c); });
}

std::unique_ptr<PrefixCache::SaveJob> PrefixCache::save_job(Session& session, const CachedPrompt& cached) {
  const int n = static_cast<int>(cached.tokens.size());
  if (!store_ || cached.on_disk || n < options_.evict_save_min_tokens || n == 0) return nullptr;
  // A hybrid's (deepseek4's) prompt is saved only with its state after it
  // (kept at the end of its prefill).
  const std::span<const float> state = session.recurrent_state_at(n);
  if (keeps_state_ && state.empty()) return nullptr;
  auto job = std::make_unique<SaveJob>();
  job->state.assign(state.begin(), state.end());
  job->session = &session;
  job->contents.tokens = cached.tokens;
  job->contents.logits = cached.next_logits;
  job->header.writer = "revis " REVIS_VERSION;
  job->runs = session.kv_runs();
  auto path = store_->prepare(job->header, job->contents.tokens);
  if (path.ok()) job->path = *path;
  job->status = path.status();
  return job;
}

void PrefixCache::finish(SaveJob& job) {
  if (!job.status.ok()) {
    warn("KV store: could not save a checkpoint of " + std::to_string(job.contents.tokens.size()) +
         " tokens: " + job.status.message());
    return;
  }
  store_->install(job.header, std::move(job.contents.tokens));
  last_save_ms_ = job.ms;
}

void PrefixCache::save(Session& session, CachedPrompt& cached) {
  std::unique_ptr<SaveJob> job = save_job(session, cached);
  if (!job) return;
  if (job->status.ok()) job->run();
  cached.on_disk = job->status.ok();
  finish(*job);
}

void PrefixCache::save_in_background(Session& session, CachedPrompt& cached) {
  std::unique_ptr<SaveJob> job = save_job(session, cached);
  if (!job) return;
  if (!job->status.ok()) return finish(*job);
  wait_for_save();  // one write at a time
  // Counted as on disk from now on: a failed write only warns (at
  // wait_for_save), and the prompt is then saved again only if it comes back.
  cached.on_disk = true;
  job->thread = std::thread([this, j = job.get()] {
    if (options_.before_background_save) options_.before_background_save();
    j->run();
  });
  pending_ = std::move(job);
}

void PrefixCache::wait_for_save() {
  if (!pending_) return;
  pending_->thread.join();
  std::unique_ptr<SaveJob> job = std::move(pending_);
  finish(*job);
}

void PrefixCache::settle(const Session& session, int kept) {
  if (pending_ && pending_->session == &session && kept < static_cast<int>(pending_->contents.tokens.size()))
    wait_for_save();
}

}  // namespace revis::kvstore
