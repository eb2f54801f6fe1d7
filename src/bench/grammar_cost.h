// What a grammar constraint costs generation: the same sampled decoding
// through generate() with and without a GrammarConstraint, timed per
// generated token, so the difference is the mask (a trie walk per new
// grammar state, a cached mask per known one), the masking of the logits
// row and the grammar's advance over each token.
//
// Thread-safety: like Engine, one caller at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/grammar.h"
#include "revis/engine.h"

namespace revis::bench {

struct GrammarRun {
  int n_generated = 0;
  double generate_ms = 0;  // first sampled token to the last (generated - 1 decoding steps)
  double vocabulary_ms = 0;  // building the vocabulary trie (once per model in a server), constrained runs only
  double tok_s() const { return generate_ms > 0 && n_generated > 1 ? (n_generated - 1) * 1000.0 / generate_ms : 0; }
};

// One run of n_generate tokens after `prompt` on a new session, sampled at
// temperature 1 with `seed`; with a grammar, constrained by it (a run ends
// early if the grammar's output completes: pick one that cannot within
// n_generate tokens).
Result<GrammarRun> time_grammar_run(Engine& engine, std::span<const int32_t> prompt, int n_generate, uint64_t seed,
                                    const std::shared_ptr<const Grammar>& grammar);

}  // namespace revis::bench
