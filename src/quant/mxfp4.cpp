// MXFP4 (32-value blocks, activations in Q8_0): OCP microscaling FP4, one
// power-of-two scale per block over 4-bit E2M1 codes. The kernels work on
// the codes doubled (kMxfp4Values), which are integers, and fold the
// halving into the scale (mxfp4_scale).
//
// Quantizing tries the two exponents around the block's largest magnitude
// (the one that fits it, and the one below it, which clips it but resolves
// the rest more finely) and keeps the one with the smaller squared error.
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/kernels.h"

namespace revis::quant {
namespace {

constexpr int kBlock = kLegacyBlock;
constexpr int kLargestLevel = 12;  // kMxfp4Values' largest magnitude
constexpr int kLargestExponent = 0xfe;

// Q4_0's nibble order: value j < 16 in the low nibble of byte j, j + 16 high.
void unpack_levels(const uint8_t* qs, int* level) {
  for (int j = 0; j < kBlock / 2; ++j) {
    level[j] = kMxfp4Values[qs[j] & 0x0f];
    level[j + kBlock / 2] = kMxfp4Values[qs[j] >> 4];
  }
}

// The code whose value times `scale` is nearest v (the first on a tie).
uint8_t nearest_code(float v, float scale) {
  uint8_t best = 0;
  float best_error = std::fabs(v);
  for (uint8_t code = 1; code < 16; ++code) {
    const float error = std::fabs(static_cast<float>(kMxfp4Values[code]) * scale - v);
    if (error < best_error) {
      best = code;
      best_error = error;
    }
  }
  return best;
}

double block_error(const float* x, float scale, uint8_t* code) {
  double error = 0;
  for (int j = 0; j < kBlock; ++j) {
    code[j] = nearest_code(x[j], scale);
    const double diff = static_cast<double>(kMxfp4Values[code[j]]) * scale - x[j];
    error += diff * diff;
  }
  return error;
}

// The smallest exponent whose scale puts `magnitude` within the largest
// level, clamped to the valid exponents.
int fitting_exponent(float magnitude) {
  if (!(magnitude > 0)) return 0;
  if (!std::isfinite(magnitude)) return kLargestExponent;
  int power = 0;
  const float mantissa = std::frexp(magnitude / kLargestLevel, &power);  // in [0.5, 1)
  const int ceiling_log2 = mantissa == 0.5f ? power - 1 : power;
  const int e = ceiling_log2 + 128;
  return e < 0 ? 0 : (e > kLargestExponent ? kLargestExponent : e);
}

}  // namespace

void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int level[kBlock];
    unpack_levels(blocks[b].qs, level);
    const float scale = mxfp4_scale(blocks[b].e);
    float* y = dst + b * kBlock;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(level[j]) * scale;
  }
}

void quantize_mxfp4(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockMXFP4*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    float magnitude = 0;
    for (int j = 0; j < kBlock; ++j) magnitude = std::fmax(magnitude, std::fabs(x[j]));
    const int fitting = fitting_exponent(magnitude);
    uint8_t code[kBlock], finer[kBlock];
    double error = block_error(x, mxfp4_scale(static_cast<uint8_t>(fitting)), code);
    int e = fitting;
    if (fitting > 0 && block_error(x, mxfp4_scale(static_cast<uint8_t>(fitting - 1)), finer) < error) {
      e = fitting - 1;
      for (int j = 0; j < kBlock; ++j) code[j] = finer[j];
    }
    blocks[b].e = static_cast<uint8_t>(e);
    for (int j = 0; j < kBlock / 2; ++j) blocks[b].qs[j] = static_cast<uint8_t>(code[j] | (code[j + kBlock / 2] << 4));
  }
}

int64_t first_invalid_mxfp4_block(const void* src, int64_t n) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b)
    if (blocks[b].e == kMxfp4InvalidExponent) return b;
  return -1;
}

float dot_mxfp4(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockMXFP4*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int level[kBlock];
    unpack_levels(wb[b].qs, level);
    int integer_dot = 0;
    for (int j = 0; j < kBlock; ++j) integer_dot += level[j] * ab[b].qs[j];
    sum += static_cast<float>(integer_dot) * (mxfp4_scale(wb[b].e) * half_to_float(ab[b].d));
  }
  return sum;
}

}  // namespace revis::quant
