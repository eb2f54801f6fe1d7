// The multi-token-prediction drafter (revis/draft.h): the target's own
// nextn block (model/nextn.cpp), run with a KV cache of its one layer.
//
// Row p of that cache holds the block's pass over (token p, the target's
// hidden state at p - 1), which guesses token p + 1. Each draft first
// brings the rows up to the context's last token (the one the target has
// not evaluated yet): the rows of the common prefix with the last call's
// context stay, the rest are evaluated in one batch from the target
// session's kept hidden states. The last row's guess is the first draft;
// each further one feeds the guess and the block's own output hidden state
// to the next position. Those chained rows are not the target's and are
// overwritten by the next call.
//
// Where the target's hidden state is unknown (position -1, or rows restored
// from a checkpoint) the block gets zeros: the drafts get worse, the
// output does not change, since the target verifies every draft.
#include <algorithm>

#include "engine/engine_impl.h"
#include "revis/draft.h"

namespace revis {
namespace {

// A one-layer cache of the target's shape: the nextn block's rows (for
// deepseek4, of that block's compression ratio; for a hybrid, of full
// attention, with no recurrent state).
ModelConfig one_layer(ModelConfig config) {
  if (config.is_deepseek4()) config.ds4.compress_ratios = {config.ds4.compress_ratios[config.n_layer]};
  if (config.is_hybrid()) config.delta_net.recurrent = {false};
  config.n_layer = 1;
  return config;
}

class MtpDrafter final : public Drafter {
 public:
  MtpDrafter(Model& model, ThreadPool& pool, int n_ctx)
      : model_(model), pool_(pool), kv_(one_layer(model.config()), n_ctx) {}

  std::unique_ptr<Drafter> another() const override {
    return std::make_unique<MtpDrafter>(model_, pool_, kv_.n_ctx());
  }
  uint64_t state_bytes() const override { return kv_.bytes(); }

  void attach(Session& target) override {
    if (target_ != &target) held_.clear();
    target_ = &target;
    target.keep_hidden_states();
  }

  Result<std::vector<int32_t>> draft(std::span<const int32_t> context, int max) override {
    if (!target_) return Status::error("mtp drafter: no target session (generate() attaches it)");
    const int d = model_.config().nextn_hidden_width(), size = static_cast<int>(context.size());
    const int common =
        static_cast<int>(std::mismatch(held_.begin(), held_.end(), context.begin(), context.end()).first - held_.begin());
    // The guess after the context's last token comes from evaluating its row.
    const int keep = std::min(common, size - 1);
    hidden_.assign(static_cast<size_t>(size - keep) * d, 0.0f);
    for (int p = keep; p < size; ++p) {
      const auto h = target_->hidden_state(p - 1);
      if (!h.empty()) std::copy(h.begin(), h.end(), hidden_.begin() + static_cast<size_t>(p - keep) * d);
    }
    held_.assign(context.begin(), context.begin() + keep);
    if (Status s = model_.forward_nextn(context.subspan(keep), hidden_, keep, kv_, pool_, logits_, out_hidden_);
        !s.ok())
      return s.with_context("mtp drafter");
    held_.assign(context.begin(), context.end());

    std::vector<int32_t> out;
    while (true) {
      const int32_t best = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
      out.push_back(best);
      const int pos = size - 1 + static_cast<int>(out.size());
      if (static_cast<int>(out.size()) >= max || pos >= kv_.n_ctx()) break;
      hidden_ = out_hidden_;
      if (Status s = model_.forward_nextn({&best, 1}, hidden_, pos, kv_, pool_, logits_, out_hidden_); !s.ok())
        return s.with_context("mtp drafter");
    }
    return out;
  }

 private:
  Model& model_;
  ThreadPool& pool_;
  KvCache kv_;
  Session* target_ = nullptr;
  std::vector<int32_t> held_;  // the tokens whose rows kv_ holds (the target's, not the chained ones)
  std::vector<float> hidden_, logits_, out_hidden_;
};

}  // namespace

Result<std::unique_ptr<Drafter>> mtp_drafter(const Engine& target) {
  Engine::Impl& e = *target.impl_;
  if (!e.model->has_nextn())
    return Status::error(e.info.path + ": the model has no multi-token-prediction block (" + e.info.architecture +
                         ".nextn_predict_layers and blk.N.nextn.* tensors) to draft with");
  return std::unique_ptr<Drafter>(new MtpDrafter(*e.model, *e.pool, e.info.n_ctx));
}

}  // namespace revis
