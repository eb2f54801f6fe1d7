// The vector loops of attention and SwiGLU against plain double-precision references,
// on random data and sizes that leave every kind of tail (rows not a
// multiple of 4, dims not a multiple of 8 or 32).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/ops.h"

namespace revis {
namespace {

std::vector<float> random_values(size_t n, std::mt19937& rng, float spread = 1.0f) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

const int kCounts[] = {1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 130};
const int kDims[] = {1, 7, 8, 9, 31, 32, 33, 64, 80, 100, 128};

TEST(Ops, AttentionScoresMatchScaledDots) {
  std::mt19937 rng(7);
  for (int n : kCounts)
    for (int dim : kDims) {
      const std::vector<float> q = random_values(dim, rng), keys = random_values(size_t(n) * dim, rng);
      std::vector<float> scores(n);
      attention_scores(q.data(), keys.data(), n, dim, 0.125f, scores.data());
      for (int p = 0; p < n; ++p) {
        double expected = 0.0, magnitude = 0.0;
        for (int i = 0; i < dim; ++i) {
          expected += double(q[i]) * keys[size_t(p) * dim + i];
          magnitude += std::fabs(double(q[i]) * keys[size_t(p) * dim + i]);
        }
        ASSERT_NEAR(scores[p], 0.125 * expected, 0.125 * magnitude * 1e-6) << "n " << n << " dim " << dim << " p " << p;
      }
    }
}

TEST(Ops, AddWeightedSumMatchesReference) {
  std::mt19937 rng(8);
  for (int n : kCounts)
    for (int dim : kDims) {
      const std::vector<float> w = random_values(n, rng), rows = random_values(size_t(n) * dim, rng);
      std::vector<float> out(dim);
      for (int i = 0; i < dim; ++i) out[i] = 0.5f * i - 3.0f;  // added to
      add_weighted_sum(w.data(), rows.data(), n, dim, out.data());
      for (int i = 0; i < dim; ++i) {
        double expected = 0.5 * i - 3.0, magnitude = std::fabs(expected);
        for (int p = 0; p < n; ++p) {
          expected += double(w[p]) * rows[size_t(p) * dim + i];
          magnitude += std::fabs(double(w[p]) * rows[size_t(p) * dim + i]);
        }
        ASSERT_NEAR(out[i], expected, magnitude * 1e-6) << "n " << n << " dim " << dim << " i " << i;
      }
    }
}

TEST(Ops, SoftmaxMatchesExpWithinTwoUlpsAndSumsToOne) {
  std::mt19937 rng(9);
  for (int n : kCounts)
    for (float spread : {0.1f, 3.0f, 40.0f}) {
      std::vector<float> x = random_values(n, rng, spread);
      if (n > 2) x[1] = -1000.0f;  // far below the rest: its weight is (practically) zero
      // The shifted values as float: their rounding is the input's, not exp's.
      std::vector<double> expected(n);
      float max = x[0];
      double sum = 0.0;
      for (float v : x) max = std::max(max, v);
      for (int i = 0; i < n; ++i) sum += expected[i] = std::exp(double(x[i] - max));
      softmax(x.data(), n);
      double total = 0.0;
      for (int i = 0; i < n; ++i) {
        total += x[i];
        ASSERT_NEAR(x[i], expected[i] / sum, 5e-7 * expected[i] / sum + 1e-30) << "n " << n << " i " << i;
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
}

TEST(Ops, SwigluMatchesReference) {
  std::mt19937 rng(10);
  for (int n : kCounts)
    for (float spread : {0.5f, 5.0f, 60.0f}) {
      std::vector<float> gate = random_values(n, rng, spread);
      const std::vector<float> up = random_values(n, rng);
      if (n > 3) gate[2] = 0.0f, gate[3] = -200.0f;
      std::vector<double> expected(n);
      for (int i = 0; i < n; ++i) expected[i] = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
      swiglu(gate.data(), up.data(), n);
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(gate[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-30) << "n " << n << " i " << i;
    }
}

TEST(Ops, SoftmaxOfEqualValuesIsUniform) {
  std::vector<float> x(10, 3.5f);
  softmax(x.data(), 10);
  for (float v : x) EXPECT_FLOAT_EQ(v, 0.1f);
}

}  // namespace
}  // namespace revis
