// Implementation of GenerationBatch (include/revis/generate.h): the
// generations' inputs gathered into one Engine::eval_batch per step.
#include <algorithm>
#include <utility>

#include "engine/generation.h"
#include "revis/generate.h"

namespace revis {

struct GenerationBatch::Running {
  Generation generation;
  Done on_done;
};

GenerationBatch::GenerationBatch(Engine& engine, int step_tokens)
    : engine_(engine), step_tokens_(std::max(1, step_tokens)) {}

GenerationBatch::~GenerationBatch() = default;

void GenerationBatch::add(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
                          TextSink on_text, Done on_done, const PromptCache& cached) {
  running_.push_back(std::unique_ptr<Running>(
      new Running{Generation(engine_, session, prompt, options, std::move(on_text), cached), std::move(on_done)}));
  (void)running_.back()->generation.start();  // a failure finishes it, and is reported below
}

int GenerationBatch::step() {
  report_finished();
  // Decoding steps first, every one; then prompt chunks while the budget
  // lasts, oldest first.
  std::vector<Engine::BatchItem> items;
  std::vector<Generation*> in_pass;
  int budget = step_tokens_;
  for (bool prompts : {false, true})
    for (auto& r : running_) {
      Generation& g = r->generation;
      if (g.finished() || g.prefilling() != prompts || (prompts && budget <= 0)) continue;
      Engine::BatchItem item = g.next_input(budget);
      if (g.finished()) continue;  // cancelled before its chunk
      budget -= static_cast<int>(item.tokens.size());
      items.push_back(item);
      in_pass.push_back(&g);
    }
  if (!items.empty()) {
    Status pass = engine_.eval_batch(items);
    if (pass.ok()) {
      for (Generation* g : in_pass) g->evaluated(pass);
    } else {
      // eval_batch changed nothing: each item alone, so that only the one
      // that cannot run (its context full) fails.
      for (size_t i = 0; i < items.size(); ++i) in_pass[i]->evaluated(engine_.eval_batch({&items[i], 1}));
    }
  }
  report_finished();
  return size();
}

void GenerationBatch::report_finished() {
  std::vector<std::unique_ptr<Running>> done;
  for (auto& r : running_)
    if (r->generation.finished()) done.push_back(std::move(r));
  std::erase(running_, nullptr);
  for (auto& r : done)
    if (r->on_done) r->on_done(r->generation.take_result());
}

}  // namespace revis
