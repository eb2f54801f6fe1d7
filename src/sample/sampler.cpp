// Implementation of sampler.h: see there for the contract, the order of the
// pipeline, determinism and thread-safety.
//
// Performance notes (vocabularies around 150k): the logits are copied once
// into a candidate array; top-k uses nth_element plus a sort of the k kept;
// top-p without top-k is a weighted quickselect (expected linear, no full
// sort even when most of the vocabulary is kept); min-p is a linear filter.
// Scratch memory is reused across calls.
#include "sample/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace revis {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string num(double v) {
  // Shortest round-trip-ish text for error messages ("0.95", "-1", "nan").
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Descending logit, ties to the lower id: a strict total order (NaN has been
// replaced by -inf before any comparison), so sorting with it is canonical
// and top-k with k = 1 agrees with greedy argmax.
struct ByLogitDesc {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    if (a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
  }
};

}  // namespace

// ---------------------------------------------------------------- params

Status SamplingParams::validate() const {
  auto bad = [](const char* field, const char* range, double v) {
    return Status::error(std::string("sampling params: ") + field + " must be " + range +
                         ", got " + num(v));
  };
  if (!std::isfinite(temperature)) return bad("temperature", "finite (<= 0 means greedy)", temperature);
  if (top_k < 0) return bad("top_k", ">= 0 (0 disables it)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", "in (0, 1] (1 disables it)", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", "in [0, 1] (0 disables it)", min_p);
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
    return bad("repeat_penalty", "finite and > 0 (1 disables it)", repeat_penalty);
  if (repeat_last_n < 0) return bad("repeat_last_n", ">= 0 (0 disables penalties)", repeat_last_n);
  if (!std::isfinite(frequency_penalty)) return bad("frequency_penalty", "finite", frequency_penalty);
  if (!std::isfinite(presence_penalty)) return bad("presence_penalty", "finite", presence_penalty);
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) return bad("logit_bias token", ">= 0", token);
    if (!std::isfinite(bias)) return bad("logit_bias", "finite", bias);
  }
  return Status();
}

// ---------------------------------------------------------------- rng

void Rng::reseed(uint64_t seed) {
  uint64_t sm = seed;
  for (auto& word : s_) word = splitmix64(sm);
  // splitmix64 is a bijection of its counter, so four consecutive outputs
  // cannot all be zero; xoshiro's one forbidden state is unreachable.
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() {
  // 53 bits is a double's full mantissa: every value is exact and < 1.
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

// ---------------------------------------------------------------- sampler

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  history_.reserve(static_cast<size_t>(std::max(params_.repeat_last_n, 0)));
}

Result<Sampler> Sampler::create(const SamplingParams& params) {
  Status st = params.validate();
  if (!st.ok()) return st;
  return Sampler(params);
}

void Sampler::accept(int32_t token) {
  const size_t window = static_cast<size_t>(std::max(params_.repeat_last_n, 0));
  if (window == 0) return;
  if (history_.size() < window) {
    history_.push_back(token);
  } else {
    // Full: overwrite the oldest. Order inside the window does not matter
    // to the penalties, only membership and counts.
    history_[history_head_] = token;
    history_head_ = (history_head_ + 1) % window;
  }
}

void Sampler::reset() {
  history_.clear();
  history_head_ = 0;
  rng_.reseed(params_.seed);
}

std::vector<std::pair<int32_t, int32_t>> Sampler::window_counts() const {
  std::vector<int32_t> sorted(history_);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<int32_t, int32_t>> counts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    counts.emplace_back(sorted[i], static_cast<int32_t>(j - i));
    i = j;
  }
  return counts;
}

bool Sampler::penalties_active() const {
  // Skipping the window scan when nothing would change keeps the common
  // no-penalty path a plain copy.
  return params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
         params_.presence_penalty != 0.0f;
}

float Sampler::penalize(float logit, int32_t count) const {
  // Repetition penalty as in CTRL / llama.cpp: dividing a negative logit
  // would make it more likely, so negatives are multiplied instead.
  if (params_.repeat_penalty != 1.0f) {
    logit = logit <= 0.0f ? logit * params_.repeat_penalty : logit / params_.repeat_penalty;
  }
  logit -= static_cast<float>(count) * params_.frequency_penalty +
           (count > 0 ? params_.presence_penalty : 0.0f);
  // Invalid params (e.g. a NaN penalty) must not poison the comparisons.
  return std::isnan(logit) ? kNegInf : logit;
}

void Sampler::adjust_logits(std::span<float> logits) const {
  for (const auto& [token, bias] : params_.logit_bias)
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[token] += bias;
  if (!penalties_active()) return;
  for (const auto& [token, count] : window_counts()) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    logits[token] = penalize(logits[token], count);
  }
}

int32_t Sampler::prepare(std::span<const float> logits) {
  const size_t n = logits.size();
  cands_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[i];
    cands_[i] = {static_cast<int32_t>(i), std::isnan(l) ? kNegInf : l, 0.0};
  }
  // Here cands_[id].id == id, so the bias and the penalties index the array
  // directly. A finite bias keeps -inf (a banned token) at -inf.
  for (const auto& [token, bias] : params_.logit_bias)
    if (token >= 0 && static_cast<size_t>(token) < n) cands_[token].logit += bias;
  if (penalties_active()) {
    for (const auto& [token, count] : window_counts()) {
      if (token < 0 || static_cast<size_t>(token) >= n) continue;
      cands_[token].logit = penalize(cands_[token].logit, count);
    }
  }

  if (!(params_.temperature > 0.0f)) {
    // First strict maximum wins, so ties go to the lowest index.
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) {
      if (cands_[i].logit > cands_[best].logit) best = i;
    }
    return static_cast<int32_t>(best);
  }

  // The order the draw walks must be canonical: cands_ stays in id order
  // unless top-k runs, which leaves it sorted by ByLogitDesc; the later
  // filters only remove entries and keep the relative order.
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    const auto kth = cands_.begin() + params_.top_k;
    std::nth_element(cands_.begin(), kth, cands_.end(), ByLogitDesc{});
    cands_.resize(static_cast<size_t>(params_.top_k));
    std::sort(cands_.begin(), cands_.end(), ByLogitDesc{});
    sorted = true;
  }

  // Temperature and softmax. Computing exp((l - max) / T) instead of
  // exp(l / T - max / T) keeps tiny temperatures from overflowing; the best
  // candidate gets exactly exp(0) = 1, which min-p relies on below.
  float lmax = kNegInf;
  for (const auto& c : cands_) lmax = std::max(lmax, c.logit);
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  const bool infinite_max = std::isinf(lmax);
  for (auto& c : cands_) {
    if (infinite_max) {
      // (l - inf) is NaN: the tokens at an infinite maximum share the mass.
      c.p = c.logit == lmax ? 1.0 : 0.0;
    } else {
      c.p = std::exp((static_cast<double>(c.logit) - lmax) * inv_t);
    }
  }

  if (params_.top_p < 1.0f) apply_top_p(sorted);

  if (params_.min_p > 0.0f) {
    double pmax = 0.0;
    for (const auto& c : cands_) pmax = std::max(pmax, c.p);
    const double threshold = static_cast<double>(params_.min_p) * pmax;
    const auto below = [&](const Candidate& c) { return c.p < threshold; };
    // For valid params the best token (p == pmax) always survives; the check
    // only keeps invalid ones (min_p > 1) from leaving nothing to draw from.
    if (!std::all_of(cands_.begin(), cands_.end(), below)) {
      // remove_if keeps the relative order, so canonical stays canonical.
      cands_.erase(std::remove_if(cands_.begin(), cands_.end(), below), cands_.end());
    }
  }
  return -1;
}

namespace {

// Top-p decides with fixed-point masses (2^-32 of the best token's mass):
// integer sums are exact and so independent of summation order, which lets
// the selection below visit candidates in whatever order nth_element leaves
// them and still decide the same set on every platform. The rounding (at
// most 2^-32 of the best token's mass per token) can only move a cut that
// sits that close to the boundary anyway.
// p is in [0, 1] for valid params; the comparison also maps a NaN (possible
// only with invalid ones) to 0 instead of an undefined conversion.
uint64_t fixed_mass(double p) { return p > 0.0 ? static_cast<uint64_t>(std::min(p, 1.0) * 0x1p32) : 0; }

}  // namespace

// ByLogitDesc packed into one integer, larger = better: the float's bits
// mapped to an order-preserving unsigned (negatives flipped), then the id
// inverted so lower ids win ties. -0 is folded into +0 because ByLogitDesc
// compares them equal.
uint64_t Sampler::rank_key(const Candidate& c) {
  const float logit = c.logit == 0.0f ? 0.0f : c.logit;
  const auto bits = std::bit_cast<uint32_t>(logit);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(c.id));
}

void Sampler::apply_top_p(bool sorted) {
  uint64_t total = 0;
  for (const auto& c : cands_) total += fixed_mass(c.p);
  // The kept set must carry at least ceil(top_p * total). At least 1, so
  // invalid (non-positive) top_p keeps the best token rather than nothing.
  const double want = static_cast<double>(params_.top_p) * static_cast<double>(total);
  const uint64_t need = want <= 1.0 ? 1 : static_cast<uint64_t>(std::ceil(want));

  if (sorted) {  // after top-k: a prefix scan is all it takes
    uint64_t cum = 0;
    for (size_t i = 0; i < cands_.size(); ++i) {
      cum += fixed_mass(cands_[i].p);
      if (cum >= need) {
        cands_.resize(i + 1);
        return;
      }
    }
    return;
  }

  // Weighted quickselect on a copy, so cands_ keeps its id order: halve
  // [lo, hi) with nth_element; if the better half alone reaches what is
  // still needed the cut lies inside it, otherwise take all of it and look
  // in the worse half. Expected O(n), no full sort even when the kept set is
  // most of a 150k vocabulary. Invariant: [0, lo) is kept, `rest` is the
  // mass still needed, and [lo, hi) holds at least that much. The copy
  // holds (rank key, fixed mass) pairs: one integer compare per step instead
  // of ByLogitDesc's two, and no float-to-int conversion per visit.
  //
  // Real logits are usually peaked: the candidates within 2^-20 of the best
  // token's mass tend to carry the whole cut. Selecting among those alone
  // (when their mass does reach it) spares copying and halving the long
  // tail; otherwise everything is copied. Both give the same set, because
  // the best-first order and the sums are the same.
  constexpr double kTail = 0x1p-20;
  select_.clear();
  uint64_t head_mass = 0;
  for (const auto& c : cands_) {
    if (c.p >= kTail) {
      select_.push_back({rank_key(c), fixed_mass(c.p)});
      head_mass += select_.back().mass;
    }
  }
  if (head_mass < need) {
    select_.clear();
    for (const auto& c : cands_) select_.push_back({rank_key(c), fixed_mass(c.p)});
  }
  const auto better = [](const Ranked& a, const Ranked& b) { return a.key > b.key; };
  size_t lo = 0, hi = select_.size();
  uint64_t rest = need;
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(select_.begin() + lo, select_.begin() + mid, select_.begin() + hi, better);
    uint64_t upper = 0;
    for (size_t i = lo; i < mid; ++i) upper += select_[i].mass;
    if (upper >= rest) {
      hi = mid;
    } else {
      rest -= upper;
      lo = mid;
    }
  }
  std::sort(select_.begin() + lo, select_.begin() + hi, better);
  size_t last = hi - 1;
  uint64_t cum = 0;
  for (size_t i = lo; i < hi; ++i) {
    cum += select_[i].mass;
    if (cum >= rest) {
      last = i;
      break;
    }
  }
  // The kept set is everything ranked at or above the last kept candidate;
  // the rank key is a total order, so this is exact even with tied logits.
  const uint64_t boundary = select_[last].key;
  cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                              [&](const Candidate& c) { return rank_key(c) < boundary; }),
               cands_.end());
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  const int32_t greedy = prepare(logits);
  if (greedy >= 0) return greedy;

  double total = 0.0;
  for (const auto& c : cands_) total += c.p;
  const double target = rng_.uniform() * total;
  double cum = 0.0;
  int32_t last_positive = cands_.front().id;
  for (const auto& c : cands_) {
    if (c.p <= 0.0) continue;  // a zero-mass token is never drawn
    cum += c.p;
    last_positive = c.id;
    if (cum > target) return c.id;
  }
  // Only reachable through rounding (cum ended a hair below target) or
  // non-finite masses from invalid params.
  return last_positive;
}

int32_t accept_or_resample(std::span<const TokenProb> p, std::span<const TokenProb> q, int32_t draft, Rng& rng) {
  auto q_of = [&](int32_t id) -> double {
    if (q.empty()) return id == draft ? 1.0 : 0.0;
    for (const TokenProb& t : q)
      if (t.id == id) return t.prob;
    return 0.0;
  };
  double p_draft = 0.0;
  for (const TokenProb& t : p)
    if (t.id == draft) p_draft = t.prob;
  const double q_draft = q_of(draft);
  // A draft q could not have drawn is kept only if p allows it at all.
  const double keep = q_draft > 0.0 ? p_draft / q_draft : (p_draft > 0.0 ? 1.0 : 0.0);
  if (rng.uniform() < keep) return draft;
  // The residual max(0, p - q): q as a dense lookup only when it is long.
  std::vector<double> residual(p.size());
  double total = 0.0;
  if (q.size() > 16) {
    int32_t max_id = 0;
    for (const TokenProb& t : p) max_id = std::max(max_id, t.id);
    std::vector<double> dense(static_cast<size_t>(max_id) + 1, 0.0);
    for (const TokenProb& t : q)
      if (t.id >= 0 && t.id <= max_id) dense[t.id] = t.prob;
    for (size_t i = 0; i < p.size(); ++i) total += residual[i] = std::max(0.0, p[i].prob - dense[p[i].id]);
  } else {
    for (size_t i = 0; i < p.size(); ++i) total += residual[i] = std::max(0.0, p[i].prob - q_of(p[i].id));
  }
  if (!(total > 0.0)) {  // p == q up to rounding: p itself is the residual
    for (size_t i = 0; i < p.size(); ++i) total += residual[i] = p[i].prob;
  }
  const double target = rng.uniform() * total;
  double cum = 0.0;
  int32_t last = draft;
  for (size_t i = 0; i < p.size(); ++i) {
    if (residual[i] <= 0.0) continue;
    cum += residual[i];
    last = p[i].id;
    if (cum > target) return last;
  }
  return last;
}

int32_t Sampler::sample_draft(std::span<const float> logits, int32_t draft, std::span<const TokenProb> q) {
  if (logits.empty()) return -1;
  if (!(params_.temperature > 0.0f)) return prepare(logits);
  const std::vector<TokenProb> p = distribution(logits);
  return accept_or_resample(p, q, draft, rng_);
}

std::vector<TokenProb> Sampler::distribution(std::span<const float> logits) {
  std::vector<TokenProb> out;
  if (logits.empty()) return out;
  const int32_t greedy = prepare(logits);
  if (greedy >= 0) {
    out.push_back({greedy, 1.0f});
    return out;
  }
  double total = 0.0;
  for (const auto& c : cands_) total += c.p;
  out.reserve(cands_.size());
  for (const auto& c : cands_) {
    out.push_back({c.id, total > 0.0 ? static_cast<float>(c.p / total) : 0.0f});
  }
  return out;
}

}  // namespace revis
