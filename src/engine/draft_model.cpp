// A draft model (revis/draft.h): a second engine on the target's threads,
// with one session that follows the context it is given (another(): one
// more session of the same engine).
//
// Each draft first brings the session to the context: it keeps the longest
// common prefix of what it holds (the drafts the target confirmed are
// already there) and evaluates the rest, usually one or two tokens; then
// it decodes greedily, one token per forward pass. The last draft is not
// evaluated until the next call knows whether it was kept.
#include <algorithm>

#include "revis/draft.h"

namespace revis {
namespace {

class DraftModel final : public Drafter {
 public:
  explicit DraftModel(std::shared_ptr<Engine> engine) : engine_(std::move(engine)), session_(engine_->new_session()) {}

  std::unique_ptr<Drafter> another() const override { return std::make_unique<DraftModel>(engine_); }
  uint64_t state_bytes() const override {
    const ModelInfo& info = engine_->info();
    return info.kv_bytes_per_token * static_cast<uint64_t>(info.n_ctx) + info.session_state_bytes;
  }

  Result<std::vector<int32_t>> draft(std::span<const int32_t> context, int max) override {
    const auto& held = session_->history();
    const size_t common =
        std::mismatch(held.begin(), held.end(), context.begin(), context.end()).first - held.begin();
    // The logits after the context's last token come from evaluating it.
    // A hybrid draft model goes back over the drafts the target rejected
    // (at most max) by its recent states, further only by evaluating again.
    session_->keep_recent_states(max + 1);
    const int keep = session_->resumable_at(static_cast<int>(std::min(common, context.size() - 1)));
    session_->truncate(keep);
    if (Status s = session_->eval(context.subspan(keep)); !s.ok()) return s.with_context("draft model");
    std::vector<int32_t> out;
    while (true) {
      const auto logits = session_->logits(0);
      const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(best);
      if (static_cast<int>(out.size()) >= max || session_->n_past() >= session_->n_ctx()) break;
      if (Status s = session_->eval({&best, 1}); !s.ok()) return s.with_context("draft model");
    }
    return out;
  }

 private:
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<Session> session_;
};

// The first token whose bytes differ, or the sizes, named; ok when equal.
Status same_vocabulary(const Engine& target, const Engine& draft, const std::string& path) {
  const int n_target = target.info().n_vocab, n_draft = draft.info().n_vocab;
  if (n_target != n_draft)
    return Status::error("draft model " + path + ": its vocabulary has " + std::to_string(n_draft) +
                         " tokens, the target's " + std::to_string(n_target) + " (the two must share one vocabulary)");
  for (int32_t id = 0; id < n_target; ++id)
    if (target.token_bytes(id) != draft.token_bytes(id))
      return Status::error("draft model " + path + ": token " + std::to_string(id) + " is \"" + draft.token_bytes(id) +
                           "\" in it but \"" + target.token_bytes(id) +
                           "\" in the target (the two must share one vocabulary)");
  return {};
}

}  // namespace

Result<std::unique_ptr<Drafter>> load_draft_model(const Engine& target, const std::string& path) {
  EngineOptions options;
  options.model_path = path;
  options.n_ctx = target.info().n_ctx;
  options.share_threads = &target;
  auto engine = Engine::load(options);
  if (!engine.ok()) return engine.status().with_context("draft model");
  if (Status s = same_vocabulary(target, **engine, path); !s.ok()) return s;
  return std::unique_ptr<Drafter>(new DraftModel(std::shared_ptr<Engine>(std::move(*engine))));
}

Result<std::unique_ptr<Drafter>> load_drafter(const Engine& target, const std::string& draft) {
  if (draft == kMtpDraft) return mtp_drafter(target);
  return load_draft_model(target, draft);
}

}  // namespace revis
