// Implementation of include/revis/generate.h: see there for the contract.
// The work is engine/generation.h's; here one generation is driven alone.
#include "revis/generate.h"

#include <limits>

#include "engine/generation.h"

namespace revis {

Result<GenerateResult> generate(Engine& engine, Session& session, std::span<const int32_t> prompt,
                                const GenerateOptions& options, const TextSink& on_text, const PromptCache& cached) {
  Generation g(engine, session, prompt, options, on_text, cached);
  if (Status s = g.start(); !s.ok()) return s;
  while (!g.finished()) {
    const Engine::BatchItem item = g.next_input(std::numeric_limits<int>::max());
    if (g.finished()) break;
    g.evaluated(engine.eval_batch({&item, 1}));
  }
  return g.take_result();
}

}  // namespace revis
