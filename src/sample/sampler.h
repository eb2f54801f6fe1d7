// Token sampling: turning one step's logits into the next token id.
//
// Contract
//   SamplingParams (include/revis/sampling.h) holds the knobs, with
//   llama.cpp's defaults and meanings. A Sampler owns the params,
//   the recent-token history used by the penalties, and a seeded RNG. Each
//   sample() call runs, in this order:
//     logit_bias -> penalties -> (argmax if temperature <= 0) -> top-k -> temperature
//     -> softmax -> top-p -> min-p -> one weighted draw.
//   sample() does not record the token it returns: call accept() for every
//   token that becomes part of the context (prompt tokens too, if they should
//   count towards the penalties), exactly as llama.cpp does.
//
// Determinism
//   The RNG is xoshiro256** seeded through splitmix64, and the uniform in
//   [0,1) is built from the top 53 bits of one 64-bit output, so nothing
//   depends on the standard library's implementation-defined distributions.
//   Candidates are always walked in a canonical order (token id, or logit
//   descending with ties by id), never in whatever order nth_element leaves,
//   and top-p decides on exact fixed-point sums (see sampler.cpp).
//   So the same seed, params and logits sequence give the same tokens on any
//   platform whose std::exp agrees. Every non-greedy sample() consumes
//   exactly one RNG output; greedy consumes none.
//
// Thread-safety
//   A Sampler is mutable state for one sequence (history, RNG, scratch
//   buffers): not safe to use from two threads at once. Distinct Samplers
//   share nothing and can run in parallel. SamplingParams is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "revis/sampling.h"
#include "revis/status.h"

namespace revis {

// xoshiro256** (Blackman & Vigna), state filled from the seed by splitmix64
// so that every seed, including 0, gives a well-mixed non-zero state.
class Rng {
 public:
  explicit Rng(uint64_t seed) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  // Uniform in [0, 1): the top 53 bits of next() scaled by 2^-53.
  double uniform();

 private:
  uint64_t s_[4];
};

// One entry of the distribution a Sampler would draw from.
struct TokenProb {
  int32_t id;
  float prob;  // normalised over the returned entries
};

// Speculative decoding's choice at one position (Leviathan et al. 2023;
// Chen et al. 2023): `draft` was drawn from the drafter's distribution q,
// p is the target's. Keeps the draft with probability min(1, p/q at it),
// otherwise draws from max(0, p - q) renormalised; the token returned is
// then distributed exactly as p, whatever q is. p and q list each token
// once (absent tokens have probability 0), probabilities summing to 1; an
// empty q stands for a drafter that chose the draft deterministically (q
// one-hot at it). Draws one or two uniforms from rng.
int32_t accept_or_resample(std::span<const TokenProb> p, std::span<const TokenProb> q, int32_t draft, Rng& rng);

class Sampler {
 public:
  // params should pass validate() (create() checks for you). With params
  // that do not, results are unspecified but memory-safe.
  explicit Sampler(const SamplingParams& params);
  static Result<Sampler> create(const SamplingParams& params);

  // Picks the next token from one row of logits (one per vocabulary entry).
  // NaN logits are treated as -inf; if the largest logit is infinite, the
  // tokens at it share the mass equally. Greedy ties go to the lowest index.
  // Returns -1 only for empty logits.
  int32_t sample(std::span<const float> logits);

  // The candidates and normalised probabilities sample() would draw from for
  // these logits now, in the order it walks them (best first when top-k is
  // on, token id order otherwise). Does not touch the RNG or the history.
  // Greedy returns the argmax alone with prob 1.
  std::vector<TokenProb> distribution(std::span<const float> logits);

  // What sample() would return, in distribution, when a drafter proposed
  // `draft` (drawn from q; empty q: chosen deterministically) for these
  // logits: accept_or_resample() on distribution(logits). Greedy returns
  // the argmax, as sample() does, and uses no RNG.
  int32_t sample_draft(std::span<const float> logits, int32_t draft, std::span<const TokenProb> q = {});

  // Applies the logit bias and then the repetition / frequency / presence
  // penalties for the current history to `logits` in place: what sample()
  // does first. Bias and history tokens outside [0, logits.size()) are
  // ignored.
  void adjust_logits(std::span<float> logits) const;

  // Records a token that entered the context; only the last repeat_last_n
  // are kept.
  void accept(int32_t token);
  // Forgets the history and restarts the RNG from the seed, so the Sampler
  // behaves exactly like a freshly constructed one.
  void reset();

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;  // after penalties, before temperature (same order as prob)
    double p;     // unnormalised, the best candidate has p == 1
  };

  // Fills cands_ with what the draw would see; returns the argmax token for
  // the greedy path (cands_ then unused), or -1 when cands_ is to be drawn
  // from. Precondition: logits not empty.
  int32_t prepare(std::span<const float> logits);
  // (token, count) over the history window, sorted by token.
  std::vector<std::pair<int32_t, int32_t>> window_counts() const;
  // Cuts cands_ to the smallest best-first set with mass >= top_p. `sorted`
  // says cands_ is already in ByLogitDesc order (top-k ran).
  void apply_top_p(bool sorted);
  bool penalties_active() const;
  float penalize(float logit, int32_t count) const;

  // Top-p's working entries: the ranking packed into one integer so the
  // selection compares once per step, and the mass in fixed point.
  struct Ranked {
    uint64_t key;   // rank_key(): larger ranks first, never equal
    uint64_t mass;  // fixed-point probability mass
  };
  static uint64_t rank_key(const Candidate& c);

  SamplingParams params_;
  Rng rng_;
  std::vector<int32_t> history_;  // ring buffer of at most repeat_last_n tokens
  size_t history_head_ = 0;       // next slot to overwrite once full
  std::vector<Candidate> cands_;  // scratch reused across calls
  std::vector<Ranked> select_;    // top-p's working copy, also reused
};

}  // namespace revis
