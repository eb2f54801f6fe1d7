// The simulated engine (`revis serve --engine sim`): a stand-in for a model
// that takes the time a real one would and produces meaningless words,
// so that dispatch, queues and failure handling can be exercised with dozens
// of nodes on one machine. It loads nothing, serves every tier, and is
// labelled "sim" in the node's status and in every result it produces.
//
// Timing: the prefill takes n_prompt / prefill_tokens_per_s seconds, then
// one token is emitted every 1 / tokens_per_s seconds, on an absolute
// schedule (no drift from slow callbacks). Tokens are words drawn from a
// fixed list by the ticket's seed, so the same seed gives the same text.
// Cancellation is honoured within a few milliseconds, as with the real
// engine; the result has the same shape as generate()'s (the tokens are
// indices into the word list).
//
// Thread-safety: runs on the calling thread; `cancel` may be set from any
// thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "revis/generate.h"
#include "revis/status.h"

namespace revis::node {

struct SimEngineOptions {
  double tokens_per_s = 50;           // generation speed
  double prefill_tokens_per_s = 1000; // prompt processing speed
  int ctx = 4096;                     // the context every simulated tier has
};

// A token count for text without a tokenizer: about four bytes per token,
// as common BPE vocabularies give for English; at least 1 for non-empty text.
int estimate_tokens(std::string_view text);

// Simulates one inference of `n_prompt` prompt tokens producing exactly
// generate.max_tokens tokens (stop reason "length"), or "cancelled". Of
// `generate` it uses max_tokens, sampling.seed, cancel and on_progress.
Result<GenerateResult> run_simulated_inference(const SimEngineOptions& options, int n_prompt,
                                               const GenerateOptions& generate, const TextSink& on_text);

}  // namespace revis::node
