// SessionPool: sessions kept alive in RAM between requests, so that a prompt
// sharing a prefix with an earlier one continues from that prefix (matched
// token by token) instead of being evaluated again.
//
// Which rows may be reused: any prefix. A token's KV rows and logits are the
// same bits however it was evaluated (revis/engine.h: batch invariance), so
// a resumed session gives bit-identical logits to a cold prefill of the
// same prompt. At least the last prompt token is evaluated again, for its
// logits, unless the whole prompt is cached together with them.
// resumable_prefix() is that rule; the disk store (src/kvstore) applies it
// too. A model with recurrent layers (Session::can_rewind() false) resumes
// a session only where its state is known: from everything it evaluated,
// decoded tokens included, when the prompt starts with all of it, or else
// from the longest usable prefix ending where the session kept a copy of
// its state (Session::resumable_at: the ends of its prompt's chunks). A
// model with sliding-window layers likewise, but from any prefix whose
// window its rings still hold (the last few hundred positions).
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

// Tokens of a prompt of n_prompt tokens that may be taken from a cached
// prompt of n_cached tokens sharing `common` tokens with it: all of them when
// the prompts are equal and the cached next-token logits are at hand
// (has_logits), otherwise the shared part short of the last prompt token.
int resumable_prefix(int common, int n_prompt, int n_cached, bool has_logits);

// What a pooled session remembers of the prompt that filled it.
struct CachedPrompt {
  std::vector<int32_t> tokens;     // the session's rows [0, tokens.size())
  std::vector<float> next_logits;  // the logits after tokens.back()
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
  Checkout checkout(std::span<const int32_t> prompt, const EvictFn& evicting);
  // Returns a session, now holding `cached.tokens` (and maybe decoded rows after them).
  void checkin(std::unique_ptr<Session> session, CachedPrompt cached);

  // The best resumable prefix the pool offers for `prompt`, without taking anything.
  int peek(std::span<const int32_t> prompt) const;
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
  std::pair<int, int> best_match(std::span<const int32_t> prompt) const;

  Engine& engine_;
  int max_sessions_;
  int checked_out_ = 0;
  uint64_t tick_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace revis
