// The vector loops of attention and SwiGLU against plain double-precision references,
// on random data and sizes that leave every kind of tail (rows not a
// multiple of 4, dims not a multiple of 8 or 32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/ops.h"
#include "quant/quant.h"
#include "support/kernel_backends.h"

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

// Random float16 rows, as the KV cache holds them.
std::vector<uint16_t> random_halves(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> h(n);
  const std::vector<float> v = random_values(n, rng);
  for (size_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(v[i]);
  return h;
}

const int kHeadCounts[] = {1, 2, 3, 4, 5, 7, 8};

// Attention's kernels run on every kernel backend this CPU has: the portable
// code under the scalar backend, the F16C code under the x86 ones.
class AttentionOps : public ::testing::TestWithParam<KernelBackend> {
 protected:
  void SetUp() override { ASSERT_TRUE(backend_.ok()); }

 private:
  const testing::ScopedKernelBackend backend_{GetParam()};
};

TEST_P(AttentionOps, ScoresMatchScaledDots) {
  std::mt19937 rng(7);
  for (int heads : kHeadCounts)
    for (int n : kCounts)
      for (int dim : kDims) {
        const size_t q_stride = dim + 3, scores_stride = n + 5;
        const std::vector<float> q = random_values(heads * q_stride, rng);
        // Rows past n exist, as a cache's next tile does: the kernels may ask
        // for them ahead but must not use them.
        const std::vector<uint16_t> keys = random_halves(size_t(n + 3) * dim, rng);
        std::vector<float> scores(heads * scores_stride, -1.0f);
        attention_scores(q.data(), q_stride, heads, keys.data(), n, n + 3, dim, 0.125f, scores.data(), scores_stride);
        for (int g = 0; g < heads; ++g)
          for (int p = 0; p < n; ++p) {
            double expected = 0.0, magnitude = 0.0;
            for (int i = 0; i < dim; ++i) {
              const double product = double(q[g * q_stride + i]) * fp16_to_fp32(keys[size_t(p) * dim + i]);
              expected += product;
              magnitude += std::fabs(product);
            }
            ASSERT_NEAR(scores[g * scores_stride + p], 0.125 * expected, 0.125 * magnitude * 1e-6)
                << "heads " << heads << " n " << n << " dim " << dim << " g " << g << " p " << p;
          }
        for (int g = 0; g < heads; ++g)  // the gaps between rows stay untouched
          for (size_t p = n; p < scores_stride; ++p) ASSERT_EQ(scores[g * scores_stride + p], -1.0f);
      }
}

// A position's score has the same bits whichever block of positions and
// heads computes it: a decoded token must see the scores a prompt saw.
TEST_P(AttentionOps, ScoresDoNotDependOnTheirBlock) {
  std::mt19937 rng(17);
  const int n = 13, dim = 72, heads = 7;
  const std::vector<float> q = random_values(heads * dim, rng);
  const std::vector<uint16_t> keys = random_halves(size_t(n) * dim, rng);
  std::vector<float> all(heads * n);
  attention_scores(q.data(), dim, heads, keys.data(), n, n, dim, 0.3f, all.data(), n);
  for (int g = 0; g < heads; ++g)
    for (int p = 0; p < n; ++p) {
      float one;
      attention_scores(q.data() + g * dim, dim, 1, keys.data() + p * dim, 1, n - p, dim, 0.3f, &one, 1);
      ASSERT_EQ(one, all[g * n + p]) << "g " << g << " p " << p;
    }
}

TEST_P(AttentionOps, WeightedValuesMatchReference) {
  std::mt19937 rng(8);
  for (int heads : kHeadCounts)
    for (int n : kCounts)
      for (int dim : kDims) {
        // Rows longer than the values, as MLA's key rows are.
        const size_t w_stride = n + 2, out_stride = dim + 1, row_stride = dim + 3;
        const std::vector<float> w = random_values(heads * w_stride, rng);
        const std::vector<uint16_t> values = random_halves(size_t(n) * row_stride, rng);
        std::vector<float> out(heads * out_stride);
        for (size_t i = 0; i < out.size(); ++i) out[i] = 0.5f * (i % 17) - 3.0f;  // added to
        const std::vector<float> before = out;
        add_weighted_values(w.data(), w_stride, heads, values.data(), n, n, dim, row_stride, out.data(), out_stride);
        for (int g = 0; g < heads; ++g) {
          for (int i = 0; i < dim; ++i) {
            double expected = before[g * out_stride + i], magnitude = std::fabs(expected);
            for (int p = 0; p < n; ++p) {
              const double product = double(w[g * w_stride + p]) * fp16_to_fp32(values[size_t(p) * row_stride + i]);
              expected += product;
              magnitude += std::fabs(product);
            }
            ASSERT_NEAR(out[g * out_stride + i], expected, magnitude * 1e-6)
                << "heads " << heads << " n " << n << " dim " << dim << " g " << g << " i " << i;
          }
          ASSERT_EQ(out[g * out_stride + dim], before[g * out_stride + dim]);  // the gap between heads
        }
      }
}

// Flash attention's walk, as Model::attend takes it: scores a tile at a
// time, softmax_step's running max and sum, the output rescaled when the
// max grows and divided by the sum at the end. Whatever the tile, it gives
// softmax(scale q.k) v of a double-precision reference, also where the
// largest score comes late and every earlier tile must shrink.
TEST_P(AttentionOps, TiledOnlineSoftmaxMatchesFullAttention) {
  std::mt19937 rng(21);
  const int dim = 40, heads = 3;
  for (int n : {1, 7, 64, 130})
    for (int tile : {1, 8, 32, 200})
      for (float spread : {0.3f, 4.0f}) {
        const std::vector<float> q = random_values(heads * dim, rng, spread);
        std::vector<uint16_t> keys = random_halves(size_t(n) * dim, rng);
        const std::vector<uint16_t> values = random_halves(size_t(n) * dim, rng);
        // The last key the query's twin: its score dwarfs the others'.
        for (int i = 0; i < dim; ++i) keys[size_t(n - 1) * dim + i] = fp32_to_fp16(q[i]);
        const float scale = 0.5f;
        std::vector<float> scores(heads * tile), out(heads * dim, 0.0f), max(heads), sum(heads, 0.0f);
        for (int p0 = 0; p0 < n; p0 += tile) {
          const int count = std::min(tile, n - p0);
          attention_scores(q.data(), dim, heads, keys.data() + size_t(p0) * dim, count, n - p0, dim, scale,
                           scores.data(), tile);
          for (int g = 0; g < heads; ++g) {
            const float shrink = softmax_step(&scores[g * tile], count, max[g], sum[g]);
            for (int i = 0; i < dim; ++i) out[g * dim + i] *= shrink;
          }
          add_weighted_values(scores.data(), tile, heads, values.data() + size_t(p0) * dim, count, n - p0, dim, dim,
                              out.data(), dim);
        }
        for (int g = 0; g < heads; ++g) {
          std::vector<double> w(n);
          double best = -1e300, total = 0.0;
          for (int p = 0; p < n; ++p) {
            double dot = 0.0;
            for (int i = 0; i < dim; ++i) dot += double(q[g * dim + i]) * fp16_to_fp32(keys[size_t(p) * dim + i]);
            best = std::max(best, w[p] = scale * dot);
          }
          for (double& x : w) total += x = std::exp(x - best);
          EXPECT_NEAR(max[g], best, 1e-4 * std::fabs(best) + 1e-5) << "n " << n << " tile " << tile;
          for (int i = 0; i < dim; ++i) {
            double expected = 0.0;
            for (int p = 0; p < n; ++p) expected += w[p] / total * fp16_to_fp32(values[size_t(p) * dim + i]);
            ASSERT_NEAR(out[g * dim + i] / sum[g], expected, 2e-5)
                << "n " << n << " tile " << tile << " spread " << spread << " g " << g << " i " << i;
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Backends, AttentionOps, ::testing::ValuesIn(testing::supported_kernel_backends()),
                         [](const auto& info) { return std::string(kernel_backend_name(info.param)); });

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

// softmax_step over tiles ends with softmax's max and sum: each tile's
// values are e^(x - the max so far), and the returned factors carry the
// earlier tiles to the final max.
TEST(Ops, SoftmaxStepsCarryTheMaxAndSumAcrossTiles) {
  std::mt19937 rng(11);
  for (int n : {1, 9, 40, 130})
    for (int tile : {1, 3, 8, 64}) {
      const std::vector<float> x = random_values(n, rng, 5.0f);
      float max = 0.0f, sum = 0.0f;
      // Every earlier value's weight, carried as the max grows.
      std::vector<double> weights;
      for (int p0 = 0; p0 < n; p0 += tile) {
        const int count = std::min(tile, n - p0);
        std::vector<float> piece(x.begin() + p0, x.begin() + p0 + count);
        const float shrink = softmax_step(piece.data(), count, max, sum);
        if (p0 == 0) {
          EXPECT_EQ(shrink, 0.0f);
        }
        for (double& w : weights) w *= shrink;
        weights.insert(weights.end(), piece.begin(), piece.end());
      }
      const float best = *std::max_element(x.begin(), x.end());
      EXPECT_EQ(max, best) << "n " << n << " tile " << tile;
      double expected_sum = 0.0;
      for (float v : x) expected_sum += std::exp(double(v) - best);
      EXPECT_NEAR(sum, expected_sum, 1e-5 * expected_sum);
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(weights[i], std::exp(double(x[i]) - best), 2e-6) << "n " << n << " tile " << tile << " i " << i;
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
