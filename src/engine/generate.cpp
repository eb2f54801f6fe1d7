#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "sample/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace revis {
namespace {

bool cancelled(const GenerateOptions& options) {
  return options.cancel && options.cancel->load(std::memory_order_relaxed);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text, const PromptCache& cached) {
  if (Status s = options.sampling.validate(); !s.ok()) return s;
  if (prompt.empty()) return Status::error("the prompt is empty (nothing to condition on)");
  if (static_cast<int>(prompt.size()) > session.n_ctx())
    return Status::error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                         std::to_string(session.n_ctx()) + " (raise -c or shorten the prompt)");
  const int n_prompt = static_cast<int>(prompt.size());
  const int n_cached = cached.cached_tokens;
  const bool whole_prompt_cached = n_cached == n_prompt;
  if (n_cached == 0) session.truncate(0);
  if (n_cached < 0 || n_cached > n_prompt || session.n_past() != n_cached ||
      !std::equal(prompt.begin(), prompt.begin() + n_cached, session.history().begin()))
    return Status::error("prompt cache: the session does not hold the " + std::to_string(n_cached) +
                         " cached prompt tokens");
  const size_t n_vocab = engine.info().n_vocab;
  if (whole_prompt_cached && cached.next_logits.size() != n_vocab)
    return Status::error("prompt cache: the whole prompt is cached but its next-token logits are missing");
  GenerateResult result;
  result.prompt_tokens.assign(prompt.begin(), prompt.end());
  result.cached_tokens = n_cached;

  const auto start = std::chrono::steady_clock::now();
  if (whole_prompt_cached) {
    result.next_logits.assign(cached.next_logits.begin(), cached.next_logits.end());
    result.first_logits_position = n_prompt - 1;
    if (options.record_logits) result.prompt_logits = result.next_logits;
  } else {
    const std::span<const int32_t> todo = prompt.subspan(n_cached);
    const size_t chunk = options.on_prefill ? kPrefillChunk : todo.size();
    for (size_t done = 0; done < todo.size();) {
      if (cancelled(options)) return Status::error("cancelled during the prompt");
      const size_t n = std::min(chunk, todo.size() - done);
      if (Status s = session.eval(todo.subspan(done, n), options.record_logits); !s.ok()) return s;
      if (options.record_logits)
        for (int row = 0; row < session.n_logit_rows(); ++row) {
          auto l = session.logits(row);
          result.prompt_logits.insert(result.prompt_logits.end(), l.begin(), l.end());
        }
      done += n;
      if (options.on_prefill) options.on_prefill(static_cast<int>(done), static_cast<int>(todo.size()));
    }
    const auto last = session.logits(session.n_logit_rows() - 1);
    result.next_logits.assign(last.begin(), last.end());
    result.first_logits_position = n_cached;
  }
  result.prefill_ms = cached.restore_ms + ms_since(start);

  Sampler sampler(options.sampling);
  for (int32_t t : prompt) sampler.accept(t);
  Detokenizer detok(engine.tokenizer());
  StopMatcher stops(options.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  const auto gen_start = std::chrono::steady_clock::now();
  result.stop_reason = "length";
  for (int i = 0; i < options.max_tokens; ++i) {
    if (cancelled(options)) {
      result.stop_reason = "cancelled";
      break;
    }
    // The first token follows the prompt; the others the last decoding step.
    const int32_t token = sampler.sample(i == 0 ? std::span<const float>(result.next_logits) : session.logits(0));
    if (i == 0) result.ttft_ms = cached.restore_ms + ms_since(start);
    result.generated.push_back(token);
    sampler.accept(token);
    if (!options.ignore_eog && engine.is_end_of_generation(token)) {
      result.stop_reason = "eog";
      break;
    }
    StopMatcher::Output out = stops.push(detok.push(token));
    emit(out.text);
    if (out.stopped) {
      result.stop_reason = "stop";
      break;
    }
    if (i + 1 == options.max_tokens) break;  // the last token needs no forward pass
    if (session.n_past() >= session.n_ctx()) {
      result.stop_reason = "context";
      break;
    }
    if (Status s = session.eval({&token, 1}); !s.ok()) return s;
    if (options.record_logits) {
      auto l = session.logits(0);
      result.generated_logits.insert(result.generated_logits.end(), l.begin(), l.end());
    }
  }
  if (!stops.stopped()) emit(stops.push(detok.flush()).text + stops.finish());
  result.generate_ms = ms_since(gen_start);
  return result;
}

}  // namespace revis
