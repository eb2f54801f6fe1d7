#include "revis/session_pool.h"

#include <algorithm>

namespace revis {

int resumable_prefix(int common, int n_prompt, int n_cached, bool has_logits) {
  if (common == n_prompt && n_cached == n_prompt && has_logits) return n_prompt;
  return std::max(0, std::min(common, n_prompt - 1));
}

namespace {

int common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int>(i);
}

}  // namespace

SessionPool::SessionPool(Engine& engine, int max_sessions)
    : engine_(engine), max_sessions_(std::max(1, max_sessions)) {}

std::pair<int, int> SessionPool::best_match(std::span<const int32_t> prompt) const {
  std::pair<int, int> best{-1, 0};
  for (size_t i = 0; i < entries_.size(); ++i) {
    const CachedPrompt& c = entries_[i].cached;
    int reusable = resumable_prefix(common_prefix(prompt, c.tokens), static_cast<int>(prompt.size()),
                                    static_cast<int>(c.tokens.size()), !c.next_logits.empty());
    // A recurrent state continues from where it stands, after all the
    // session evaluated, the decoded tokens too, when the prompt goes on
    // from there (a chat's next turn); otherwise from a position where the
    // session kept a copy of it (the end of a prompt or of its chunks).
    const Session& session = *entries_[i].session;
    const int n_past = session.n_past();
    if (!session.can_rewind() && n_past < static_cast<int>(prompt.size()) && session.resumable_at(n_past) == n_past &&
        common_prefix(prompt, session.history()) == n_past)
      reusable = n_past;
    else
      reusable = session.resumable_at(reusable);
    if (reusable > best.second) best = {static_cast<int>(i), reusable};
  }
  return best;
}

int SessionPool::peek(std::span<const int32_t> prompt) const {
  return best_match(prompt).second;
}

SessionPool::Checkout SessionPool::checkout(std::span<const int32_t> prompt, const EvictFn& evicting) {
  Checkout out;
  auto [index, reusable] = best_match(prompt);
  if (index < 0 && static_cast<int>(entries_.size()) + checked_out_ >= max_sessions_ && !entries_.empty()) {
    index = static_cast<int>(std::min_element(entries_.begin(), entries_.end(),
                                              [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; }) -
                             entries_.begin());
    reusable = 0;
  }
  // Rows about to be lost (the whole session, or its rows past the reused
  // prefix) go to `evicting` first, while the session still holds them.
  if (index >= 0 && reusable < static_cast<int>(entries_[index].cached.tokens.size()) && evicting)
    evicting(*entries_[index].session, entries_[index].cached);
  if (index >= 0) {
    out.session = std::move(entries_[index].session);
    out.cached = std::move(entries_[index].cached);
    entries_.erase(entries_.begin() + index);
  } else {
    out.session = engine_.new_session();
  }
  out.reused = reusable;
  out.session->truncate(reusable);
  ++checked_out_;
  return out;
}

void SessionPool::checkin(std::unique_ptr<Session> session, CachedPrompt cached) {
  checked_out_ = std::max(0, checked_out_ - 1);
  entries_.push_back({std::move(session), std::move(cached), ++tick_});
}

void SessionPool::for_each(const EvictFn& fn) {
  for (Entry& e : entries_) fn(*e.session, e.cached);
}

}  // namespace revis
