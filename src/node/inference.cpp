#include "node/inference.h"

#include <algorithm>

#include "sample/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace revis::node {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool cancelled(const InferenceControl& c) { return c.cancel && c.cancel->load(std::memory_order_relaxed); }

}  // namespace

Result<InferenceResult> run_inference(Engine& engine, Session& session, const InferenceRequest& request,
                                      const InferenceControl& control) {
  if (Status s = request.sampling.validate(); !s.ok()) return s;
  if (request.prompt.empty()) return Status::error("the prompt is empty");
  if (static_cast<int>(request.prompt.size()) > session.n_ctx())
    return Status::error("the prompt has " + std::to_string(request.prompt.size()) + " tokens but the context holds " +
                         std::to_string(session.n_ctx()));
  const size_t n_cached = static_cast<size_t>(request.cached.cached_tokens);
  const bool whole_prompt_cached = n_cached == request.prompt.size();
  if (n_cached == 0) session.truncate(0);  // without a cache, start from an empty session
  if (n_cached > request.prompt.size() || session.n_past() != static_cast<int>(n_cached) ||
      !std::equal(request.prompt.begin(), request.prompt.begin() + n_cached, session.history().begin()) ||
      (whole_prompt_cached && request.cached.next_logits.size() != static_cast<size_t>(engine.info().n_vocab)))
    return Status::error("prompt cache: the session does not hold the " + std::to_string(n_cached) +
                         " cached prompt tokens and their logits");
  InferenceResult result;
  result.n_prompt = static_cast<int>(request.prompt.size());
  result.cached_tokens = static_cast<int>(n_cached);

  const auto start = Clock::now();
  // With the default chunk (a multiple of 64) and a cached part ending at a
  // multiple of 64, the rows come out bit-identical to one eval's.
  const size_t chunk = static_cast<size_t>(std::max(1, control.prefill_chunk));
  for (size_t done = n_cached; done < request.prompt.size(); done += chunk) {
    if (cancelled(control)) {
      result.stop_reason = "cancelled";
      result.prefill_ms = ms_between(start, Clock::now());
      return result;
    }
    const size_t n = std::min(chunk, request.prompt.size() - done);
    if (Status s = session.eval(request.prompt.subspan(done, n)); !s.ok()) return s;
    if (control.on_progress) control.on_progress(static_cast<int>(done + n), 0);
  }
  if (whole_prompt_cached) {
    result.next_logits.assign(request.cached.next_logits.begin(), request.cached.next_logits.end());
  } else {
    const auto last = session.logits(0);
    result.next_logits.assign(last.begin(), last.end());
  }
  const auto prefill_end = Clock::now();
  result.prefill_ms = request.cached.restore_ms + ms_between(start, prefill_end);

  Sampler sampler(request.sampling);
  for (int32_t t : request.prompt) sampler.accept(t);
  Detokenizer detok(engine.tokenizer());
  StopMatcher stops(request.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (control.on_text) control.on_text(text);
  };

  result.stop_reason = "length";
  for (int i = 0; i < request.max_tokens; ++i) {
    if (cancelled(control)) {
      result.stop_reason = "cancelled";
      break;
    }
    // The first token follows the prompt; the others the last decoding step.
    const int32_t token = sampler.sample(i == 0 ? std::span<const float>(result.next_logits) : session.logits(0));
    if (i == 0) result.first_token = Clock::now();
    ++result.n_generated;
    sampler.accept(token);
    if (engine.is_end_of_generation(token)) {
      result.stop_reason = "eog";
      break;
    }
    StopMatcher::Output out = stops.push(detok.push(token));
    emit(out.text);
    if (control.on_progress) control.on_progress(result.n_prompt, result.n_generated);
    if (out.stopped) {
      result.stop_reason = "stop";
      break;
    }
    if (i + 1 == request.max_tokens) break;  // the last token needs no forward pass
    if (session.n_past() >= session.n_ctx()) {
      result.stop_reason = "context";
      break;
    }
    if (Status s = session.eval({&token, 1}); !s.ok()) return s;
  }
  if (result.stop_reason != "cancelled" && !stops.stopped()) emit(stops.push(detok.flush()).text + stops.finish());
  if (result.n_generated > 0) result.generate_ms = ms_between(result.first_token, Clock::now());
  return result;
}

}  // namespace revis::node
