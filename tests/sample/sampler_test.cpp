// Tests for sample/sampler.h: greedy and its limits, seeding, the empirical
// distribution, each filter's exact kept set, the penalties' exact numbers,
// parameter validation and the large-vocabulary path.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

namespace revis {
namespace {

// Params with every filter off, so a test turns on only what it checks.
SamplingParams plain(float temperature = 1.0f, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// Deterministic pseudo-random logits for tests (independent of the Sampler's
// own RNG so a bug there cannot hide in the fixtures).
std::vector<float> random_logits(size_t n, uint64_t seed, double scale = 3.0) {
  Rng rng(seed ^ 0xABCDEF);
  std::vector<float> v(n);
  for (auto& x : v) {
    // Sum of uniforms: roughly normal, cheap and platform independent.
    double s = rng.uniform() + rng.uniform() + rng.uniform() - 1.5;
    x = static_cast<float>(s * scale);
  }
  return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
  double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - mx) / t);
  for (auto& x : p) x /= sum;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

std::set<int32_t> ids(const std::vector<TokenProb>& d) {
  std::set<int32_t> s;
  for (const auto& t : d) s.insert(t.id);
  return s;
}

// ---------------------------------------------------------------- greedy

TEST(Sampler, GreedyIsArgmax) {
  for (float t : {0.0f, -1.0f}) {
    Sampler s(plain(t));
    for (uint64_t seed = 0; seed < 20; ++seed) {
      auto logits = random_logits(1000, seed);
      auto want = std::max_element(logits.begin(), logits.end()) - logits.begin();
      EXPECT_EQ(s.sample(logits), want);
    }
  }
}

TEST(Sampler, GreedyTiesGoToLowestIndex) {
  Sampler s(plain(0.0f));
  std::vector<float> logits = {1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  EXPECT_EQ(s.sample(logits), 1);
  std::vector<float> all_equal(7, 0.25f);
  EXPECT_EQ(s.sample(all_equal), 0);
  auto d = s.distribution(logits);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[0].prob, 1.0f);
}

TEST(Sampler, TemperatureToZeroApproachesGreedy) {
  // Gaps of >= 0.1 at T = 1e-4 make every other token exp(-1000) = 0.
  std::vector<float> logits = {0.3f, 1.2f, -0.5f, 1.1f, 0.9f};
  Sampler s(plain(1e-4f, 7));
  for (int i = 0; i < 500; ++i) ASSERT_EQ(s.sample(logits), 1);
  // And ties at the top split between the tied tokens only.
  std::vector<float> tied = {0.3f, 1.2f, -0.5f, 1.2f};
  std::set<int32_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(s.sample(tied));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

TEST(Sampler, TopK1EqualsGreedy) {
  SamplingParams p = plain(1.5f, 3);
  p.top_k = 1;
  Sampler topk(p);
  Sampler greedy(plain(0.0f));
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto logits = random_logits(5000, seed);
    // Force ties at the top now and then.
    if (seed % 3 == 0) {
      float mx = *std::max_element(logits.begin(), logits.end());
      logits[4000] = mx;
      logits[17] = mx;
    }
    EXPECT_EQ(topk.sample(logits), greedy.sample(logits)) << "seed " << seed;
  }
}

TEST(Sampler, EmptyAndNonFiniteLogits) {
  Sampler s(plain(1.0f));
  EXPECT_EQ(s.sample({}), -1);
  EXPECT_TRUE(s.distribution({}).empty());

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> with_nan = {nan, 1.0f, nan, 0.5f};
  Sampler g(plain(0.0f));
  EXPECT_EQ(g.sample(with_nan), 1);
  for (int i = 0; i < 300; ++i) {
    int32_t t = s.sample(with_nan);
    ASSERT_TRUE(t == 1 || t == 3) << t;
  }
  std::vector<float> with_inf = {0.0f, inf, 1.0f, inf};
  std::set<int32_t> seen;
  for (int i = 0; i < 300; ++i) seen.insert(s.sample(with_inf));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

// ---------------------------------------------------------------- rng & seeds

TEST(Sampler, RngUniformInRange) {
  Rng r(123);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

TEST(Sampler, RngGoldenValues) {
  // Pins the generator (splitmix64 seeding + xoshiro256**) so that a change
  // of algorithm, or a platform that computes it differently, is caught:
  // same seed must mean the same tokens everywhere.
  Rng r(0);
  EXPECT_EQ(r.next(), 0x99EC5F36CB75F2B4ull);
  EXPECT_EQ(r.next(), 0xBF6E1F784956452Aull);
  EXPECT_EQ(r.next(), 0x1A5F849D4933E6E0ull);
  Rng r42(42);
  EXPECT_EQ(r42.next(), 0x15780B2E0C2EC716ull);
}

std::vector<int32_t> run(uint64_t seed, int steps) {
  SamplingParams p = plain(1.0f, seed);
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) out.push_back(s.sample(random_logits(64, 1000 + i, 1.0)));
  return out;
}

TEST(Sampler, SameSeedSameSequence) {
  EXPECT_EQ(run(42, 1000), run(42, 1000));
}

TEST(Sampler, DifferentSeedDifferentSequence) {
  auto a = run(42, 1000), b = run(43, 1000);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  // Near-flat logits over 64 tokens: almost every position should differ.
  EXPECT_GT(differ, 800);
}

TEST(Sampler, ResetReplaysTheSequence) {
  SamplingParams p = plain(1.0f, 9);
  p.repeat_penalty = 1.3f;
  Sampler s(p);
  auto logits = random_logits(50, 5, 1.0);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 200; ++i) {
    first.push_back(s.sample(logits));
    s.accept(first.back());
  }
  s.reset();
  for (int i = 0; i < 200; ++i) {
    second.push_back(s.sample(logits));
    s.accept(second.back());
  }
  EXPECT_EQ(first, second);
}

TEST(Sampler, GoldenTokenSequence) {
  // The end-to-end counterpart of RngGoldenValues, with every stage on.
  SamplingParams p;  // defaults: T 0.8, top-k 40, top-p 0.95, min-p 0.05
  p.seed = 2024;
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  std::vector<int32_t> got;
  for (int i = 0; i < 12; ++i) {
    got.push_back(s.sample(random_logits(500, 77 + i)));
    s.accept(got.back());
  }
  std::string text;
  for (auto t : got) text += std::to_string(t) + ",";
  // Cross-checked against an independent Python model of the same chain
  // (float32 logits, double softmax, the same RNG); change only on purpose.
  EXPECT_EQ(text, "476,361,177,136,5,316,177,410,153,304,341,79,");
}

TEST(Sampler, EachDrawUsesOneRngOutput) {
  // Two equal logits: token 0 iff the draw's uniform is below 0.5. A replica
  // of the generator predicts every token, so the sampler consumes exactly
  // one output per non-greedy call and maps it as documented.
  Sampler s(plain(1.0f, 314));
  Rng replica(314);
  const std::vector<float> logits = {0.25f, 0.25f};
  for (int i = 0; i < 500; ++i) {
    const int32_t want = replica.uniform() < 0.5 ? 0 : 1;
    ASSERT_EQ(s.sample(logits), want) << "draw " << i;
  }
}

TEST(Sampler, InvalidParamsStayInRange) {
  // The constructor does not validate; whatever it is given, sample() must
  // return a real token index (and, under the sanitizers, do nothing
  // undefined on the way).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<SamplingParams> bad(8, plain(1.0f));
  bad[0].temperature = nan;
  bad[1].temperature = inf;
  bad[2].top_p = -1.0f;
  bad[3].min_p = 5.0f;
  bad[4].repeat_penalty = nan;
  bad[5].repeat_penalty = -2.0f;
  bad[6].frequency_penalty = inf;
  bad[7].top_k = -3;
  bad[7].repeat_last_n = -4;
  auto logits = random_logits(1000, 3);
  logits[10] = -inf;
  for (const auto& p : bad) {
    ASSERT_FALSE(p.validate().ok());
    Sampler s(p);
    for (int i = 0; i < 20; ++i) {
      int32_t t = s.sample(logits);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, 1000);
      s.accept(t);
    }
  }
}

// ---------------------------------------------------------------- distribution

TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -1.0f, 0.3f, 1.5f};
  for (float t : {0.7f, 1.0f, 1.6f}) {
    Sampler s(plain(t, 11));
    const int n = 20000;
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
    auto p = softmax(logits, t);
    double chi2 = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      double expected = p[i] * n;
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    // 7 degrees of freedom: P(chi2 > 24.3) = 0.001. Seeded, so not flaky,
    // but a skewed draw (off-by-one in the walk, wrong T) lands far above.
    EXPECT_LT(chi2, 24.3) << "T=" << t;
  }
}

TEST(Sampler, DistributionMatchesSoftmaxWithoutFilters) {
  auto logits = random_logits(300, 4);
  Sampler s(plain(0.9f));
  auto d = s.distribution(logits);
  ASSERT_EQ(d.size(), logits.size());
  auto p = softmax(logits, 0.9);
  double sum = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(d[i].id, static_cast<int32_t>(i));  // unfiltered: id order
    EXPECT_NEAR(d[i].prob, p[i], 1e-6);
    sum += d[i].prob;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// ---------------------------------------------------------------- filters

// Probabilities 0.5 / 0.3 / 0.15 / 0.05 placed at ids 2, 0, 3, 1.
const std::vector<float> kFour = log_probs({0.3, 0.05, 0.5, 0.15});

TEST(Sampler, TopPKeepsMinimalSetReachingP) {
  struct Case {
    float top_p;
    std::set<int32_t> kept;
  };
  for (const Case& c : {Case{0.49f, {2}}, Case{0.79f, {2, 0}}, Case{0.81f, {2, 0, 3}},
                        Case{0.94f, {2, 0, 3}}, Case{0.96f, {2, 0, 3, 1}}}) {
    SamplingParams p = plain(1.0f);
    p.top_p = c.top_p;
    Sampler s(p);
    auto d = s.distribution(kFour);
    EXPECT_EQ(ids(d), c.kept) << "top_p=" << c.top_p;
    // Without top-k the walk order is token id; probabilities renormalised.
    double sum = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(d[i - 1].id, d[i].id);
      }
      sum += d[i].prob;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(c.kept.count(s.sample(kFour)));
  }
  SamplingParams p = plain(1.0f);
  p.top_p = 0.79f;
  auto d = Sampler(p).distribution(kFour);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_NEAR(d[0].prob, 0.375, 1e-6);  // 0.3 / 0.8
  EXPECT_EQ(d[1].id, 2);
  EXPECT_NEAR(d[1].prob, 0.625, 1e-6);  // 0.5 / 0.8
  // With top-k on, the same set comes back best first.
  p.top_k = 3;
  d = Sampler(p).distribution(kFour);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 2);
  EXPECT_EQ(d[1].id, 0);
}

TEST(Sampler, TopPOnLargeVocabMatchesBruteForce) {
  // Without top-k the kept set is found by a growing partial selection;
  // compare against sorting everything. Flat and peaked logits exercise
  // one round and many rounds.
  for (double scale : {0.5, 3.0, 12.0}) {
    for (float top_p : {0.3f, 0.9f, 0.99f}) {
      auto logits = random_logits(60000, 31, scale);
      SamplingParams p = plain(0.8f);
      p.top_p = top_p;
      Sampler s(p);
      auto got = ids(s.distribution(logits));

      auto prob = softmax(logits, 0.8);
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
      });
      std::set<int32_t> want;
      double cum = 0;
      for (int32_t id : order) {
        want.insert(id);
        cum += prob[id];
        if (cum >= top_p) break;
      }
      // Equal up to a token sitting exactly on the boundary after rounding.
      std::vector<int32_t> sym;
      std::set_symmetric_difference(got.begin(), got.end(), want.begin(), want.end(),
                                    std::back_inserter(sym));
      EXPECT_LE(sym.size(), 1u) << "scale " << scale << " top_p " << top_p << " got "
                                << got.size() << " want " << want.size();
    }
  }
}

TEST(Sampler, TopPSameSetWithAndWithoutTopK) {
  // Top-p has two paths: a prefix scan when top-k already sorted the
  // candidates, a weighted quickselect (with a peaked-head shortcut) when
  // not. With the one token top-k drops carrying no mass (-inf), both must
  // keep exactly the same tokens.
  for (double scale : {0.3, 2.0, 8.0, 30.0}) {
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.999f}) {
      auto logits = random_logits(40000, 77, scale);
      logits[123] = -std::numeric_limits<float>::infinity();
      logits[500] = logits[501] = logits[502];  // ties must not matter either
      SamplingParams p = plain(0.7f);
      p.top_p = top_p;
      auto unsorted = ids(Sampler(p).distribution(logits));
      p.top_k = static_cast<int32_t>(logits.size() - 1);
      auto sorted = ids(Sampler(p).distribution(logits));
      EXPECT_EQ(unsorted, sorted) << "scale " << scale << " top_p " << top_p;
    }
  }
}

TEST(Sampler, MinPRemovesTokensBelowFractionOfMax) {
  struct Case {
    float min_p;
    std::set<int32_t> kept;
  };
  // Max prob 0.5: thresholds 0.05, 0.1, 0.175, 0.5.
  for (const Case& c : {Case{0.09f, {2, 0, 3, 1}}, Case{0.2f, {2, 0, 3}},
                        Case{0.35f, {2, 0}}, Case{0.7f, {2}}, Case{1.0f, {2}}}) {
    SamplingParams p = plain(1.0f);
    p.min_p = c.min_p;
    Sampler s(p);
    EXPECT_EQ(ids(s.distribution(kFour)), c.kept) << "min_p=" << c.min_p;
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(c.kept.count(s.sample(kFour)));
  }
}

TEST(Sampler, TopKKeepsKHighest) {
  auto logits = random_logits(2000, 8);
  SamplingParams p = plain(1.0f);
  p.top_k = 25;
  Sampler s(p);
  auto d = s.distribution(logits);
  ASSERT_EQ(d.size(), 25u);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  for (const auto& t : d) EXPECT_GE(logits[t.id], sorted[24]);
  // top_k larger than the vocabulary is simply everything.
  p.top_k = 5000;
  EXPECT_EQ(Sampler(p).distribution(logits).size(), logits.size());
}

TEST(Sampler, FiltersCompose) {
  // top-k 3 keeps {2,0,3} (0.5/0.3/0.15 of the full mass). top-p then works
  // on the renormalised 0.526/0.316/0.158: 0.8 is reached by two tokens,
  // 0.85 needs all three; min-p 0.4 then drops 3 (0.158 < 0.4 * 0.526).
  SamplingParams p = plain(1.0f);
  p.top_k = 3;
  p.top_p = 0.8f;
  EXPECT_EQ(ids(Sampler(p).distribution(kFour)), (std::set<int32_t>{2, 0}));
  p.top_p = 0.85f;
  EXPECT_EQ(ids(Sampler(p).distribution(kFour)), (std::set<int32_t>{2, 0, 3}));
  p.min_p = 0.4f;
  EXPECT_EQ(ids(Sampler(p).distribution(kFour)), (std::set<int32_t>{2, 0}));
}

// ---------------------------------------------------------------- penalties

TEST(Sampler, PenaltiesExactNumbers) {
  SamplingParams p = plain(1.0f);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.repeat_last_n = 4;
  Sampler s(p);
  for (int32_t t : {3, 0, 1, 0, 4}) s.accept(t);  // window: 0, 1, 0, 4 (3 fell out)
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  s.adjust_logits(logits);
  EXPECT_EQ(logits[0], -0.25f);  // 2/2 - 2*0.5 - 0.25
  EXPECT_EQ(logits[1], -2.75f);  // -1*2 - 1*0.5 - 0.25
  EXPECT_EQ(logits[2], 0.5f);    // never seen
  EXPECT_EQ(logits[3], 3.0f);    // outside the window
  EXPECT_EQ(logits[4], -0.25f);  // 1/2 - 0.5 - 0.25
}

TEST(Sampler, EachPenaltyAlone) {
  std::vector<float> base = {2.0f, -1.0f, 0.0f};
  auto apply = [&](float rp, float fp, float pp) {
    SamplingParams p = plain(1.0f);
    p.repeat_penalty = rp;
    p.frequency_penalty = fp;
    p.presence_penalty = pp;
    Sampler s(p);
    for (int32_t t : {0, 0, 0, 1, 2}) s.accept(t);
    std::vector<float> l = base;
    s.adjust_logits(l);
    return l;
  };
  EXPECT_EQ(apply(1.25f, 0, 0), (std::vector<float>{1.6f, -1.25f, 0.0f}));
  EXPECT_EQ(apply(1.0f, 0.5f, 0), (std::vector<float>{0.5f, -1.5f, -0.5f}));
  EXPECT_EQ(apply(1.0f, 0, 0.75f), (std::vector<float>{1.25f, -1.75f, -0.75f}));
  // Negative penalties (OpenAI allows them) encourage repetition.
  EXPECT_EQ(apply(1.0f, -0.5f, 0), (std::vector<float>{3.5f, -0.5f, 0.5f}));
  EXPECT_EQ(apply(1.0f, 0, 0), base);
}

TEST(Sampler, PenaltiesSteerSampling) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  std::vector<float> logits = {5.0f, 4.9f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);  // 5 / 1.1 = 4.545 < 4.9
  s.reset();
  EXPECT_EQ(s.sample(logits), 0);  // history forgotten
}

TEST(Sampler, PenaltyHistoryEdgeCases) {
  SamplingParams p = plain(1.0f);
  p.presence_penalty = 1.0f;
  p.repeat_last_n = 0;  // no window: penalties see nothing
  Sampler none(p);
  none.accept(0);
  std::vector<float> l = {1.0f, 1.0f};
  none.adjust_logits(l);
  EXPECT_EQ(l, (std::vector<float>{1.0f, 1.0f}));

  p.repeat_last_n = 8;
  Sampler s(p);
  s.accept(-5);       // ignored: not a token of this vocabulary
  s.accept(1000000);  // ignored: past the end
  s.accept(1);
  s.adjust_logits(l);
  EXPECT_EQ(l, (std::vector<float>{1.0f, 0.0f}));
}

TEST(Sampler, LogitBiasComesBeforeThePenalties) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.logit_bias = {{1, 8.0f}, {2, -10.0f}, {1, 1.0f}, {7, 5.0f}};  // 1 listed twice; 7 outside, ignored
  Sampler s(p);
  s.accept(1);
  std::vector<float> logits = {6.0f, 2.0f, 4.0f};
  // Biased first: (2 + 9) / 2 = 5.5 loses to 6; penalised first it would be 2 / 2 + 9 = 10.
  EXPECT_EQ(s.sample(logits), 0);
  std::vector<float> adjusted = logits;
  s.adjust_logits(adjusted);
  EXPECT_EQ(adjusted, (std::vector<float>{6.0f, 5.5f, -6.0f}));
  p.repeat_penalty = 1.0f;
  EXPECT_EQ(Sampler(p).sample(logits), 1);  // 11 > 6
  p.logit_bias = {{0, NAN}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.validate().ok());
}

// ---------------------------------------------------------------- validate

TEST(Sampler, DefaultsAreLlamaCppLike) {
  SamplingParams p;
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.0f);
  EXPECT_TRUE(p.validate().ok());
  EXPECT_TRUE(plain(0.0f).validate().ok());
  EXPECT_TRUE(plain(-1.0f).validate().ok());
}

TEST(Sampler, ValidateRejectsBadParams) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* field;
    void (*mutate)(SamplingParams&);
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }},
      {"temperature", [](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = -0.5f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = std::numeric_limits<float>::quiet_NaN(); }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = 0.0f; }},
      {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = -1.0f; }},
      {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = std::numeric_limits<float>::infinity(); }},
      {"repeat_last_n", [](SamplingParams& p) { p.repeat_last_n = -1; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = std::numeric_limits<float>::quiet_NaN(); }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -std::numeric_limits<float>::infinity(); }},
  };
  (void)nan;
  (void)inf;
  for (const Case& c : cases) {
    SamplingParams p;
    c.mutate(p);
    Status st = p.validate();
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("got"), std::string::npos) << st.message();
    auto created = Sampler::create(p);
    EXPECT_FALSE(created.ok());
  }
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(p.validate().message(), "sampling params: top_p must be in (0, 1] (1 disables it), got 1.5");
  EXPECT_TRUE(Sampler::create(SamplingParams{}).ok());
}

// ---------------------------------------------------------------- scale

TEST(Sampler, LargeVocabularyDefaults) {
  // 150k-entry vocabulary with the default chain (top-k 40 first): every
  // draw must come from the 40 highest logits, and it must be quick.
  const size_t n = 150000;
  SamplingParams p;
  p.seed = 5;
  Sampler s(p);
  auto start = std::chrono::steady_clock::now();
  const int steps = 100;
  for (int i = 0; i < steps; ++i) {
    auto logits = random_logits(n, 500 + i);
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<>());
    int32_t t = s.sample(logits);
    ASSERT_GE(t, 0);
    ASSERT_GE(logits[t], sorted[39]);
  }
  auto per_call = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start).count() / steps;
  std::printf("[ info     ] %.3f ms per step incl. fixture generation (vocab %zu)\n", per_call, n);

  // The no-top-k path (top-p via growing selection) on the same size.
  p.top_k = 0;
  Sampler s2(p);
  auto logits = random_logits(n, 1);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) ASSERT_GE(s2.sample(logits), 0);
  per_call = std::chrono::duration<double, std::milli>(
                 std::chrono::steady_clock::now() - start).count() / 20;
  std::printf("[ info     ] %.3f ms per sample, top-k off, top-p 0.95 (vocab %zu)\n", per_call, n);
}

}  // namespace
}  // namespace revis
