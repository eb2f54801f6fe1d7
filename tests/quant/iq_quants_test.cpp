// The IQ1/IQ2/IQ3 grid types beyond the golden files: the grids themselves
// (every point, where the golden rows reach only some), the sign rule, and
// vec_dot against the float dot of the same rows dequantized.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "quant/iq_grids.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace revis {
namespace {

// FNV-1a over the table's bytes as stored in memory (little-endian words).
template <typename Table>
uint64_t fingerprint(const Table& table) {
  std::vector<uint8_t> bytes(sizeof(table[0]) * table.size());
  std::memcpy(bytes.data(), table.data(), bytes.size());
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
  return hash;
}

// The fingerprints of ggml-common.h's iq2xxs_grid .. iq1s_grid, taken from
// llama.cpp's tables: a point transcribed wrong changes them.
TEST(IqGrids, MatchGgmlTables) {
  if constexpr (std::endian::native != std::endian::little) GTEST_SKIP() << "fingerprints are of little-endian words";
  EXPECT_EQ(fingerprint(quant::kGridIq2Xxs), 0xbb4ee025b5ac6e8eull);
  EXPECT_EQ(fingerprint(quant::kGridIq2Xs), 0xc9b1ee61e79909bdull);
  EXPECT_EQ(fingerprint(quant::kGridIq2S), 0x123edd38a3b62b90ull);
  EXPECT_EQ(fingerprint(quant::kGridIq3Xxs), 0xdfa5dc83d6a155d5ull);
  EXPECT_EQ(fingerprint(quant::kGridIq3S), 0xfa37020c25b44829ull);
  EXPECT_EQ(fingerprint(quant::kGridIq1S), 0x6703ed863501ae2eull);
}

TEST(IqGrids, PointsAreDistinct) {
  auto distinct = [](auto table) {
    std::sort(table.begin(), table.end());
    return std::adjacent_find(table.begin(), table.end()) == table.end();
  };
  EXPECT_TRUE(distinct(quant::kGridIq2Xxs));
  EXPECT_TRUE(distinct(quant::kGridIq2Xs));
  EXPECT_TRUE(distinct(quant::kGridIq2S));
  EXPECT_TRUE(distinct(quant::kGridIq3Xxs));
  EXPECT_TRUE(distinct(quant::kGridIq3S));
  EXPECT_TRUE(distinct(quant::kGridIq1S));
}

TEST(IqGrids, SignFieldsHaveAnEvenNumberOfMinuses) {
  for (unsigned seven = 0; seven < 128; ++seven) {
    const uint8_t signs = quant::sign_bits(seven);
    EXPECT_EQ(signs & 127, seven);
    EXPECT_EQ(std::popcount(signs) % 2, 0) << seven;
  }
  EXPECT_EQ(quant::sign_bits(1), 129);  // one minus in the stored bits: the eighth value is negative too
}

// All are read; IQ3_XXS and IQ3_S are also written without importance
// (weighted_quantize_test covers the quantizers).
TEST(IqTypes, AreReadAndOnlyIq3Written) {
  for (TensorType type : quant_test::grid_types()) {
    EXPECT_TRUE(can_dequantize(type)) << type_name(type);
    EXPECT_EQ(can_quantize(type), type == TensorType::IQ3_XXS || type == TensorType::IQ3_S) << type_name(type);
    EXPECT_EQ(activation_type(type), TensorType::Q8_K) << type_name(type);
    EXPECT_EQ(type_traits(type).block_size, 256) << type_name(type);
    EXPECT_EQ(type_from_name(type_name(type)), type) << type_name(type);
  }
}

TEST(IqTypesDeathTest, QuantizingOneAbortsSayingWhy) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(256);
  EXPECT_DEATH(quantize_row(TensorType::IQ2_XXS, x.data(), out.data(), 256), "needs an importance matrix");
  EXPECT_DEATH(quantize_row(TensorType::IQ1_S, x.data(), out.data(), 256), "needs an importance matrix");
  EXPECT_DEATH(quantize_row_with_importance(TensorType::Q6_K, x.data(), out.data(), 256, x.data()), "no quantizer");
}

class GridVecDot : public ::testing::TestWithParam<TensorType> {};

// Random blocks (every point, sign and scale pattern) against Gaussian
// activations, with and without an offset (IQ1's delta meets the sum of the
// activations). Bound as in vec_dot_test: float rounding only.
TEST_P(GridVecDot, MatchesDotOfDequantizedRows) {
  const TensorType type = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(type));
  uint32_t seed = 1;
  for (int blocks : {1, 2, 7}) {
    const int64_t n = 256 * blocks;
    for (float mean : {0.0f, 0.5f}) {
      const std::vector<uint8_t> w = quant_test::random_grid_row(type, n, rng);
      std::vector<float> a = quant_test::gaussian(static_cast<size_t>(n), seed++);
      for (float& v : a) v += mean;
      std::vector<uint8_t> aq(row_bytes(TensorType::Q8_K, n));
      quantize_row(TensorType::Q8_K, a.data(), aq.data(), n);
      std::vector<float> w_values(static_cast<size_t>(n)), a_values(static_cast<size_t>(n));
      dequantize_row(type, w.data(), w_values.data(), n);
      dequantize_row(TensorType::Q8_K, aq.data(), a_values.data(), n);
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double product = static_cast<double>(w_values[i]) * a_values[i];
        exact += product;
        magnitude += std::fabs(product);
      }
      EXPECT_NEAR(vec_dot(type, w.data(), aq.data(), n), exact, 1e-6 * magnitude) << "n " << n << " mean " << mean;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GridTypes, GridVecDot, ::testing::ValuesIn(quant_test::grid_types()),
                         quant_test::TypeName());

}  // namespace
}  // namespace revis
