// RoPE's angles under each scaling a GGUF can ask for, against closed forms
// computed here in double precision from the published definitions: no
// llama.cpp golden output covers linear scaling, YaRN on a non-DeepSeek
// model or Llama 3's factors at long positions (the golden suites hold
// deepseek2-yarn and llama-bpe's rope_freqs at short positions only), so
// these tests are the independent check for them.
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace revis {
namespace {

ModelConfig rope_config(int dims, float base) {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.head_dim_k = c.head_dim_v = dims;
  c.rope_dims = dims;
  c.rope_base = base;
  c.n_ctx_train = 8192;
  return c;
}

std::vector<float> angles(const Rope& rope, int pos) {
  std::vector<float> theta;
  rope.for_each_angle(pos, [&](int i, float t) {
    EXPECT_EQ(i, static_cast<int>(theta.size()));
    theta.push_back(t);
  });
  return theta;
}

// The unscaled frequency of pair i: base^(-2i/dims) radians per position.
double frequency(int i, int dims, double base) { return std::pow(base, -2.0 * i / dims); }

// theta as a float computed by repeated multiplication drifts by a few ulps
// per pair from the exact value.
void expect_angle(float actual, double expected, int i, int pos) {
  EXPECT_NEAR(actual, expected, 1e-5 * std::fabs(expected) + 1e-6) << "pair " << i << " pos " << pos;
}

TEST(Rope, UnscaledAnglesArePositionTimesFrequency) {
  const ModelConfig c = rope_config(64, 10000.0f);
  const Rope rope(c, {});
  EXPECT_EQ(rope.magnitude(), 1.0f);
  for (int pos : {0, 1, 17, 4095, 30000}) {
    const std::vector<float> theta = angles(rope, pos);
    ASSERT_EQ(theta.size(), 32u);
    for (int i = 0; i < 32; ++i) expect_angle(theta[i], pos * frequency(i, 64, 10000.0), i, pos);
  }
}

// rope.scaling.type = linear, factor s: every angle is the unscaled one at
// position pos / s.
TEST(Rope, LinearScalingDividesEveryAngleByTheFactor) {
  ModelConfig c = rope_config(128, 500000.0f);
  c.rope_freq_scale = 1.0f / 4.0f;
  const Rope rope(c, {});
  EXPECT_EQ(rope.magnitude(), 1.0f);
  for (int pos : {1, 1000, 32767}) {
    const std::vector<float> theta = angles(rope, pos);
    for (int i = 0; i < 64; ++i) expect_angle(theta[i], pos / 4.0 * frequency(i, 128, 500000.0), i, pos);
  }
}

// YaRN (Peng et al. 2023, as ggml's rope_yarn implements it): a pair whose
// wavelength turns more than beta_fast times over the original context
// keeps its angle, one turning fewer than beta_slow times is interpolated
// (angle / s), and between the two a ramp, linear in the pair's index from
// floor(d(beta_fast)) to ceil(d(beta_slow)) where d(b) is the (fractional)
// pair index whose wavelength turns b times, mixes them. cos and sin grow
// by 1 + 0.1 ln s.
TEST(Rope, YarnKeepsFastPairsInterpolatesSlowOnesAndRampsBetween) {
  const int dims = 128;
  const double base = 1000000.0, s = 4.0, original = 32768.0;
  ModelConfig c = rope_config(dims, static_cast<float>(base));
  c.arch = Architecture::kQwen2;
  c.rope_layout = RopeLayout::kNeox;
  c.rope_freq_scale = static_cast<float>(1.0 / s);
  c.rope_yarn = true;
  c.yarn.n_ctx_orig = static_cast<int>(original);
  const Rope rope(c, {});
  EXPECT_NEAR(rope.magnitude(), 1.0 + 0.1 * std::log(s), 1e-6);

  const double pi = 3.14159265358979323846;
  auto pair_turning = [&](double turns) { return dims * std::log(original / (turns * 2 * pi)) / (2 * std::log(base)); };
  const double low = std::max(0.0, std::floor(pair_turning(32.0)));
  const double high = std::min(dims - 1.0, std::ceil(pair_turning(1.0)));
  ASSERT_LT(low, high);
  int kept = 0, interpolated = 0, ramped = 0;
  const int pos = 100000;
  const std::vector<float> theta = angles(rope, pos);
  for (int i = 0; i < dims / 2; ++i) {
    const double unscaled = pos * frequency(i, dims, base);
    const double turns = original * frequency(i, dims, base) / (2 * pi);  // over the original context
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    expect_angle(theta[i], unscaled / s * ramp + unscaled * (1 - ramp), i, pos);
    if (turns > 32.0) {
      expect_angle(theta[i], unscaled, i, pos), ++kept;
    } else if (turns < 1.0) {
      expect_angle(theta[i], unscaled / s, i, pos), ++interpolated;
    } else {
      EXPECT_LE(theta[i], unscaled * (1 + 1e-6)) << i;
      EXPECT_GE(theta[i], unscaled / s * (1 - 1e-6)) << i;
      ++ramped;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(interpolated, 0);
  EXPECT_GT(ramped, 0);
}

// Llama 3.1's scaling as Meta defines it (and llama.cpp's converter writes
// into rope_freqs: factor_i = frequency / new frequency): wavelengths
// shorter than original / high_freq_factor keep their frequency, longer
// than original / low_freq_factor are divided by `factor`, and between the
// two a smooth mix in original / wavelength.
TEST(Rope, Llama3FactorsGiveMetasFrequencies) {
  const int dims = 64;
  const double base = 500000.0, factor = 32.0, low_freq = 1.0, high_freq = 4.0, original = 8192.0;
  const double pi = 3.14159265358979323846;
  std::vector<double> scaled(dims / 2);
  std::vector<float> factors(dims / 2);
  for (int i = 0; i < dims / 2; ++i) {
    const double f = frequency(i, dims, base), wavelength = 2 * pi / f;
    if (wavelength < original / high_freq) {
      scaled[i] = f;
    } else if (wavelength > original / low_freq) {
      scaled[i] = f / factor;
    } else {
      const double smooth = (original / wavelength - low_freq) / (high_freq - low_freq);
      scaled[i] = (1 - smooth) * f / factor + smooth * f;
    }
    factors[i] = static_cast<float>(f / scaled[i]);
  }
  const Rope rope(rope_config(dims, static_cast<float>(base)), factors);
  EXPECT_EQ(rope.magnitude(), 1.0f);
  for (int pos : {5, 8191, 131071}) {
    const std::vector<float> theta = angles(rope, pos);
    for (int i = 0; i < dims / 2; ++i) expect_angle(theta[i], pos * scaled[i], i, pos);
  }
}

// apply() turns each pair by its angle, in the model's layout, and scales
// it by the magnitude.
TEST(Rope, ApplyRotatesThePairsOfEachLayout) {
  for (RopeLayout layout : {RopeLayout::kAdjacent, RopeLayout::kNeox}) {
    ModelConfig c = rope_config(8, 10000.0f);
    c.rope_layout = layout;
    c.rope_freq_scale = 0.5f;
    c.rope_yarn = true;
    c.yarn.n_ctx_orig = 4096;
    const Rope rope(c, {});
    const int pos = 333;
    std::vector<float> head(8);
    const bool neox = layout == RopeLayout::kNeox;
    auto first = [&](int i) { return neox ? i : 2 * i; };
    auto second = [&](int i) { return neox ? i + 4 : 2 * i + 1; };
    for (int i = 0; i < 4; ++i) head[first(i)] = 1.0f + i, head[second(i)] = 0.5f;
    const std::vector<float> before = head;
    rope.apply(head.data(), pos);
    const std::vector<float> theta = angles(rope, pos);
    for (int i = 0; i < 4; ++i) {
      const double a = before[first(i)], b = before[second(i)], m = rope.magnitude();
      EXPECT_NEAR(head[first(i)], m * (a * std::cos(theta[i]) - b * std::sin(theta[i])), 1e-5) << i;
      EXPECT_NEAR(head[second(i)], m * (a * std::sin(theta[i]) + b * std::cos(theta[i])), 1e-5) << i;
    }
  }
}

}  // namespace
}  // namespace revis
