#include "engine/generate.h"

#include <chrono>

#include "sample/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace revis {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text) {
  if (Status s = options.sampling.validate(); !s.ok()) return s;
  if (prompt.empty()) return Status::error("the prompt is empty (nothing to condition on)");
  if (static_cast<int>(prompt.size()) > session.n_ctx())
    return Status::error("the prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                         std::to_string(session.n_ctx()) + " (raise -c or shorten the prompt)");
  GenerateResult result;
  result.prompt_tokens.assign(prompt.begin(), prompt.end());

  const auto start = std::chrono::steady_clock::now();
  session.truncate(0);
  if (Status s = session.eval(prompt, options.record_logits); !s.ok()) return s;
  result.prefill_ms = ms_since(start);
  if (options.record_logits)
    for (int row = 0; row < session.n_logit_rows(); ++row) {
      auto l = session.logits(row);
      result.prompt_logits.insert(result.prompt_logits.end(), l.begin(), l.end());
    }

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
  int row = session.n_logit_rows() - 1;  // logits that choose the next token
  for (int i = 0; i < options.max_tokens; ++i) {
    const int32_t token = sampler.sample(session.logits(row));
    if (i == 0) result.ttft_ms = ms_since(start);
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
    row = 0;
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
