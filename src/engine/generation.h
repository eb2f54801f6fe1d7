// Generation: one run of generate() (revis/generate.h) as a state machine
// that a driver steps, so that several generations can share each forward
// pass (GenerationBatch) while each keeps its own sampler, constraint, stop
// strings, drafter and logprobs.
//
//   Generation g(engine, session, prompt, options, on_text, cached);
//   if (Status s = g.start(); !s.ok()) ...
//   while (!g.finished()) {
//     Engine::BatchItem item = g.next_input(budget);   // what to evaluate
//     engine.eval_batch({&item, 1});                    // (with others)
//     g.evaluated(status);                              // sample, stream
//   }
//   Result<GenerateResult> r = g.take_result();
//
// next_input gives a chunk of the prompt of at most `budget` tokens, or the
// decoding step: the last sampled token and any drafts after it. The
// output is the same whatever the budgets and whatever shares the passes
// (engine.h's batch invariance).
//
// Thread-safety: none; the driver calls one Generation from one thread.
// The callbacks run inside evaluated() and start().
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "revis/engine.h"
#include "revis/generate.h"
#include "sample/sampler.h"
#include "sample/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace revis {

class Generation {
 public:
  Generation(Engine& engine, Session& session, std::span<const int32_t> prompt, const GenerateOptions& options,
             TextSink on_text, const PromptCache& cached);

  // Checks the request and prepares the session; a failure finishes the
  // generation with that error. A whole prompt from the cache may finish
  // it at once (a budget of 0 tokens, a cancel, an end-of-generation).
  Status start();
  // The tokens the next forward pass evaluates for this generation:
  // prompt tokens (at most `budget`, >= 1) or one decoding step. Only while
  // !finished(). Before a prompt chunk it checks for cancellation, which
  // finishes the generation (the item then has no tokens).
  Engine::BatchItem next_input(int budget);
  // After the pass that evaluated next_input's tokens, or failed (`pass`):
  // consumes the logits, samples, streams, and finishes when done.
  void evaluated(const Status& pass);

  bool finished() const { return finished_; }
  // Whether the next input is prompt tokens (a decoding step otherwise).
  bool prefilling() const { return prompt_done_ < n_prompt_; }
  // The outcome, once finished (moved out: call once).
  Result<GenerateResult> take_result();

 private:
  void finish_prefill();
  // Samples from the logits at hand until a forward pass is needed or the
  // generation ends.
  void sample_until_pass();
  // Sets the decoding step's input: the sampled token, and drafts.
  void prepare_step(int32_t token);
  // Ends a generation that produced its output (any stop reason).
  void end();
  void finish(Status status = {});
  void emit(const std::string& text);

  Engine& engine_;
  Session& session_;
  std::span<const int32_t> prompt_;
  const GenerateOptions& options_;
  TextSink on_text_;
  PromptCache cached_;
  int n_prompt_ = 0;
  int prompt_done_ = 0;
  int last_chunk_ = 0;  // prompt tokens the pending pass evaluates

  GenerateResult result_;
  Status status_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_time_;

  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Detokenizer> detok_;
  std::unique_ptr<StopMatcher> stops_;
  std::vector<float> scratch_, eog_logits_, adjusted_;

  // Speculation: `drafts_` were evaluated after the last sampled token, and
  // session row `row_` holds the logits that choose the next token (row j
  // follows drafts_[j - 1]); `context_` is the prompt and the output so far.
  Drafter* drafter_ = nullptr;
  int draft_max_ = 0;  // tokens per draft: options_.draft_max, or less where the session reaches back less
  std::vector<int32_t> context_, drafts_, step_;
  size_t row_ = 0;
};

}  // namespace revis
