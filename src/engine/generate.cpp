// Implementation of include/revis/generate.h: see there for the contract.
//
// Cost per generated token beyond the forward pass: the sampler's own work,
// plus, only when asked for, one copy of the logits row (a constraint, or
// logprobs), the constraint's mask, a scan for a token the mask left
// (constraint) and a log-sum-exp with a top-N selection (logprobs): all
// O(vocabulary). Without those the row goes to the sampler uncopied. With
// a drafter, a sampled (not greedy) draft position also builds the
// sampler's distribution (Sampler::sample_draft).
#include "revis/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/engine_impl.h"
#include "sample/sampler.h"
#include "sample/stop_matcher.h"
#include "tokenizer/tokenizer.h"

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

Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text, const PromptCache& cached) {
  if (Status s = check_request(engine, session, prompt, options, cached); !s.ok()) return s;
  const int n_prompt = static_cast<int>(prompt.size());
  const int n_cached = cached.cached_tokens;
  if (n_cached == 0) session.truncate(0);  // without a cache, start from an empty session
  if (options.drafter && options.draft_max > 0) options.drafter->attach(session);
  GenerateResult result;
  result.n_prompt = n_prompt;
  result.cached_tokens = n_cached;

  // Prefill, a chunk per eval (the rows are the same bits however the
  // prompt is cut: engine.h's batch invariance).
  const auto start = Clock::now();
  const int chunk = std::max(1, options.prefill_chunk);
  result.first_logits_position = n_cached;
  for (int done = n_cached; done < n_prompt; done += chunk) {
    if (cancelled(options)) {
      result.stop_reason = "cancelled";
      result.prefill_ms = cached.restore_ms + ms_between(start, Clock::now());
      return result;
    }
    const int n = std::min(chunk, n_prompt - done);
    if (Status s = session.eval(prompt.subspan(done, n), options.record_logits); !s.ok()) return s;
    if (options.record_logits)
      for (int row = 0; row < session.n_logit_rows(); ++row) {
        auto l = session.logits(row);
        result.prompt_logits.insert(result.prompt_logits.end(), l.begin(), l.end());
      }
    if (options.on_progress) options.on_progress(done + n, 0);
  }
  if (n_cached == n_prompt) {
    result.next_logits.assign(cached.next_logits.begin(), cached.next_logits.end());
    result.first_logits_position = n_prompt - 1;
    if (options.record_logits) result.prompt_logits = result.next_logits;
  } else {
    const auto last = session.logits(session.n_logit_rows() - 1);
    result.next_logits.assign(last.begin(), last.end());
  }
  result.prefill_ms = cached.restore_ms + ms_between(start, Clock::now());

  Sampler sampler(options.sampling);
  for (int32_t t : prompt) sampler.accept(t);
  Detokenizer detok(engine_tokenizer(engine));
  StopMatcher stops(options.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };
  const std::span<const int32_t> eog = engine.info().eog_tokens;
  std::vector<float> scratch, eog_logits, adjusted;

  // Speculation: `drafts` were evaluated after the last sampled token, and
  // session row `row` holds the logits that choose the next token (row j
  // follows drafts[j - 1]); `context` is the prompt and the output so far.
  Drafter* const drafter = options.draft_max > 0 ? options.drafter : nullptr;
  std::vector<int32_t> context, drafts, batch;
  if (drafter) context.assign(prompt.begin(), prompt.end());
  size_t row = 0;

  result.stop_reason = "length";
  for (int i = 0; i < options.max_tokens; ++i) {
    if (cancelled(options)) {
      result.stop_reason = "cancelled";
      break;
    }
    // The first token follows the prompt; the others the last decoding step.
    std::span<const float> logits =
        i == 0 ? std::span<const float>(result.next_logits) : session.logits(static_cast<int>(row));
    if (options.constraint) {
      logits = constrain(logits, *options.constraint, eog, scratch, eog_logits);
      if (logits.empty()) {
        if (!options.constraint->can_end())
          return Status::error("constraint: no token may follow the " + std::to_string(i) +
                               " generated so far, and the output is not complete");
        result.stop_reason = "stop";
        break;
      }
    }
    const bool verifying = row < drafts.size();
    const int32_t token = verifying ? sampler.sample_draft(logits, drafts[row]) : sampler.sample(logits);
    const bool confirmed = verifying && token == drafts[row];
    if (i == 0) {
      result.first_token = Clock::now();
      result.ttft_ms = cached.restore_ms + ms_between(start, result.first_token);
    }
    if (options.logprobs) {
      adjusted.assign(logits.begin(), logits.end());
      sampler.adjust_logits(adjusted);
      result.logprobs.push_back(logprobs_of(adjusted, token, options.top_logprobs));
      if (options.on_logprobs) options.on_logprobs(result.logprobs.back());
    }
    result.generated.push_back(token);
    result.accepted_tokens += confirmed;
    if (drafter) context.push_back(token);
    sampler.accept(token);
    const bool end = engine.is_end_of_generation(token) && (options.constraint || !options.ignore_eog);
    if (options.on_progress) options.on_progress(n_prompt, static_cast<int>(result.generated.size()));
    if (end) {
      result.stop_reason = "eog";
      break;
    }
    if (options.constraint)
      if (Status s = options.constraint->accept(token); !s.ok())
        return s.with_context("constraint: token " + std::to_string(token));
    const bool shown = std::binary_search(options.shown_tokens.begin(), options.shown_tokens.end(), token);
    StopMatcher::Output out = stops.push(detok.push(token, shown));
    emit(out.text);
    if (out.stopped) {
      result.stop_reason = "stop";
      result.stop_sequence = *stops.matched_stop();
      break;
    }
    if (i + 1 == options.max_tokens) break;  // the last token needs no forward pass
    if (confirmed) {
      ++row;  // the draft was evaluated already: its logits are the next row
    } else {
      // Drafts past a rejected one are forgotten; the token goes through
      // the model with the drafts that may follow it.
      session.truncate(session.n_past() - static_cast<int>(drafts.size() - row));
      if (session.n_past() >= session.n_ctx()) {
        result.stop_reason = "context";
        break;
      }
      drafts.clear();
      row = 0;
      // Drafts beyond what the budget or the context could use are wasted:
      // k drafts yield at most k + 1 tokens, and take k more positions.
      const int room = std::min({options.draft_max, options.max_tokens - i - 2, session.n_ctx() - session.n_past() - 1});
      if (drafter && room > 0) {
        auto guess = drafter->draft(context, room);
        if (!guess.ok()) return guess.status().with_context("drafter");
        drafts = std::move(*guess);
        if (static_cast<int>(drafts.size()) > room) drafts.resize(room);
      }
      if (drafts.empty()) {
        if (Status s = session.eval({&token, 1}); !s.ok()) return s;
      } else {
        batch.assign(1, token);
        batch.insert(batch.end(), drafts.begin(), drafts.end());
        if (Status s = session.eval(batch, /*all_logits=*/true); !s.ok()) return s;
        result.draft_tokens += static_cast<int>(drafts.size());
      }
    }
    if (options.record_logits) {
      auto l = session.logits(static_cast<int>(row));
      result.generated_logits.insert(result.generated_logits.end(), l.begin(), l.end());
    }
  }
  // Drafts evaluated past the last sampled token are no part of the output:
  // the session ends as without them, holding the last token only when a
  // cancellation came after its forward pass.
  if (drafter) {
    const int evaluated = static_cast<int>(result.generated.size()) -
                          (result.generated.empty() || result.stop_reason == "cancelled" ? 0 : 1);
    session.truncate(n_prompt + evaluated);
  }
  if (result.stop_reason != "cancelled" && !stops.stopped()) emit(stops.push(detok.flush()).text + stops.finish());
  if (!result.generated.empty()) result.generate_ms = ms_between(result.first_token, Clock::now());
  return result;
}

}  // namespace revis
