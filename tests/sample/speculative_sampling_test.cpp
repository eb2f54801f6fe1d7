// Speculative decoding's rejection sampler (accept_or_resample,
// Sampler::sample_draft): whatever the drafter's distribution q, the tokens
// it returns follow the target's p. Checked empirically on a five-token
// vocabulary with a fixed seed: 200k draws put every frequency within
// 0.005 of p (about five standard deviations); the drafts themselves miss
// p by 0.1 or more, so keeping them unchecked would fail.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "sample/sampler.h"

namespace revis {
namespace {

constexpr int kDraws = 200000;
constexpr double kTolerance = 0.005;

// A token drawn from q with rng.
int32_t draw(const std::vector<TokenProb>& q, Rng& rng) {
  double u = rng.uniform(), cum = 0;
  for (const TokenProb& t : q)
    if ((cum += t.prob) > u) return t.id;
  return q.back().id;
}

std::array<double, 5> frequencies(const std::vector<TokenProb>& p, const std::vector<TokenProb>& q, bool one_hot_q) {
  Rng rng(12345);
  std::array<double, 5> counts{};
  for (int i = 0; i < kDraws; ++i) {
    // One-hot: a deterministic drafter whose proposals cycle through the
    // vocabulary, so each position's q is one-hot at its draft.
    const int32_t token = one_hot_q ? accept_or_resample(p, {}, i % 5, rng) : accept_or_resample(p, q, draw(q, rng), rng);
    counts[token] += 1.0 / kDraws;
  }
  return counts;
}

const std::vector<TokenProb> kP = {{0, 0.5f}, {1, 0.2f}, {2, 0.15f}, {3, 0.1f}, {4, 0.05f}};

TEST(SpeculativeSampling, KeepsTheTargetDistributionForAnyDraftDistribution) {
  const std::vector<std::vector<TokenProb>> drafters = {
      {{0, 0.2f}, {1, 0.2f}, {2, 0.2f}, {3, 0.2f}, {4, 0.2f}},  // uniform
      {{4, 0.7f}, {3, 0.3f}},                                   // mostly wrong, partial support
      {{0, 0.5f}, {1, 0.2f}, {2, 0.15f}, {3, 0.1f}, {4, 0.05f}},  // q == p: every draft kept
  };
  for (const auto& q : drafters) {
    const auto f = frequencies(kP, q, false);
    for (const TokenProb& t : kP) EXPECT_NEAR(f[t.id], t.prob, kTolerance) << "token " << t.id;
  }
}

TEST(SpeculativeSampling, KeepsTheTargetDistributionForDeterministicDrafts) {
  const auto f = frequencies(kP, {}, true);
  for (const TokenProb& t : kP) EXPECT_NEAR(f[t.id], t.prob, kTolerance) << "token " << t.id;
}

TEST(SpeculativeSampling, TokensOutsideTheTargetsSupportAreNeverKept) {
  Rng rng(1);
  const std::vector<TokenProb> p = {{2, 0.6f}, {3, 0.4f}};
  for (int i = 0; i < 1000; ++i) {
    const int32_t token = accept_or_resample(p, {}, 7, rng);
    EXPECT_TRUE(token == 2 || token == 3) << token;
  }
}

TEST(SpeculativeSampling, SampleDraftIsGreedyWithoutTemperature) {
  SamplingParams params;
  params.temperature = 0;
  Sampler sampler(params);
  const std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f};
  EXPECT_EQ(sampler.sample_draft(logits, 1), 1);
  EXPECT_EQ(sampler.sample_draft(logits, 2), 1);
}

TEST(SpeculativeSampling, SampleDraftFollowsTheSamplersDistribution) {
  Sampler sampler(SamplingParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 99});
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  std::array<double, 3> f{};
  for (int i = 0; i < kDraws; ++i) f[sampler.sample_draft(logits, i % 3)] += 1.0 / kDraws;
  EXPECT_NEAR(f[0], 0.5, kTolerance);
  EXPECT_NEAR(f[1], 0.3, kTolerance);
  EXPECT_NEAR(f[2], 0.2, kTolerance);
}

}  // namespace
}  // namespace revis
