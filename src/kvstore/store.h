// KvStore: a directory of checkpoint files, indexed by token prefix, kept
// under a disk budget.
//
// At open the directory is scanned once: every checkpoint's header and token
// ids go into memory, and those of the loaded model into a RadixIndex, so a
// lookup never touches the disk. Files other models wrote stay untouched
// (and count towards the budget). Damaged files are reported, not indexed.
//
// Eviction keeps the entries worth the most prefill time: an entry's value
// is its tokens (prefill work it saves) times its hits, where each hit's
// weight halves every half-life (so an entry used often long ago loses to one
// used recently). A hit on a checkpoint also counts for the shorter
// checkpoints it extends, so the shared prefixes many prompts start with
// outlive the long, single-use ones built on them. Recency survives restarts
// as the file's mtime (touched on every hit); hit counts start again at one.
//
// Several processes may share a directory: files appear by atomic rename,
// and a file another process removed is dropped from the index when a load
// finds it gone. Each process enforces the budget with what it has indexed.
//
// Thread-safety: none; one owner (the engine's user) serialises calls.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvstore/checkpoint_file.h"
#include "kvstore/radix_index.h"
#include "revis/status.h"

namespace revis::kvstore {

struct StoreOptions {
  std::string dir;
  uint64_t budget_bytes = 0;         // 0: unlimited
  double half_life_s = 24 * 3600.0;  // a hit's weight halves in this time
  std::function<double()> clock = nullptr;  // seconds on the Unix epoch; default: the system clock
};

struct StoreEntry {
  std::string file;  // name inside the directory
  CheckpointHeader header;
  std::vector<int32_t> tokens;
  uint64_t bytes = 0;      // file size
  double hits = 1;         // decayed hit count as of last_used
  double last_used = 0;    // seconds on the clock
};

class KvStore {
 public:
  // Opens (creating it if needed) the directory. Lookups and saves are for
  // `model` with `shape`; model 0 opens it for inspection only (revis kv).
  static Result<std::unique_ptr<KvStore>> open(StoreOptions options, uint64_t model, KvShape shape);

  // Files the scan could not use, one message each (naming the file and why).
  const std::vector<std::string>& scan_problems() const { return scan_problems_; }

  struct Match {
    const StoreEntry* entry = nullptr;
    int common = 0;  // tokens the entry shares with the query
  };
  std::optional<Match> longest_common(std::span<const int32_t> tokens) const;
  // The longest entry whose tokens are all a prefix of `tokens`: where a
  // model with recurrent layers may resume, its state being stored at the
  // checkpoint's end only.
  std::optional<Match> longest_prefix_of(std::span<const int32_t> tokens) const;
  bool contains(std::span<const int32_t> tokens) const;

  // Reads and checks an entry's file straight into `runs` (a session's KV
  // cache: Session::kv_runs) and `state` (a hybrid's recurrent state:
  // Session::recurrent_state). A file that fails is removed from the index
  // (and from the disk, unless it vanished or belongs elsewhere), so it is
  // never tried again; the error says why, and the runs hold garbage.
  Result<CheckpointContents> load(const StoreEntry& entry, std::span<const KvRun> runs, std::span<float> state = {},
                                  ReadTimings* timings = nullptr);
  // Counts a hit on `entry`, of which `used` tokens served a prompt, and on
  // every entry that is a prefix of those tokens.
  void record_hit(const StoreEntry& entry, int used);

  // Saving, in two steps so that the write may run on another thread:
  // prepare() fills in the header's model and shape and returns the path to
  // write_checkpoint() to; install() then indexes the written file and
  // evicts down to the budget, never the new file itself. save() does all
  // three.
  Result<std::string> prepare(CheckpointHeader& header, std::span<const int32_t> tokens) const;
  void install(const CheckpointHeader& header, std::vector<int32_t> tokens);
  Status save(CheckpointHeader& header, const CheckpointContents& contents, std::span<const KvRun> runs,
              std::span<const float> state = {});
  // Evicts lowest-value entries (never `keep`) until the files total at most
  // budget_bytes; returns the names of the files removed.
  std::vector<std::string> evict_to(uint64_t budget_bytes, const StoreEntry* keep = nullptr);
  // Removes one file by name; false when it is not an indexed entry.
  bool remove(const std::string& file);

  double value(const StoreEntry& entry) const;  // tokens x decayed hits, now
  std::vector<const StoreEntry*> entries() const;
  uint64_t total_bytes() const { return total_bytes_; }
  const StoreOptions& options() const { return options_; }

  // Digests of the aligned prefixes (every `block` tokens) of this model's
  // checkpoints, at most `limit`, longest first: what a node advertises so
  // that a dispatcher can route a prompt to where its prefix already is.
  // resume_interval (ModelInfo::kv_resume_interval): a checkpoint serves a
  // shorter prefix of its tokens only at multiples of it, none where 0 (a
  // state stored for its end only), so only those and its longest aligned
  // prefix are given. prefix_digest() computes one for any token sequence.
  std::vector<std::string> prefix_digests(int block, size_t limit, int resume_interval = 1) const;
  static std::string prefix_digest(uint64_t model, std::span<const int32_t> tokens);
  // prefix_digest() of the first `block`, 2 x `block`, ... tokens, shortest
  // first: a prompt's side of that comparison.
  static std::vector<std::string> aligned_prefix_digests(uint64_t model, std::span<const int32_t> tokens, int block);

 private:
  KvStore(StoreOptions options, uint64_t model, KvShape shape);
  Status scan();
  double now() const;
  void add(StoreEntry entry);
  void drop(uint64_t id, bool delete_file);
  const StoreEntry* find(uint64_t id) const;
  uint64_t id_of(const StoreEntry& entry) const;

  StoreOptions options_;
  uint64_t model_;
  KvShape shape_;
  std::map<uint64_t, StoreEntry> entries_;  // by id
  std::map<std::string, uint64_t> by_file_;
  RadixIndex index_;  // this model's entries
  uint64_t next_id_ = 1;
  uint64_t total_bytes_ = 0;
  std::vector<std::string> scan_problems_;
};

}  // namespace revis::kvstore
