// The 32-value block formats: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. Q8_0 is also
// the activation format the dot products of this family (and IQ4_NL's) run
// against.
//
// Each block is first unpacked to 32 small integers; dequantization and dot
// products then run straight loops over them. The float expressions
// (q * d, q * d + m) are written in the order GGUF's reference decoder uses,
// which is what makes dequantization bit-exact.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/kernels.h"

namespace revis::quant {
namespace {

constexpr int kBlock = kLegacyBlock;

// Value j < 16 is in the low nibble of byte j, value j + 16 in its high one.
void unpack_nibbles(const uint8_t* qs, int* q) {
  for (int j = 0; j < kBlock / 2; ++j) {
    q[j] = qs[j] & 0x0f;
    q[j + kBlock / 2] = qs[j] >> 4;
  }
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kBlock / 2] & 0x0f) << 4));
}

// Adds bit 4 of value j, stored as bit j of the little-endian word qh.
void add_fifth_bits(const uint8_t* qh, int* q) {
  for (int j = 0; j < kBlock; ++j) q[j] |= ((qh[j / 8] >> (j % 8)) & 1) << 4;
}

void pack_fifth_bits(const int* q, uint8_t* qh) {
  std::fill(qh, qh + 4, uint8_t{0});
  for (int j = 0; j < kBlock; ++j) qh[j / 8] |= static_cast<uint8_t>(((q[j] >> 4) & 1) << (j % 8));
}

// The signed value of largest magnitude: the symmetric formats map it to
// their long end (-8, -16) so the block spends no level on the other sign.
float signed_extreme(const float* x) {
  float extreme = 0;
  for (int j = 0; j < kBlock; ++j)
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
  return extreme;
}

void min_max(const float* x, float& low, float& high) {
  low = x[0];
  high = x[0];
  for (int j = 1; j < kBlock; ++j) {
    low = std::fmin(low, x[j]);
    high = std::fmax(high, x[j]);
  }
}

// Levels are chosen against the scale as stored (rounded to half), not the
// exact one, so the decoder's grid is the one that was rounded to.
float inverse_of(uint16_t scale_bits) {
  const float d = half_to_float(scale_bits);
  return d != 0 ? 1.0f / d : 0.0f;
}

// Sum of the activation block's integers: Q4_1/Q5_1's offset m multiplies
// every activation, so it needs d_a * sum(a) once per block.
int sum_of(const int8_t* a) {
  int sum = 0;
  for (int j = 0; j < kBlock; ++j) sum += a[j];
  return sum;
}

int dot_of(const int* q, const int8_t* a) {
  int sum = 0;
  for (int j = 0; j < kBlock; ++j) sum += q[j] * a[j];
  return sum;
}

// Shared shape of the symmetric formats: x = d * (q - bias), q unsigned.
template <typename Block, bool kHasFifthBit>
void dequantize_symmetric(const void* src, float* dst, int64_t n, int bias) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int q[kBlock];
    unpack_nibbles(blocks[b].qs, q);
    if constexpr (kHasFifthBit) add_fifth_bits(blocks[b].qh, q);
    const float d = half_to_float(blocks[b].d);
    float* y = dst + b * kBlock;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] - bias) * d;
  }
}

template <typename Block, bool kHasFifthBit>
void quantize_symmetric(const float* src, void* dst, int64_t n, int bias) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    blocks[b].d = encode_scale(signed_extreme(x) / static_cast<float>(-bias));
    const float inverse = inverse_of(blocks[b].d);
    int q[kBlock];
    for (int j = 0; j < kBlock; ++j) q[j] = quantize_clamped(x[j] * inverse, -bias, bias - 1) + bias;
    pack_nibbles(q, blocks[b].qs);
    if constexpr (kHasFifthBit) pack_fifth_bits(q, blocks[b].qh);
  }
}

template <typename Block, bool kHasFifthBit>
float dot_symmetric(const void* w, const void* a, int64_t n, int bias) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int q[kBlock];
    unpack_nibbles(wb[b].qs, q);
    if constexpr (kHasFifthBit) add_fifth_bits(wb[b].qh, q);
    for (int j = 0; j < kBlock; ++j) q[j] -= bias;
    const int integer_dot = dot_of(q, ab[b].qs);
    sum += static_cast<float>(integer_dot) * (half_to_float(wb[b].d) * half_to_float(ab[b].d));
  }
  return sum;
}

// Shared shape of the offset formats: x = d * q + m, q unsigned < 2^bits.
template <typename Block, bool kHasFifthBit>
void dequantize_offset(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int q[kBlock];
    unpack_nibbles(blocks[b].qs, q);
    if constexpr (kHasFifthBit) add_fifth_bits(blocks[b].qh, q);
    const float d = half_to_float(blocks[b].d);
    const float m = half_to_float(blocks[b].m);
    float* y = dst + b * kBlock;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

template <typename Block, bool kHasFifthBit>
void quantize_offset(const float* src, void* dst, int64_t n) {
  constexpr int kMaxLevel = kHasFifthBit ? 31 : 15;
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    float low, high;
    min_max(x, low, high);
    blocks[b].d = encode_scale((high - low) / kMaxLevel);
    blocks[b].m = encode_scale(low);
    const float inverse = inverse_of(blocks[b].d);
    const float m = half_to_float(blocks[b].m);
    int q[kBlock];
    for (int j = 0; j < kBlock; ++j) q[j] = quantize_clamped((x[j] - m) * inverse, 0, kMaxLevel);
    pack_nibbles(q, blocks[b].qs);
    if constexpr (kHasFifthBit) pack_fifth_bits(q, blocks[b].qh);
  }
}

template <typename Block, bool kHasFifthBit>
float dot_offset(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int q[kBlock];
    unpack_nibbles(wb[b].qs, q);
    if constexpr (kHasFifthBit) add_fifth_bits(wb[b].qh, q);
    const float da = half_to_float(ab[b].d);
    const int integer_dot = dot_of(q, ab[b].qs);
    const float activation_sum = da * static_cast<float>(sum_of(ab[b].qs));
    sum += static_cast<float>(integer_dot) * (half_to_float(wb[b].d) * da) +
           half_to_float(wb[b].m) * activation_sum;
  }
  return sum;
}

}  // namespace

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  dequantize_symmetric<BlockQ4_0, false>(src, dst, n, 8);
}
void quantize_q4_0(const float* src, void* dst, int64_t n) {
  quantize_symmetric<BlockQ4_0, false>(src, dst, n, 8);
}
float dot_q4_0(const void* w, const void* a, int64_t n) { return dot_symmetric<BlockQ4_0, false>(w, a, n, 8); }

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  dequantize_symmetric<BlockQ5_0, true>(src, dst, n, 16);
}
void quantize_q5_0(const float* src, void* dst, int64_t n) {
  quantize_symmetric<BlockQ5_0, true>(src, dst, n, 16);
}
float dot_q5_0(const void* w, const void* a, int64_t n) { return dot_symmetric<BlockQ5_0, true>(w, a, n, 16); }

void dequantize_q4_1(const void* src, float* dst, int64_t n) { dequantize_offset<BlockQ4_1, false>(src, dst, n); }
void quantize_q4_1(const float* src, void* dst, int64_t n) { quantize_offset<BlockQ4_1, false>(src, dst, n); }
float dot_q4_1(const void* w, const void* a, int64_t n) { return dot_offset<BlockQ4_1, false>(w, a, n); }

void dequantize_q5_1(const void* src, float* dst, int64_t n) { dequantize_offset<BlockQ5_1, true>(src, dst, n); }
void quantize_q5_1(const float* src, void* dst, int64_t n) { quantize_offset<BlockQ5_1, true>(src, dst, n); }
float dot_q5_1(const void* w, const void* a, int64_t n) { return dot_offset<BlockQ5_1, true>(w, a, n); }

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float d = half_to_float(blocks[b].d);
    float* y = dst + b * kBlock;
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(blocks[b].qs[j]) * d;
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    float max_abs = 0;
    for (int j = 0; j < kBlock; ++j) max_abs = std::fmax(max_abs, std::fabs(x[j]));
    blocks[b].d = encode_scale(max_abs / 127.0f);
    // Unlike the 4/5-bit formats, the levels use the exact scale, not the
    // stored half: Q8_0 is also the activation format of the matmuls, and
    // this is the arithmetic llama.cpp uses, so our logits track its own.
    const float inverse = max_abs != 0 ? 127.0f / max_abs : 0.0f;
    for (int j = 0; j < kBlock; ++j) blocks[b].qs[j] = static_cast<int8_t>(quantize_clamped(x[j] * inverse, -127, 127));
  }
}

float dot_q8_0(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int integer_dot = 0;
    for (int j = 0; j < kBlock; ++j) integer_dot += wb[b].qs[j] * ab[b].qs[j];
    sum += static_cast<float>(integer_dot) * (half_to_float(wb[b].d) * half_to_float(ab[b].d));
  }
  return sum;
}

}  // namespace revis::quant
