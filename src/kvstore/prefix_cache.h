// PrefixCache: where a prompt's KV rows come from before generate() and
// where they go after it, for one engine.
//
// Before: from a live session in RAM (engine/session_pool.h) or a checkpoint
// on disk (KvStore), whichever offers the longer resumable prefix (RAM on a
// tie, being free); otherwise the prompt is evaluated cold. After: the
// session returns to the pool, and checkpoints are written by this policy:
//   - a prompt of save_min_tokens or more, when its request ends, written
//     on a background thread straight from the session's KV cache (so
//     saving never delays the first token, nor the next request: only one
//     that would overwrite those very rows waits for the write to finish);
//   - a shorter one of evict_save_min_tokens or more, only when its rows
//     leave RAM: evicted, overwritten by another prompt, or at shutdown
//     (flush()).
// A checkpoint holds the whole prompt and its next-token logits; a later
// prompt that shares only part of it resumes from the shared part
// (engine/session_pool.h), so no separate files of prefixes are needed.
// A model with recurrent layers is the exception: its checkpoint holds the
// state after the whole prompt only, and serves prompts that start with
// all of it. deepseek4's serves its whole prompt or the longest shared
// prefix cut to a resume point (ModelInfo::kv_resume_interval); the rest
// of the prompt is evaluated.
// A damaged or foreign file never fails a request: it is reported through
// `warn` and the prompt is evaluated cold.
//
// Thread-safety: none; one inference at a time per engine. The background
// save's thread only reads the saved rows and writes its file; the store's
// index learns of the file on the owner's thread (the next acquire(),
// wait_for_save() or flush()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <span>
#include <string>
#include <vector>

#include "revis/session_pool.h"
#include "kvstore/store.h"
#include "revis/engine.h"
#include "revis/generate.h"

namespace revis::kvstore {

struct PrefixCacheOptions {
  int ram_sessions = 2;              // sessions kept in RAM, each with a full KV cache
  std::string kv_dir = {};           // empty: RAM only
  uint64_t disk_budget_bytes = 0;    // 0: unlimited
  int save_min_tokens = 512;
  int evict_save_min_tokens = 64;
  std::function<void(const std::string&)> warn = nullptr;  // problems that do not stop a request
  std::function<double()> clock = nullptr;  // for the store's eviction (tests); default: system clock
  // Tests: runs on the background save's thread before it writes.
  std::function<void()> before_background_save = nullptr;
};

class PrefixCache {
 public:
  static Result<std::unique_ptr<PrefixCache>> open(Engine& engine, PrefixCacheOptions options);
  ~PrefixCache();  // flush()es

  struct Lease {
    std::unique_ptr<Session> session;  // holds cached.cached_tokens tokens of the prompt
    PromptCache cached;                // pass to generate()
    std::string source = "none";       // where the rows came from: "none", "ram", "disk"
    std::vector<float> next_logits;    // storage behind cached.next_logits
  };
  // A session prepared for `prompt`.
  Result<Lease> acquire(std::span<const int32_t> prompt);
  // Returns the session after a successful run of `prompt`, with the logits
  // after its last token (GenerateResult::next_logits), saving per the policy.
  void release(Lease lease, std::span<const int32_t> prompt, std::span<const float> next_logits);
  // Returns the session after a failure: its rows are not trusted.
  void discard(Lease lease);
  // Saves every pooled prompt that is not on disk yet (shutdown).
  void flush();
  // Waits for the checkpoint being written in the background, if any, and
  // indexes it (or warns why it failed).
  void wait_for_save();

  KvStore* store() { return store_.get(); }
  double last_save_ms() const { return last_save_ms_; }  // the latest save's write, as of its indexing
  const ReadTimings& last_restore() const { return last_restore_; }  // the latest resume from disk

 private:
  struct SaveJob;
  PrefixCache(Engine& engine, PrefixCacheOptions options);
  std::unique_ptr<SaveJob> save_job(Session& session, const CachedPrompt& cached);
  void finish(SaveJob& job);
  void save(Session& session, CachedPrompt& cached);
  void save_in_background(Session& session, CachedPrompt& cached);
  // Waits for a background save of `session` that rows from position
  // `kept` on would overwrite.
  void settle(const Session& session, int kept);
  void warn(const std::string& message) const;

  PrefixCacheOptions options_;
  SessionPool pool_;
  int resume_interval_;  // ModelInfo::kv_resume_interval: 0, a checkpoint resumes only whole
  bool keeps_state_;     // a checkpoint holds a state after its rows (ModelInfo::recurrent_state_bytes)
  std::unique_ptr<KvStore> store_;
  double last_save_ms_ = 0;
  ReadTimings last_restore_;
  std::unique_ptr<SaveJob> pending_;  // the background save, until indexed
};

}  // namespace revis::kvstore
