// The per-type row kernels behind quant.h, one family per source file, and
// the few helpers they share. dispatch.cpp maps TensorType to these.
//
// Every kernel takes n = values in the row, a multiple of its block size
// (checked by dispatch.cpp), and raw pointers to whole blocks.
//
// Internal to src/quant.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "quant/half.h"

namespace revis::quant {

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
// importance: n weights, one per value, of each value's squared error (a row
// of an importance matrix); null weighs every value alike.
using QuantizeWeightedFn = void (*)(const float* src, void* dst, int64_t n, const float* importance);
using DotFn = float (*)(const void* w, const void* a, int64_t n);
// out[k] = dot(w, a + k * a_stride) for k = 0..3: one weight row against
// four activation rows (a_stride bytes apart), each weight block unpacked
// once for all four.
using Dot4Fn = void (*)(const void* w, const void* a, size_t a_stride, int64_t n, float* out);

// v rounded to the nearest integer (ties to even, the default rounding mode)
// and clamped to [lo, hi]. Clamping first keeps the conversion defined for
// any input: fmin/fmax send NaN to a bound and infinities to the ends.
inline int quantize_clamped(float v, int lo, int hi) {
  const float clamped = std::fmax(static_cast<float>(lo), std::fmin(static_cast<float>(hi), v));
  return static_cast<int>(std::nearbyint(clamped));
}

// A block scale as stored: a half, saturated at the largest finite half
// rather than overflowing to infinity, so that inputs beyond a format's
// range degrade to clipped values instead of inf/NaN; and a nonzero scale
// never rounds to zero but to the smallest subnormal, so that a block of
// tiny values keeps what it can instead of vanishing (the integer scales
// and levels are then chosen against that stored value).
inline uint16_t encode_scale(float d) {
  constexpr float kMaxHalf = 65504.0f;
  const uint16_t bits = float_to_half(std::fmax(-kMaxHalf, std::fmin(kMaxHalf, d)));
  constexpr uint16_t kSmallestSubnormal = 0x0001;
  if ((bits & 0x7fffu) == 0 && d != 0) return static_cast<uint16_t>(bits | kSmallestSubnormal);
  return bits;
}

// Rounding the super-block scale to half and the group scales to integers
// interact: a neighbouring half can let the integers fit much better, above
// all when the scale is subnormal (weights of magnitude ~1e-2 and below put
// Q6_K's d there) and has only a few significant bits.
inline constexpr int kNeighbourSteps[] = {-2, -1, 1, 2};

// The half `steps` representable values away from `bits` in magnitude,
// same sign; `bits` itself if that would reach zero or infinity.
inline uint16_t neighbour_half(uint16_t bits, int steps) {
  const int magnitude = (bits & 0x7fff) + steps;
  if (magnitude < 1 || magnitude > 0x7bff) return bits;
  return static_cast<uint16_t>((bits & 0x8000) | magnitude);
}

// sum over the groups g of n values of scale[g] * sum_{i in g} level[i] * a[i],
// in integers: the core of the super-block dot products against Q8_K (the
// caller bounds the sums inside int32).
template <typename Level>
int scaled_group_dot(const Level* level, const int8_t* a, const int* scale, int group_size, int n) {
  int sum = 0;
  for (int g = 0; g < n / group_size; ++g) {
    int group_dot = 0;
    for (int i = g * group_size; i < (g + 1) * group_size; ++i) group_dot += level[i] * a[i];
    sum += scale[g] * group_dot;
  }
  return sum;
}

// A QuantizeFn from a QuantizeWeightedFn: every value weighed alike.
template <QuantizeWeightedFn quantize>
void quantize_uniform(const float* src, void* dst, int64_t n) {
  quantize(src, dst, n, nullptr);
}

// float_types.cpp: plain floats. Activations are the same type as weights.
void dequantize_f32(const void* src, float* dst, int64_t n);
void quantize_f32(const float* src, void* dst, int64_t n);
float dot_f32(const void* w, const void* a, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
float dot_f16(const void* w, const void* a, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
float dot_bf16(const void* w, const void* a, int64_t n);

// legacy_quants.cpp: 32-value blocks, activations in Q8_0.
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
float dot_q4_0(const void* w, const void* a, int64_t n);
void dequantize_q4_1(const void* src, float* dst, int64_t n);
void quantize_q4_1(const float* src, void* dst, int64_t n);
float dot_q4_1(const void* w, const void* a, int64_t n);
void dequantize_q5_0(const void* src, float* dst, int64_t n);
void quantize_q5_0(const float* src, void* dst, int64_t n);
float dot_q5_0(const void* w, const void* a, int64_t n);
void dequantize_q5_1(const void* src, float* dst, int64_t n);
void quantize_q5_1(const float* src, void* dst, int64_t n);
float dot_q5_1(const void* w, const void* a, int64_t n);
void dequantize_q8_0(const void* src, float* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
float dot_q8_0(const void* w, const void* a, int64_t n);

// k_quants.cpp: 256-value super-blocks, activations in Q8_K.
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void quantize_q2_k(const float* src, void* dst, int64_t n, const float* importance);
float dot_q2_k(const void* w, const void* a, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n, const float* importance);
float dot_q3_k(const void* w, const void* a, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
float dot_q4_k(const void* w, const void* a, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
float dot_q5_k(const void* w, const void* a, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
float dot_q6_k(const void* w, const void* a, int64_t n);
void dequantize_q8_k(const void* src, float* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);
float dot_q8_k(const void* w, const void* a, int64_t n);
// Q4_K's and Q5_K's eight 6-bit scales and minimums from their 12 bytes.
void unpack_scales_6bit(const uint8_t* s, int* scale, int* min);

// iq4.cpp: the non-uniform 4-bit codebook types.
void dequantize_iq4_nl(const void* src, float* dst, int64_t n);
void quantize_iq4_nl(const float* src, void* dst, int64_t n);
float dot_iq4_nl(const void* w, const void* a, int64_t n);  // against Q8_0
void dequantize_iq4_xs(const void* src, float* dst, int64_t n);
void quantize_iq4_xs(const float* src, void* dst, int64_t n, const float* importance);
float dot_iq4_xs(const void* w, const void* a, int64_t n);  // against Q8_K

// mxfp4.cpp: microscaling FP4, against Q8_0.
void dequantize_mxfp4(const void* src, float* dst, int64_t n);
void quantize_mxfp4(const float* src, void* dst, int64_t n);
float dot_mxfp4(const void* w, const void* a, int64_t n);
int64_t first_invalid_mxfp4_block(const void* src, int64_t n);

// iq_quants.cpp: the grid types, activations in Q8_K.
void dequantize_iq2_xxs(const void* src, float* dst, int64_t n);
float dot_iq2_xxs(const void* w, const void* a, int64_t n);
void dequantize_iq2_xs(const void* src, float* dst, int64_t n);
float dot_iq2_xs(const void* w, const void* a, int64_t n);
void dequantize_iq2_s(const void* src, float* dst, int64_t n);
float dot_iq2_s(const void* w, const void* a, int64_t n);
void dequantize_iq3_xxs(const void* src, float* dst, int64_t n);
float dot_iq3_xxs(const void* w, const void* a, int64_t n);
void dequantize_iq3_s(const void* src, float* dst, int64_t n);
float dot_iq3_s(const void* w, const void* a, int64_t n);
void dequantize_iq1_s(const void* src, float* dst, int64_t n);
float dot_iq1_s(const void* w, const void* a, int64_t n);
void dequantize_iq1_m(const void* src, float* dst, int64_t n);
float dot_iq1_m(const void* w, const void* a, int64_t n);

// iq_quantize.cpp: the searched grid quantizers.
void quantize_iq2_xxs(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq2_xs(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq3_xxs(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq3_s(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq2_s(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq1_s(const float* src, void* dst, int64_t n, const float* importance);
void quantize_iq1_m(const float* src, void* dst, int64_t n, const float* importance);

}  // namespace revis::quant
