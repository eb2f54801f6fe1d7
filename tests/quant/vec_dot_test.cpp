// vec_dot against the float dot product of the same two rows dequantized:
// both see exactly the same numbers, so they may differ only by float
// rounding in the accumulation, never by an integer-path or scale mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quant/quant.h"
#include "quant/test_util.h"

namespace revis {
namespace {

using quant_test::gaussian;

// |vec_dot - exact| <= kTolerance * sum |w_i a_i|. vec_dot rounds once per
// block (the float scale product and the running sum), about 2^-24 relative
// each; the worst measured over 19 seeds and 1..16 blocks is 6.4e-8, so
// 1e-6 leaves a 15x margin while any wrong scale, offset or level shows up
// at 1e-3 or more.
constexpr double kTolerance = 1e-6;

struct Rows {
  std::vector<uint8_t> w, a;
  std::vector<float> w_values, a_values;  // as dequantized
};

Rows make_rows(TensorType w_type, int64_t n, uint32_t seed, float w_mean, float a_mean) {
  const TensorType a_type = activation_type(w_type);
  std::vector<float> w = gaussian(static_cast<size_t>(n), seed);
  std::vector<float> a = gaussian(static_cast<size_t>(n), seed + 1000);
  for (float& v : w) v += w_mean;
  for (float& v : a) v += a_mean;
  Rows rows;
  rows.w.resize(row_bytes(w_type, n));
  rows.a.resize(row_bytes(a_type, n));
  quantize_row(w_type, w.data(), rows.w.data(), n);
  quantize_row(a_type, a.data(), rows.a.data(), n);
  rows.w_values.resize(static_cast<size_t>(n));
  rows.a_values.resize(static_cast<size_t>(n));
  dequantize_row(w_type, rows.w.data(), rows.w_values.data(), n);
  dequantize_row(a_type, rows.a.data(), rows.a_values.data(), n);
  return rows;
}

class VecDot : public ::testing::TestWithParam<TensorType> {};

TEST_P(VecDot, MatchesDotOfDequantizedRows) {
  const TensorType type = GetParam();
  const int64_t block = quant_test::block_size(type);
  std::vector<int64_t> lengths = {1 * block, 2 * block, 7 * block};
  if (block == 1) lengths.push_back(4099);  // float rows: any length, odd tails included
  // Nonzero means exercise the offset terms (Q4_1's m against the
  // activation sum, the K-quants' minimums against Q8_K's group sums).
  const float means[][2] = {{0.0f, 0.0f}, {0.4f, -0.3f}, {-0.2f, 0.6f}};
  uint32_t seed = 1;
  for (int64_t n : lengths) {
    for (const auto& mean : means) {
      const Rows rows = make_rows(type, n, seed++, mean[0], mean[1]);
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double product = static_cast<double>(rows.w_values[i]) * rows.a_values[i];
        exact += product;
        magnitude += std::fabs(product);
      }
      const float got = vec_dot(type, rows.w.data(), rows.a.data(), n);
      EXPECT_NEAR(got, exact, kTolerance * magnitude) << "n " << n << " means " << mean[0] << ", " << mean[1];
    }
  }
}

TEST_P(VecDot, ZeroWeightsGiveZero) {
  const TensorType type = GetParam();
  const int64_t n = 2 * std::max<int64_t>(quant_test::block_size(type), 32);
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  const std::vector<float> a = gaussian(static_cast<size_t>(n), 3);
  std::vector<uint8_t> wq(row_bytes(type, n)), aq(row_bytes(activation_type(type), n));
  quantize_row(type, zeros.data(), wq.data(), n);
  quantize_row(activation_type(type), a.data(), aq.data(), n);
  EXPECT_EQ(vec_dot(type, wq.data(), aq.data(), n), 0.0f);
}

// End to end against the unquantized rows: the error is what quantizing
// both rows costs, so it is bounded by the formats' accuracy, here loosely
// (10% of sqrt(sum w^2 * sum a^2), far above Q2_K's ~3% on these rows).
TEST_P(VecDot, ApproximatesTheFloatDot) {
  const TensorType type = GetParam();
  const int64_t n = 8 * std::max<int64_t>(quant_test::block_size(type), 32);
  const std::vector<float> w = gaussian(static_cast<size_t>(n), 21);
  const std::vector<float> a = gaussian(static_cast<size_t>(n), 22);
  std::vector<uint8_t> wq(row_bytes(type, n)), aq(row_bytes(activation_type(type), n));
  quantize_row(type, w.data(), wq.data(), n);
  quantize_row(activation_type(type), a.data(), aq.data(), n);
  double exact = 0, ww = 0, aa = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += static_cast<double>(w[i]) * a[i];
    ww += static_cast<double>(w[i]) * w[i];
    aa += static_cast<double>(a[i]) * a[i];
  }
  EXPECT_NEAR(vec_dot(type, wq.data(), aq.data(), n), exact, 0.1 * std::sqrt(ww * aa));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, VecDot, ::testing::ValuesIn(quant_test::quantizable_types()),
                         quant_test::TypeName());

}  // namespace
}  // namespace revis
