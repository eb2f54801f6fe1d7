// Tiers and the models behind them.
//
// A tier is a name the catalogue uses ("small", "large") bound to a GGUF
// file with a context size and a thread count, and how it decodes
// speculatively (revis/draft.h): with a draft model, loaded beside the
// model, or with prompt lookup. Models are loaded on demand,
// when the first job for a tier runs, and kept while they fit a memory
// budget; when a load would exceed it, the least recently used models are
// unloaded first. Tiers bound to the same file with the same settings share
// one loaded model. A model that alone exceeds the budget is still loaded
// (with a warning): refusing would make the tier unusable.
//
// Memory is counted as the file size (the weights are mapped and, to run
// fast, resident) plus an upper bound of the KV cache
// (2 x layers x context x embedding x 2 bytes).
//
// Besides the engine, a loaded model carries what the node reports and
// needs per job: the file digest (computed once, at load), the chat template
// family, and a prefix cache (kvstore/prefix_cache.h): its sessions, kept
// between jobs so that a prompt sharing a prefix with an earlier one resumes
// from it, and with a KV directory, checkpoints on disk. Memory counts the KV
// cache of each of those sessions.
//
// Thread-safety: acquire() only from the executor thread (one inference at a
// time, so the models need no locking); status() and the const getters from
// any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "chat/chat_template.h"
#include "grammar/grammar_constraint.h"
#include "kvstore/prefix_cache.h"
#include "revis/draft.h"
#include "revis/engine.h"
#include "revis/status.h"

namespace revis::node {

// Prefixes a node advertises per model (kvPrefixes): every 64 tokens (what
// placement counts in: a short digest list still covers long prompts), the
// longest 256.
constexpr int kPrefixDigestBlock = 64;
constexpr size_t kPrefixDigestLimit = 256;

struct TierSpec {
  std::string name;
  std::string model_path;
  int ctx = 0;      // 0: the engine's default
  int threads = 0;  // 0: the engine's default
  std::string chat_template;  // a Jinja file replacing the model's template; empty: the model's
  std::string draft_path;  // a draft model (same vocabulary); takes precedence over lookup
  bool lookup = false;     // prompt lookup
  int draft_max = 0;       // tokens per draft; 0: kDefaultDraftMax
  int slots = 0;           // sequences decoded together; 0: as many KV caches as the budget holds (kDefaultSlotsMax at most)
  std::string device = "cpu";  // EngineOptions::device
  int gpu_layers = -1;         // EngineOptions::gpu_layers
};

// Slots a tier gets when it names none and the memory budget allows more.
constexpr int kDefaultSlotsMax = 8;

// Where a node keeps KV checkpoints (revis serve --kv-dir, --kv-budget).
struct KvCacheConfig {
  std::string dir;           // empty: RAM reuse only
  uint64_t budget_bytes = 0; // 0: no limit
  int ram_sessions = 2;      // sessions kept per model
};

struct LoadedModel {
  std::string path;
  int ctx = 0, threads = 0;
  std::string device;
  int gpu_layers = -1;
  std::string chat_template_path;  // TierSpec::chat_template: tiers differing in it load the model apart
  std::unique_ptr<Engine> engine;
  std::string draft_path;
  std::unique_ptr<Drafter> draft_model;         // TierSpec::draft_path loaded, on the engine's threads
  std::unique_ptr<kvstore::PrefixCache> cache;  // declared after the engine: destroyed (and flushed) first
  std::vector<std::string> kv_prefixes;         // digests of the aligned prefixes on disk (refresh_kv_prefixes)
  ModelChat chat;
  std::vector<int32_t> shown_tokens;  // control tokens a chat's output keeps (shown_special_tokens)
  // The vocabulary as a trie for grammar constraints: built by the executor
  // on the model's first constrained job.
  std::shared_ptr<const TokenVocabulary> vocabulary;
  int slots = 1;                   // TierSpec::slots, or what the budget allows
  uint64_t slot_kv_bytes = 0;      // one slot's KV cache at the full context
  uint64_t footprint_bytes = 0;    // the file and every slot's KV cache
  double load_ms = 0;
  uint64_t last_used = 0;  // LRU tick
};

struct TierStatus {
  std::string name, model_path, digest, chat_template;
  int ctx = 0;
  bool loaded = false;
  uint64_t footprint_bytes = 0;
  std::vector<std::string> kv_prefixes;
  std::string device = "cpu";  // where its layers run: "cpu" or the GPU's name
  int gpu_layers = 0;
  uint64_t device_bytes = 0;   // GPU memory its layers take
};

class TierPool {
 public:
  // `fallback` serves every tier name that `tiers` does not (revis serve -m).
  // budget_bytes 0: no limit.
  TierPool(std::vector<TierSpec> tiers, std::optional<TierSpec> fallback, uint64_t budget_bytes,
           KvCacheConfig kv = {});
  ~TierPool();

  const TierSpec* resolve(std::string_view tier) const;
  const std::vector<TierSpec>& tiers() const { return tiers_; }
  const std::optional<TierSpec>& fallback() const { return fallback_; }
  uint64_t budget_bytes() const { return budget_; }

  // The loaded model for `tier`, loading it if needed; *load_ms gets the
  // time spent loading (0 when it was already loaded).
  Result<LoadedModel*> acquire(const TierSpec& tier, double* load_ms = nullptr);

  // Runs `use` on the loaded model serving `tier`, under the pool's lock so
  // that it cannot be unloaded meanwhile; false, and nothing runs, when that
  // model is not loaded (this never loads one). For short reads from other
  // threads: the dispatcher tokenizing a prompt.
  bool with_loaded(std::string_view tier, const std::function<void(const LoadedModel&)>& use) const;

  // Recomputes m's kv_prefixes after a job (executor thread), for status().
  void refresh_kv_prefixes(LoadedModel& m);
  // Waits for every model's background checkpoint write and refreshes its
  // prefixes (executor thread).
  void finish_kv_saves();

  std::vector<TierStatus> status() const;
  uint64_t resident_bytes() const;
  int loaded_count() const;
  uint64_t loads() const;

 private:
  void unload_lru_until(uint64_t needed, const LoadedModel* keep);

  std::vector<TierSpec> tiers_;
  std::optional<TierSpec> fallback_;
  uint64_t budget_;
  KvCacheConfig kv_;
  mutable Mutex mutex_;  // for status() readers; only the executor thread writes
  uint64_t tick_ GUARDED_BY(mutex_) = 0;
  std::vector<std::unique_ptr<LoadedModel>> models_ GUARDED_BY(mutex_);
  uint64_t loads_ GUARDED_BY(mutex_) = 0;
};

}  // namespace revis::node
