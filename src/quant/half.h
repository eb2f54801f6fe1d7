// IEEE binary16 ("half") and bfloat16 <-> binary32 conversions, inline so
// the row kernels' loops can vectorise them. Pure bit manipulation: results
// do not depend on the compiler, F16C support or the rounding mode. Float
// -> half and float -> bf16 round to nearest, ties to even, as hardware
// converters do. (half_to_float multiplies a subnormal float, so it assumes
// the default floating-point environment: no flush-to-zero.)
//
// Internal to src/quant; quant.h exports them as fp16_to_fp32 and friends.
#pragma once

#include <bit>
#include <cstdint>

namespace revis::quant {

inline float half_to_float(uint16_t h) {
  // Moving the half's exponent and mantissa to the top of a float's fields
  // gives a float that is the half's value times 2^-112 (the difference of
  // the exponent biases, 127 - 15), for normal and subnormal halves alike;
  // one exact multiply restores the value. Only inf/NaN need their exponent
  // widened by hand. No branches, so loops over rows vectorise.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const bool inf_or_nan = (h & 0x7c00u) == 0x7c00u;
  const float rebias = 0x1p112f;
  float value = std::bit_cast<float>(magnitude) * rebias;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  bits = inf_or_nan ? (magnitude | 0x7f800000u) : bits;
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t float_to_half(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  const uint32_t mantissa = bits & 0x7fffffu;

  if (exponent == 0xff) {
    if (mantissa == 0) return sign | 0x7c00u;
    // Keep the NaN's top payload bits, and force it quiet so the payload
    // can never shrink to zero and turn the NaN into an infinity.
    return static_cast<uint16_t>(sign | 0x7e00u | (mantissa >> 13));
  }
  // 2^16 and above is beyond the largest half (65504) even before rounding.
  if (exponent >= 127 + 16) return sign | 0x7c00u;

  // Shift the 24-bit significand right so that its unit becomes the half's
  // last place, then round the bits shifted out (to nearest, ties to even).
  // A rounding carry may ripple into the exponent field; that is right, up
  // to and including overflow to infinity.
  uint32_t significand;
  uint32_t shift;
  uint32_t base;  // exponent field of the result before rounding, pre-shifted
  if (exponent >= 127 - 14) {
    significand = mantissa;  // implicit 1 is carried by the exponent field
    shift = 13;
    base = (exponent - (127 - 15)) << 10;
  } else {
    // Subnormal half (or zero): value = significand * 2^(exponent - 150),
    // unit 2^-24, so shift by 126 - exponent. Past 24 bits everything is
    // below half a unit and rounds to zero.
    if (exponent < 127 - 25) return sign;
    significand = mantissa | 0x800000u;
    shift = 126 - exponent;
    base = 0;
  }
  const uint32_t kept = significand >> shift;
  const uint32_t dropped = significand & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t round_up = (dropped > halfway || (dropped == halfway && (kept & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | (base + kept + round_up));
}

inline float bfloat_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bfloat(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Truncating a NaN could leave an all-zero mantissa (infinity): force quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding just under half of the dropped unit, plus the kept lsb, rounds
  // to nearest with ties to even; a carry into the exponent is correct.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace revis::quant
