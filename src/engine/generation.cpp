// Implementation of generation.h (and so of generate(), revis/generate.h).
//
// Cost per generated token beyond the forward pass: the sampler's own work,
// plus, only when asked for, one copy of the logits row (a constraint, or
// logprobs), the constraint's mask, a scan for a token the mask left
// (constraint) and a log-sum-exp with a top-N selection (logprobs): all
// O(vocabulary). Without those the row goes to the sampler uncopied. With
// a drafter, a sampled (not greedy) draft position also builds the
// sampler's distribution (Sampler::sample_draft).
#include "engine/generation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/engine_impl.h"

namespace revis {
namespace {

using Clock = std::chrono::steady_clock;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kMaxTopLogprobs = 20;  // OpenAI's limit

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool cancelled(const GenerateOptions& o) { return o.cancel && o.cancel->load(std::memory_order_relaxed); }

Status check_request(const Engine& engine, const Session& session, std::span<const int32_t> prompt,
                     const GenerateOptions& options, const PromptCache& cached) {
  if (Status s = options.sampling.validate(); !s.ok()) return s;
  const int n_vocab = engine.info().n_vocab;
  for (const auto& [token, bias] : options.sampling.logit_bias)
    if (token >= n_vocab)
      return Status::error("sampling params: logit_bias token " + std::to_string(token) +
                           " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
  if (options.max_tokens < 0) return Status::error("max_tokens: " + std::to_string(options.max_tokens) + " (expected >= 0)");
  if (options.draft_max < 0) return Status::error("draft_max: " + std::to_string(options.draft_max) + " (expected >= 0)");
  // Decoding looks each token up in them by binary search.
  if (!std::is_sorted(options.shown_tokens.begin(), options.shown_tokens.end()))
    return Status::error("shown_tokens: expected ascending token ids");
  if (options.top_logprobs < 0 || options.top_logprobs > kMaxTopLogprobs)
    return Status::error("top_logprobs: " + std::to_string(options.top_logprobs) + " (expected 0.." +
                         std::to_string(kMaxTopLogprobs) + ")");
  if (options.constraint && options.ignore_eog)
    return Status::error("ignore_eog with a constraint: the constraint decides where the output may end");
  if (prompt.empty()) return Status::error("the prompt is empty (nothing to condition on)");
  if (static_cast<int>(prompt.size()) > session.n_ctx())
    return Status::error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                         std::to_string(session.n_ctx()) + " (raise -c or shorten the prompt)");
  const int n_cached = cached.cached_tokens;
  if (n_cached < 0 || n_cached > static_cast<int>(prompt.size()) || (n_cached > 0 && session.n_past() != n_cached) ||
      !std::equal(prompt.begin(), prompt.begin() + std::max(n_cached, 0), session.history().begin()))
    return Status::error("prompt cache: the session does not hold the " + std::to_string(n_cached) +
                         " cached prompt tokens");
  if (n_cached == static_cast<int>(prompt.size()) && cached.next_logits.size() != static_cast<size_t>(n_vocab))
    return Status::error("prompt cache: the whole prompt is cached but its next-token logits are missing");
  return {};
}

// The log-softmax of `logits` at `chosen`, and the `top` best entries.
TokenLogprobs logprobs_of(std::span<const float> logits, int32_t chosen, int top) {
  float max = kNegInf;
  for (float l : logits) max = std::max(max, l);
  double sum = 0;
  if (std::isfinite(max))
    for (float l : logits)
      if (l > kNegInf) sum += std::exp(static_cast<double>(l) - max);  // NaN counts as -inf, as in the sampler
  const double log_z = std::isfinite(max) ? max + std::log(sum) : 0;
  auto logprob = [&](int32_t id) {
    const float l = logits[id];
    return l == kNegInf || std::isnan(l) ? kNegInf : static_cast<float>(l - log_z);
  };
  TokenLogprobs out;
  out.chosen = {chosen, logprob(chosen)};
  if (top <= 0) return out;
  // A running best-first list of at most `top` ids: O(vocabulary) with a
  // short insertion now and then.
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(top + 1);
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (!(logits[id] > kNegInf)) continue;
    if (static_cast<int>(best.size()) == top && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int>(best.size()) > top) best.pop_back();
  }
  for (int32_t id : best) out.top.push_back({id, logprob(id)});
  return out;
}

// One step's logits in `row`, masked by the constraint into `scratch`.
// End-of-generation tokens keep their logits only when the output may end
// (the constraint need not know them). Returns the logits to sample from,
// or an empty span when no token is allowed.
std::span<const float> constrain(std::span<const float> row, TokenConstraint& constraint,
                                 std::span<const int32_t> eog, std::vector<float>& scratch,
                                 std::vector<float>& eog_logits) {
  scratch.assign(row.begin(), row.end());
  eog_logits.resize(eog.size());
  for (size_t k = 0; k < eog.size(); ++k) eog_logits[k] = scratch[eog[k]];
  constraint.mask(scratch);
  const bool can_end = constraint.can_end();
  for (size_t k = 0; k < eog.size(); ++k) scratch[eog[k]] = can_end ? eog_logits[k] : kNegInf;
  if (std::none_of(scratch.begin(), scratch.end(), [](float l) { return l > kNegInf; })) return {};
  return scratch;
}

}  // namespace

Generation::Generation(Engine& engine, Session& session, std::span<const int32_t> prompt,
                       const GenerateOptions& options, TextSink on_text, const PromptCache& cached)
    : engine_(engine),
      session_(session),
      prompt_(prompt),
      options_(options),
      on_text_(std::move(on_text)),
      cached_(cached),
      n_prompt_(static_cast<int>(prompt.size())) {}

Status Generation::start() {
  if (Status s = check_request(engine_, session_, prompt_, options_, cached_); !s.ok()) {
    finish(s);
    return s;
  }
  start_time_ = Clock::now();
  const int n_cached = cached_.cached_tokens;
  if (n_cached == 0) session_.truncate(0);  // without a cache, start from an empty session
  // Rejected drafts are taken back by truncating: at most draft_max
  // positions, from a step of draft_max + 1 tokens. A hybrid's recurrent
  // state follows from its copies after each of them (keep_recent_states);
  // rings and deepseek4's compressors reach back a fixed distance
  // (rewind_reach), which bounds the drafts.
  if (options_.draft_max > 0 && options_.drafter) {
    session_.keep_recent_states(options_.draft_max + 1);
    draft_max_ = std::min(options_.draft_max, session_.rewind_reach());
    drafter_ = draft_max_ > 0 ? options_.drafter : nullptr;
    if (drafter_) drafter_->attach(session_);
  }
  result_.n_prompt = n_prompt_;
  result_.cached_tokens = n_cached;
  result_.first_logits_position = n_cached;
  prompt_done_ = n_cached;
  if (!prefilling()) finish_prefill();
  return {};
}

Engine::BatchItem Generation::next_input(int budget) {
  // A decoding step checks for cancellation once its logits are in
  // (sample_until_pass), a prompt before each chunk.
  if (!prefilling()) return {&session_, step_, !drafts_.empty()};
  if (cancelled(options_)) {
    result_.stop_reason = "cancelled";
    result_.prefill_ms = cached_.restore_ms + ms_between(start_time_, Clock::now());
    finish();
    return {&session_, {}, false};
  }
  last_chunk_ = std::min({std::max(1, options_.prefill_chunk), std::max(1, budget), n_prompt_ - prompt_done_});
  return {&session_, prompt_.subspan(prompt_done_, last_chunk_), options_.record_logits};
}

void Generation::evaluated(const Status& pass) {
  if (!pass.ok()) return finish(pass);
  if (prefilling()) {
    if (options_.record_logits)
      for (int row = 0; row < session_.n_logit_rows(); ++row) {
        auto l = session_.logits(row);
        result_.prompt_logits.insert(result_.prompt_logits.end(), l.begin(), l.end());
      }
    prompt_done_ += last_chunk_;
    // A hybrid's state at the end of each chunk, the prompt's included:
    // where a later prompt (from RAM) or a checkpoint (on disk) may resume.
    session_.keep_recurrent_state();
    if (options_.on_progress) options_.on_progress(prompt_done_, 0);
    if (!prefilling()) finish_prefill();
    return;
  }
  result_.draft_tokens += static_cast<int>(drafts_.size());
  if (options_.record_logits) {
    auto l = session_.logits(0);
    result_.generated_logits.insert(result_.generated_logits.end(), l.begin(), l.end());
  }
  sample_until_pass();
}

// The prompt is in the session: its next-token logits, and the sampler,
// detokenizer and stop strings the output goes through.
void Generation::finish_prefill() {
  if (cached_.cached_tokens == n_prompt_) {
    session_.keep_recurrent_state();  // as after a prefill (above): the prompt came whole from a cache
    result_.next_logits.assign(cached_.next_logits.begin(), cached_.next_logits.end());
    result_.first_logits_position = n_prompt_ - 1;
    if (options_.record_logits) result_.prompt_logits = result_.next_logits;
  } else {
    const auto last = session_.logits(session_.n_logit_rows() - 1);
    result_.next_logits.assign(last.begin(), last.end());
  }
  result_.prefill_ms = cached_.restore_ms + ms_between(start_time_, Clock::now());
  sampler_ = std::make_unique<Sampler>(options_.sampling);
  for (int32_t t : prompt_) sampler_->accept(t);
  detok_ = std::make_unique<Detokenizer>(engine_tokenizer(engine_));
  stops_ = std::make_unique<StopMatcher>(options_.stop);
  if (drafter_) context_.assign(prompt_.begin(), prompt_.end());
  result_.stop_reason = "length";
  sample_until_pass();
}

void Generation::sample_until_pass() {
  const std::span<const int32_t> eog = engine_.info().eog_tokens;
  for (;;) {
    const int i = static_cast<int>(result_.generated.size());
    if (i >= options_.max_tokens) return end();
    if (cancelled(options_)) {
      result_.stop_reason = "cancelled";
      return end();
    }
    // The first token follows the prompt; the others the last decoding step.
    std::span<const float> logits =
        i == 0 ? std::span<const float>(result_.next_logits) : session_.logits(static_cast<int>(row_));
    if (options_.constraint) {
      logits = constrain(logits, *options_.constraint, eog, scratch_, eog_logits_);
      if (logits.empty()) {
        if (!options_.constraint->can_end())
          return finish(Status::error("constraint: no token may follow the " + std::to_string(i) +
                                      " generated so far, and the output is not complete"));
        result_.stop_reason = "stop";
        return end();
      }
    }
    const bool verifying = row_ < drafts_.size();
    const int32_t token = verifying ? sampler_->sample_draft(logits, drafts_[row_]) : sampler_->sample(logits);
    const bool confirmed = verifying && token == drafts_[row_];
    if (i == 0) {
      result_.first_token = Clock::now();
      result_.ttft_ms = cached_.restore_ms + ms_between(start_time_, result_.first_token);
    }
    if (options_.logprobs) {
      adjusted_.assign(logits.begin(), logits.end());
      sampler_->adjust_logits(adjusted_);
      result_.logprobs.push_back(logprobs_of(adjusted_, token, options_.top_logprobs));
      if (options_.on_logprobs) options_.on_logprobs(result_.logprobs.back());
    }
    result_.generated.push_back(token);
    result_.accepted_tokens += confirmed;
    if (drafter_) context_.push_back(token);
    sampler_->accept(token);
    const bool end_of_generation =
        engine_.is_end_of_generation(token) && (options_.constraint || !options_.ignore_eog);
    if (options_.on_progress) options_.on_progress(n_prompt_, static_cast<int>(result_.generated.size()));
    if (end_of_generation) {
      result_.stop_reason = "eog";
      return end();
    }
    if (options_.constraint)
      if (Status s = options_.constraint->accept(token); !s.ok())
        return finish(s.with_context("constraint: token " + std::to_string(token)));
    const bool shown = std::binary_search(options_.shown_tokens.begin(), options_.shown_tokens.end(), token);
    StopMatcher::Output out = stops_->push(detok_->push(token, shown));
    emit(out.text);
    if (out.stopped) {
      result_.stop_reason = "stop";
      result_.stop_sequence = *stops_->matched_stop();
      return end();
    }
    if (i + 1 == options_.max_tokens) return end();  // the last token needs no forward pass
    if (!confirmed) return prepare_step(token);
    ++row_;  // the draft was evaluated already: its logits are the next row
    if (options_.record_logits) {
      auto l = session_.logits(static_cast<int>(row_));
      result_.generated_logits.insert(result_.generated_logits.end(), l.begin(), l.end());
    }
  }
}

// Drafts past a rejected one are forgotten; the token goes through the
// model with the drafts that may follow it.
void Generation::prepare_step(int32_t token) {
  session_.truncate(session_.n_past() - static_cast<int>(drafts_.size() - row_));
  if (session_.n_past() >= session_.n_ctx()) {
    result_.stop_reason = "context";
    return end();
  }
  drafts_.clear();
  row_ = 0;
  // Drafts beyond what the budget or the context could use are wasted:
  // k drafts yield at most k + 1 tokens, and take k more positions.
  const int n_generated = static_cast<int>(result_.generated.size());
  const int room = std::min(
      {draft_max_, options_.max_tokens - n_generated - 1, session_.n_ctx() - session_.n_past() - 1});
  if (drafter_ && room > 0) {
    auto guess = drafter_->draft(context_, room);
    if (!guess.ok()) return finish(guess.status().with_context("drafter"));
    drafts_ = std::move(*guess);
    if (static_cast<int>(drafts_.size()) > room) drafts_.resize(room);
  }
  step_.assign(1, token);
  step_.insert(step_.end(), drafts_.begin(), drafts_.end());
}

// The end of a generation that produced its output: drafts evaluated past
// the last sampled token are no part of it (the session ends as without
// them, holding the last token only when a cancellation came after its
// forward pass), and the text held back for stop strings is let out.
void Generation::end() {
  if (drafter_) {
    const int evaluated = static_cast<int>(result_.generated.size()) -
                          (result_.generated.empty() || result_.stop_reason == "cancelled" ? 0 : 1);
    session_.truncate(n_prompt_ + evaluated);
  }
  if (result_.stop_reason != "cancelled" && !stops_->stopped())
    emit(stops_->push(detok_->flush()).text + stops_->finish());
  if (!result_.generated.empty()) result_.generate_ms = ms_between(result_.first_token, Clock::now());
  finish();
}

void Generation::finish(Status status) {
  status_ = std::move(status);
  finished_ = true;
}

void Generation::emit(const std::string& text) {
  if (text.empty()) return;
  result_.text += text;
  if (on_text_) on_text_(text);
}

Result<GenerateResult> Generation::take_result() {
  if (!status_.ok()) return status_;
  return std::move(result_);
}

}  // namespace revis
