// MXFP4 against values worked out by hand from the OCP microscaling spec:
// x = 2^(e - 127) * E2M1(code), E2M1 codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6
// and 8..15 their negatives; value j < 16 in the low nibble of byte j,
// value j + 16 in the high nibble.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace revis {
namespace {

constexpr float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// Codes 0..15 in the low nibbles and 15..0 in the high ones.
quant::BlockMXFP4 every_code(uint8_t e) {
  quant::BlockMXFP4 block{};
  block.e = e;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  return block;
}

std::vector<float> dequantized(const quant::BlockMXFP4& block) {
  std::vector<float> y(32);
  dequantize_row(TensorType::MXFP4, &block, y.data(), 32);
  return y;
}

TEST(Mxfp4, TypeIdAndGeometryMatchGguf) {
  const TypeTraits* traits = type_traits(39);
  ASSERT_NE(traits, nullptr);
  EXPECT_STREQ(traits->name, "MXFP4");
  EXPECT_EQ(traits->block_size, 32);
  EXPECT_EQ(traits->block_bytes, 17u);
  EXPECT_EQ(sizeof(quant::BlockMXFP4), 17u);
  EXPECT_EQ(activation_type(TensorType::MXFP4), TensorType::Q8_0);
}

TEST(Mxfp4, UnitScaleGivesTheE2M1Table) {
  const std::vector<float> y = dequantized(every_code(127));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kE2M1[j]) << "code " << j;
    EXPECT_EQ(y[j + 16], kE2M1[15 - j]) << "code " << 15 - j;
  }
}

TEST(Mxfp4, ExponentScalesByPowersOfTwo) {
  const std::vector<float> y = dequantized(every_code(130));  // 2^3
  EXPECT_EQ(y[1], 4.0f);    // 0.5 * 8
  EXPECT_EQ(y[7], 48.0f);   // 6 * 8
  EXPECT_EQ(y[13], -24.0f); // -3 * 8
  const std::vector<float> z = dequantized(every_code(120));  // 2^-7
  EXPECT_EQ(z[3], 1.5f / 128);
  EXPECT_EQ(z[14], -4.0f / 128);
}

TEST(Mxfp4, SmallestExponentsGiveSubnormals) {
  // e = 0: 2^-127 * 0.5 = 2^-128, a subnormal float, must not flush to zero.
  EXPECT_EQ(dequantized(every_code(0))[1], std::ldexp(1.0f, -128));
  EXPECT_EQ(dequantized(every_code(1))[7], std::ldexp(6.0f, -126));
  EXPECT_EQ(dequantized(every_code(1))[1], std::ldexp(1.0f, -127));
}

TEST(Mxfp4, LargestFiniteExponent) {
  EXPECT_EQ(dequantized(every_code(254))[1], std::ldexp(1.0f, 126));  // 0.5 * 2^127
  EXPECT_EQ(dequantized(every_code(254))[3], std::ldexp(1.5f, 127));
  // 2 * 2^127 is past the largest float: infinity, as in llama.cpp.
  EXPECT_TRUE(std::isinf(dequantized(every_code(254))[4]));
}

TEST(Mxfp4, RepresentableValuesSurviveARoundTrip) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[j] = kE2M1[j % 16] * 0.25f;           // e = 125
  for (int j = 32; j < 64; ++j) x[j] = kE2M1[(j * 7) % 16] * 1024.0f;  // e = 137
  std::vector<uint8_t> packed(row_bytes(TensorType::MXFP4, 64));
  quantize_row(TensorType::MXFP4, x.data(), packed.data(), 64);
  EXPECT_EQ(packed[0], 125);
  EXPECT_EQ(packed[17], 137);
  std::vector<float> y(64);
  dequantize_row(TensorType::MXFP4, packed.data(), y.data(), 64);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(std::fabs(y[j]), std::fabs(x[j])) << j;
}

TEST(Mxfp4, QuantizingZerosAndInfinitiesStaysDefined) {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> packed(17, 0xaa);
  quantize_row(TensorType::MXFP4, x.data(), packed.data(), 32);
  std::vector<float> y(32, 1.0f);
  dequantize_row(TensorType::MXFP4, packed.data(), y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  x[5] = INFINITY;
  quantize_row(TensorType::MXFP4, x.data(), packed.data(), 32);
  EXPECT_NE(packed[0], quant::kMxfp4InvalidExponent);
}

TEST(Mxfp4, ExponentFfIsTheInvalidBlock) {
  quant::BlockMXFP4 blocks[3] = {every_code(0), every_code(254), every_code(127)};
  EXPECT_EQ(first_invalid_block(TensorType::MXFP4, blocks, 96), -1);
  blocks[2].e = 0xff;
  EXPECT_EQ(first_invalid_block(TensorType::MXFP4, blocks, 96), 2);
  blocks[1].e = 0xff;
  EXPECT_EQ(first_invalid_block(TensorType::MXFP4, blocks, 96), 1);
  EXPECT_EQ(first_invalid_block(TensorType::MXFP4, blocks, 32), -1);  // only block 0 looked at
  // Other types have no invalid encoding to look for.
  const uint8_t ones[34] = {0xff, 0xff};
  EXPECT_EQ(first_invalid_block(TensorType::Q8_0, ones, 32), -1);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// llama.cpp's dequantization of 255 blocks (every valid exponent, every
// code), made by scripts/golden/mxfp4_reference.cpp: the same bits.
TEST(Mxfp4, DequantizesAsLlamaCppBitForBit) {
  const std::string dir = std::string(REVIS_REPO_TESTDATA_DIR) + "gpt-oss/quant/";
  const std::vector<uint8_t> blocks = read_file(dir + "mxfp4.bin"), expected = read_file(dir + "mxfp4.f32");
  ASSERT_EQ(blocks.size(), 255u * 17);
  ASSERT_EQ(expected.size(), 255u * 32 * sizeof(float));
  std::vector<float> y(255 * 32);
  dequantize_row(TensorType::MXFP4, blocks.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < y.size(); ++i) {
    uint32_t want, got;
    std::memcpy(&want, &expected[i * sizeof(float)], sizeof want);
    std::memcpy(&got, &y[i], sizeof got);
    ASSERT_EQ(got, want) << "value " << i << " (block " << i / 32 << ")";
  }
}

TEST(Mxfp4, DotAgainstQ8_0MatchesTheHandSum) {
  const quant::BlockMXFP4 w = every_code(128);  // values 2 * E2M1
  quant::BlockQ8_0 a{};
  a.d = fp32_to_fp16(0.5f);
  float expected = 0;
  for (int j = 0; j < 32; ++j) {
    a.qs[j] = static_cast<int8_t>(j - 16);
    const float wj = 2 * (j < 16 ? kE2M1[j] : kE2M1[31 - j]);
    expected += wj * 0.5f * static_cast<float>(j - 16);
  }
  EXPECT_EQ(vec_dot(TensorType::MXFP4, &w, &a, 32), expected);
}

}  // namespace
}  // namespace revis
