#include "bench/grammar_cost.h"

#include <chrono>

#include "grammar/grammar_constraint.h"
#include "revis/generate.h"

namespace revis::bench {

Result<GrammarRun> time_grammar_run(Engine& engine, std::span<const int32_t> prompt, int n_generate, uint64_t seed,
                                    const std::shared_ptr<const Grammar>& grammar) {
  GrammarRun run;
  GenerateOptions options;
  options.max_tokens = n_generate;
  options.sampling.temperature = 1.0f;
  options.sampling.seed = seed;
  std::unique_ptr<GrammarConstraint> constraint;
  if (grammar) {
    const auto start = std::chrono::steady_clock::now();
    auto vocabulary = TokenVocabulary::of(engine);
    run.vocabulary_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    constraint = std::make_unique<GrammarConstraint>(grammar, std::move(vocabulary));
    options.constraint = constraint.get();
  } else {
    options.ignore_eog = true;  // exactly n_generate tokens
  }
  std::unique_ptr<Session> session = engine.new_session();
  auto r = generate(engine, *session, prompt, options, nullptr);
  if (!r.ok()) return r.status();
  run.n_generated = static_cast<int>(r->generated.size());
  run.generate_ms = r->generate_ms;
  return run;
}

}  // namespace revis::bench
