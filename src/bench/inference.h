// Timing prefill and decoding the way a user experiences them: a fresh
// session, a prompt evaluated in one call, then one eval per generated token
// with greedy selection, so every step costs exactly one forward pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "revis/engine.h"

namespace revis::bench {

// n token ids drawn uniformly from the vocabulary with a seeded generator,
// skipping end-of-generation tokens. Speed does not depend on which tokens
// they are, but random ids keep the embedding reads from all hitting one row.
std::vector<int32_t> random_prompt(const Engine& engine, int n, uint64_t seed);

struct RunTiming {
  int n_prompt = 0, n_generated = 0;
  double prefill_ms = 0;  // eval of the whole prompt
  double ttft_ms = 0;     // prefill plus choosing the first token
  double generate_ms = 0; // n_generated steps: eval of one token, then choose the next
  double prefill_tok_s() const { return prefill_ms > 0 ? n_prompt * 1000.0 / prefill_ms : 0; }
  double generate_tok_s() const { return generate_ms > 0 ? n_generated * 1000.0 / generate_ms : 0; }
};

// One repetition on a new session: the session needs prompt.size() + n_generate
// positions of context.
Result<RunTiming> time_run(Engine& engine, std::span<const int32_t> prompt, int n_generate);

struct FrontierTiming {
  int depth = 0;
  double prefill_ms = 0;   // filling the context from empty to depth
  double generate_ms = 0;  // n_generated steps starting at depth
  int n_generated = 0;
  double prefill_tok_s() const { return prefill_ms > 0 ? depth * 1000.0 / prefill_ms : 0; }
  double generate_tok_s() const { return generate_ms > 0 ? n_generated * 1000.0 / generate_ms : 0; }
};

// One repetition over ascending depths on a new session. The context is
// filled once, segment by segment (prompt[previous depth, depth)), and the
// prefill time of each depth is the sum of its segments, so reaching 8192
// does not first redo 512 and 2048. After the steps at a depth the generated
// tokens are dropped again, so the next segment continues the prompt.
// prompt.size() must be at least the deepest depth.
Result<std::vector<FrontierTiming>> time_frontiers(Engine& engine, std::span<const int32_t> prompt,
                                                   std::span<const int> depths, int n_generate);

// The high-water mark of this process's resident memory (getrusage).
uint64_t peak_rss_bytes();

// CPU time (user + system) this process has used so far, in seconds. Over a
// timed stretch, divided by wall time x threads, it shows how much of the
// cores the benchmark actually got. The thread pool spins while its threads
// wait for each other, so well below 100% means other processes held the
// cores and the timings are depressed.
double process_cpu_seconds();

}  // namespace revis::bench
