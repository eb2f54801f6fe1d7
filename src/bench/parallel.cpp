#include "bench/parallel.h"

#include <chrono>
#include <memory>

#include "revis/generate.h"

namespace revis::bench {

Result<ParallelTiming> time_parallel(Engine& engine, std::span<const std::vector<int32_t>> prompts, int n_generate,
                                     int step_tokens) {
  GenerateOptions options;
  options.max_tokens = n_generate;
  options.sampling.temperature = 0;
  options.ignore_eog = true;
  options.prefill_chunk = step_tokens;
  std::vector<std::unique_ptr<Session>> sessions;
  ParallelTiming t;
  t.streams = static_cast<int>(prompts.size());
  Status failure;
  GenerationBatch batch(engine, step_tokens);
  const auto start = std::chrono::steady_clock::now();
  for (const std::vector<int32_t>& prompt : prompts) {
    sessions.push_back(engine.new_session());
    batch.add(*sessions.back(), prompt, options, nullptr, [&](Result<GenerateResult> r) {
      if (!r.ok()) return void(failure = r.status());
      t.generated += static_cast<int>(r->generated.size());
      t.ttft_ms.push_back(r->ttft_ms);
      if (r->generate_ms > 0) t.stream_tok_s.push_back((r->generated.size() - 1) * 1000.0 / r->generate_ms);
    });
  }
  while (batch.step() > 0) {
  }
  t.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!failure.ok()) return failure;
  return t;
}

}  // namespace revis::bench
