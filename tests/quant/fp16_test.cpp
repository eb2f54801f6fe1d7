// Half and bfloat16 conversions: exhaustive over every 16-bit pattern.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "quant/quant.h"

namespace revis {
namespace {

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0; }

// The value a half encodes, computed the long way from its fields.
double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

TEST(Fp16, DecodesEveryHalfExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const double expected = half_value(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(half));
    if (is_half_nan(half)) {
      ASSERT_TRUE(is_half_nan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, half & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, half) << std::hex << h;
    }
  }
}

// For each pair of neighbouring finite halves of one sign: their midpoint
// rounds to the even one, and the floats just either side of it round to
// the nearer. This pins round-to-nearest-even everywhere, subnormals and the
// normal/subnormal boundary included.
TEST(Fp16, RoundsToNearestEvenBetweenEveryPair) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t low = 0; low < 0x7bff; ++low) {
      const auto high = static_cast<uint16_t>(low + 1);
      const float a = fp16_to_fp32(low | sign);
      const float b = fp16_to_fp32(high | sign);
      const float mid = (a + b) / 2;  // exact: needs one bit more than a half has
      const uint16_t even = (low & 1) ? high : low;
      ASSERT_EQ(fp32_to_fp16(mid), even | sign) << std::hex << low;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, a)), low | sign) << std::hex << low;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, b)), high | sign) << std::hex << low;
    }
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(fp32_to_fp16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);           // largest half
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);         // just under the overflow midpoint
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);           // midpoint, ties to even = infinity
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e30f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);           // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);           // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);           // half of it: ties to even = 0
  EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);    // a hair above rounds up
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);           // 1.5 units: ties to even = 2
  EXPECT_EQ(fp32_to_fp16(1e-10f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);    // tie, 0x3c00 is even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x3p-11f), 0x3c02);    // tie, 0x3c02 is even
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);       // subnormal rounding carries into normal
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in bits a half drops must stay NaN.
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::bit_cast<float>(0xff800001u))));
}

TEST(Bf16, EveryBf16RoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto bf = static_cast<uint16_t>(h);
    const float f = bf16_to_fp32(bf);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16);  // bf16 is the top half of a float
    const uint16_t back = fp32_to_bf16(f);
    if (is_bf16_nan(bf)) {
      ASSERT_TRUE(is_bf16_nan(back)) << std::hex << h;
    } else {
      ASSERT_EQ(back, bf) << std::hex << h;
    }
  }
}

TEST(Bf16, RoundsToNearestEvenBetweenEveryPair) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t low = 0; low < 0x7f7f; ++low) {
      const auto high = static_cast<uint16_t>(low + 1);
      // The midpoint is the float with the dropped half set to 0x8000.
      const float mid = std::bit_cast<float>((static_cast<uint32_t>(low | sign) << 16) | 0x8000u);
      const uint16_t even = (low & 1) ? high : low;
      ASSERT_EQ(fp32_to_bf16(mid), even | sign) << std::hex << low;
      ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>(std::bit_cast<uint32_t>(mid) - 1)), low | sign) << std::hex << low;
      ASSERT_EQ(fp32_to_bf16(std::bit_cast<float>(std::bit_cast<uint32_t>(mid) + 1)), high | sign) << std::hex << low;
    }
  }
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x3p-8f), 0x3f82);  // tie, rounds up to even
  EXPECT_EQ(fp32_to_bf16(3.0e38f), 0x7f62);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(is_bf16_nan(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_bf16_nan(fp32_to_bf16(std::bit_cast<float>(0x7f800001u))));
}

}  // namespace
}  // namespace revis
