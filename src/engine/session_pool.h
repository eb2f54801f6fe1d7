// SessionPool: sessions kept alive in RAM between requests, so that a prompt
// sharing a prefix with an earlier one continues from that prefix (matched
// token by token) instead of being evaluated again.
//
// Which rows may be reused: a resumed session must give bit-identical logits
// to a cold prefill of the same prompt. The forward pass evaluates a prompt
// in chunks of 256 tokens from wherever the eval starts (model.cpp), and its
// batched kernels sum in an order that depends on how the tokens group
// inside a chunk: four at a time from its start. So rows are reused only up
// to a multiple of kResumeAlignment (every later token then groups as in a
// cold prefill), leaving at least two tokens to evaluate (a one-token eval
// is a decoding step, whose kernels differ from a prompt's: the experts of
// a mixture take the single-token kernel then), only rows a prompt prefill
// computed (rows decoded one token at a time differ in their last bits), and
// a whole prompt only together with its next-token logits computed in the
// same logits mode.
// resumable_prefix() is that rule; the disk store (src/kvstore) applies it
// too.
//
// Thread-safety: none; the owner serialises calls (one inference at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "revis/engine.h"

namespace revis {

// Where a resumed prompt may restart: a multiple of the four tokens the
// matrix kernels take at a time (model.cpp), and the block of prompt digests
// and disk checkpoints.
constexpr int kResumeAlignment = 64;

// Tokens of a prompt of n_prompt tokens that may be taken from a cached
// prompt of n_cached tokens sharing `common` tokens with it: all of them when
// the prompts are equal and the cached next-token logits fit
// (logits_usable), otherwise the shared part, short of the last two prompt
// tokens (the last one's logits must be computed, and not by a one-token
// eval), rounded down to kResumeAlignment.
int resumable_prefix(int common, int n_prompt, int n_cached, bool logits_usable);

// What a pooled session remembers of the prompt that filled it.
struct CachedPrompt {
  std::vector<int32_t> tokens;     // rows [0, tokens.size()) were computed by a prompt prefill
  std::vector<float> next_logits;  // the logits after tokens.back()
  bool logits_all_rows = false;    // next_logits came from an eval that computed every row's logits
  bool on_disk = false;            // a checkpoint of exactly these tokens exists
};

class SessionPool {
 public:
  // Keeps at most max_sessions sessions (>= 1), each with a full KV cache.
  SessionPool(Engine& engine, int max_sessions);

  struct Checkout {
    std::unique_ptr<Session> session;  // holds exactly `reused` tokens of the prompt
    int reused = 0;
    // What the session held before (rows past `reused` are gone); when
    // reused is the whole prompt, cached.next_logits are the logits after it.
    CachedPrompt cached;
  };
  // Takes the session offering the longest resumable prefix of `prompt` out
  // of the pool, truncated to it. Without one, takes a new session while the
  // pool has room, or else the least recently used. A pooled prompt whose
  // rows will be overwritten is handed to `evicting` first (to save it).
  using EvictFn = std::function<void(Session& session, CachedPrompt& cached)>;
  Checkout checkout(std::span<const int32_t> prompt, bool all_logits, const EvictFn& evicting);
  // Returns a session, now holding `cached.tokens` (and maybe decoded rows after them).
  void checkin(std::unique_ptr<Session> session, CachedPrompt cached);

  // The best resumable prefix the pool offers for `prompt`, without taking anything.
  int peek(std::span<const int32_t> prompt, bool all_logits) const;
  // Calls fn on every pooled session (for saving them all at shutdown).
  void for_each(const EvictFn& fn);
  int size() const { return static_cast<int>(entries_.size()); }
  int max_sessions() const { return max_sessions_; }

 private:
  struct Entry {
    std::unique_ptr<Session> session;
    CachedPrompt cached;
    uint64_t last_used = 0;
  };
  // Index of the best entry and its resumable prefix; (-1, 0) when none helps.
  std::pair<int, int> best_match(std::span<const int32_t> prompt, bool all_logits) const;

  Engine& engine_;
  int max_sessions_;
  int checked_out_ = 0;
  uint64_t tick_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace revis
