// NEON kernels (AArch64, where Advanced SIMD is part of the base ISA, so no
// runtime check is needed: every AArch64 CPU, Apple M-series included, runs
// them).
//
// What is overridden, and how each kernel stays equal to the scalar one:
//  - Activation quantization (Q8_0, Q8_K): bit-identical. The same float
//    multiply, the same clamp (FMINNM/FMAXNM treat a quiet NaN exactly as
//    std::fmin/fmax do; arithmetic never produces a signalling one) and
//    round-to-nearest-even (FCVTNS, the default rounding mode nearbyint uses).
//  - F16 <-> F32 rows (the KV cache): bit-identical, by the FPU's converters
//    plus a fix-up of the one case they differ in (signalling NaN halves).
//  - Dot products of every weight type (vec_dot, and dot4 for the batched
//    matmuls): the integer part of every quantized dot is exact, as in the
//    scalar code; only the float accumulation order differs.
//
// The integer dot of 16 int8 pairs uses SDOT where the compiler targets the
// dot-product extension (__ARM_FEATURE_DOTPROD: Apple M1 and later, most
// ARMv8.2+ servers, -march=armv8.2-a+dotprod), and widening multiplies on
// baseline ARMv8.0 otherwise (Raspberry Pi 4, Cortex-A72 clouds). Both give
// the same exact sums; scripts/test-arm64.sh tests both builds.
#include "quant/simd.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"

namespace revis::quant {
namespace {

// --- Helpers -----------------------------------------------------------------

// One stored half scale to float. The FPU's conversion is exact for every
// finite half (subnormals included: Linux and macOS run with flush-to-zero
// off) and is a single instruction, unlike the portable bit manipulation.
inline float scale_of(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// acc + the dot products of a and b, four lanes of partial sums. Callers only
// ever use the total (or a scaled total) of the lanes, so the two variants
// may spread the 16 products over the lanes differently.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  // An int8 product fits int16 (|-128 * -128| = 2^14) but the sum of two may
  // not, so each product is widened to 32 bits by the pairwise accumulate.
  const int16x8_t low = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  const int16x8_t high = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, low), high);
#endif
}

inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* a) {
  return dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(a)), w1, vld1q_s8(a + 16));
}

inline int8x16_t low_nibbles(uint8x16_t v) { return vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))); }
inline int8x16_t high_nibbles(uint8x16_t v) { return vreinterpretq_s8_u8(vshrq_n_u8(v, 4)); }

// Byte j of the result is 0x10 if bit j of the 16-bit `bits` is set, else 0:
// the fifth bit of Q5_0/Q5_1 values, spread to their bytes.
inline uint8x16_t fifth_bits(uint32_t bits) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t spread = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  return vandq_u8(vtstq_u8(spread, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

// v * inverse rounded to the nearest integer in [lo, hi], four lanes; the
// same steps as quantize_clamped (kernels.h), so the same integers.
inline int32x4_t quantize4(float32x4_t v, float32x4_t inverse, float32x4_t lo, float32x4_t hi) {
  return vcvtnq_s32_f32(vmaxnmq_f32(lo, vminnmq_f32(hi, vmulq_f32(v, inverse))));
}

// Sixteen int32 lanes (values known to fit) to sixteen int8.
inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t low = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
  const int16x8_t high = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
  return vcombine_s8(vmovn_s16(low), vmovn_s16(high));
}

// Largest |x[i]| over n (a multiple of 4) values, NaNs skipped, 0 if none:
// what the scalar fmax(max, fabs(x)) loop gives, since the maximum of
// numbers does not depend on the order they are visited in.
inline float max_abs(const float* x, int n) {
  float32x4_t m = vdupq_n_f32(0);
  for (int i = 0; i < n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  return vmaxnmvq_f32(m);
}

// --- Activation quantization -------------------------------------------------

void quantize_q8_0_neon(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    const float* x = src + b * kLegacyBlock;
    const float amax = max_abs(x, kLegacyBlock);
    blocks[b].d = encode_scale(amax / 127.0f);
    // The exact scale, not the stored half, as in quantize_q8_0.
    const float32x4_t inverse = vdupq_n_f32(amax != 0 ? 127.0f / amax : 0.0f);
    int32x4_t q[8];
    for (int i = 0; i < 8; ++i) q[i] = quantize4(vld1q_f32(x + 4 * i), inverse, lo, hi);
    vst1q_s8(blocks[b].qs, narrow16(q[0], q[1], q[2], q[3]));
    vst1q_s8(blocks[b].qs + 16, narrow16(q[4], q[5], q[6], q[7]));
  }
}

void quantize_q8_k_neon(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  const float32x4_t lo = vdupq_n_f32(-128.0f), hi = vdupq_n_f32(127.0f);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* x = src + b * kSuperBlock;
    BlockQ8_K& out = blocks[b];
    const float amax = max_abs(x, kSuperBlock);
    if (amax == 0 || !std::isfinite(amax)) {
      // As quantize_q8_k: no usable scale, a zero block (bsums zero too).
      std::memset(&out, 0, sizeof out);
      continue;
    }
    // The scalar loop keeps the first value of largest magnitude (its test
    // is a strict >), so the sign of the scale follows the first one found.
    const float32x4_t target = vdupq_n_f32(amax);
    int first = 0;
    while (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + first)), target)) == 0) first += 4;
    while (std::fabs(x[first]) != amax) ++first;
    const float inverse = -127.0f / x[first];
    out.d = 1.0f / inverse;
    const float32x4_t inverse4 = vdupq_n_f32(inverse);
    for (int s = 0; s < kSuperBlock / 16; ++s) {
      const float* xs = x + 16 * s;
      const int8x16_t q = narrow16(quantize4(vld1q_f32(xs), inverse4, lo, hi),
                                   quantize4(vld1q_f32(xs + 4), inverse4, lo, hi),
                                   quantize4(vld1q_f32(xs + 8), inverse4, lo, hi),
                                   quantize4(vld1q_f32(xs + 12), inverse4, lo, hi));
      vst1q_s8(out.qs + 16 * s, q);
      out.bsums[s] = vaddlvq_s8(q);
    }
  }
}

// --- F16 rows (the KV cache) -------------------------------------------------

// The hardware conversion quietens a signalling NaN; half_to_float keeps
// the half's payload bits as they are. Lanes with an all-ones exponent are
// therefore rebuilt by hand (for infinities this gives the same bits).
inline float32x4_t halves_to_floats(uint16x4_t h) {
  const uint32x4_t wide = vmovl_u16(h);
  const uint32x4_t special = vceqq_u32(vandq_u32(wide, vdupq_n_u32(0x7c00)), vdupq_n_u32(0x7c00));
  const uint32x4_t by_hand = vorrq_u32(vorrq_u32(vshlq_n_u32(vandq_u32(wide, vdupq_n_u32(0x8000)), 16),
                                                 vdupq_n_u32(0x7f800000)),
                                       vshlq_n_u32(vandq_u32(wide, vdupq_n_u32(0x03ff)), 13));
  const uint32x4_t converted = vreinterpretq_u32_f32(vcvt_f32_f16(vreinterpret_f16_u16(h)));
  return vreinterpretq_f32_u32(vbslq_u32(special, by_hand, converted));
}

void dequantize_f16_neon(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint16x8_t v = vld1q_u16(h + i);
    vst1q_f32(dst + i, halves_to_floats(vget_low_u16(v)));
    vst1q_f32(dst + i + 4, halves_to_floats(vget_high_u16(v)));
  }
  for (; i < n; ++i) dst[i] = half_to_float(h[i]);
}

// FCVT rounds to nearest even, overflows to infinity and keeps a NaN's top
// payload bits with the quiet bit set, which is float_to_half exactly.
void quantize_f16_neon(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t v = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(src + i)), vld1q_f32(src + i + 4));
    vst1q_u16(h + i, vreinterpretq_u16_f16(v));
  }
  for (; i < n; ++i) h[i] = float_to_half(src[i]);
}

// --- Dot products: the shared shape -----------------------------------------------

// Each dot kernel is a template over R, the number of activation rows it
// serves at once (simd.h's RowsKernel); the compiler unrolls the loops over r.

// Activation row r of R as blocks of type Block.
template <typename Block>
inline const Block* activation_row(const uint8_t* a, size_t stride, int r) {
  return reinterpret_cast<const Block*>(a + static_cast<size_t>(r) * stride);
}

// --- Float dot products --------------------------------------------------------

// Float rows are summed in float32 for speed but only over chunks of
// kFloatChunk values (16 products per lane); each chunk's sum is then added
// in float64. So the rounding error stays around 20 float ulps of
// sum |w * a| however long the row, close to the scalar kernels' float64 sums.
constexpr int64_t kFloatChunk = 256;

// Format::load(p, v) gives the 16 values at p as four float vectors;
// Format::value(x) one value, for the tail.
template <int R, typename Format>
void dot_float_rows(const void* w_row, const uint8_t* a, size_t stride, int64_t n, float* out) {
  using T = typename Format::Element;
  const T* w = static_cast<const T*>(w_row);
  const T* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = activation_row<T>(a, stride, r);
  float64x2_t total[R];
  for (int r = 0; r < R; ++r) total[r] = vdupq_n_f64(0);
  int64_t i = 0;
  while (i + 16 <= n) {
    const int64_t end = std::min(n - n % 16, i + kFloatChunk);
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k) acc[r][k] = vdupq_n_f32(0);
    for (; i < end; i += 16) {
      float32x4_t wv[4];
      Format::load(w + i, wv);
      for (int r = 0; r < R; ++r) {
        float32x4_t av[4];
        Format::load(rows[r] + i, av);
        for (int k = 0; k < 4; ++k) acc[r][k] = vfmaq_f32(acc[r][k], wv[k], av[k]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const float32x4_t chunk = vaddq_f32(vaddq_f32(acc[r][0], acc[r][1]), vaddq_f32(acc[r][2], acc[r][3]));
      total[r] = vaddq_f64(total[r], vcvt_f64_f32(vget_low_f32(chunk)));
      total[r] = vaddq_f64(total[r], vcvt_high_f64_f32(chunk));
    }
  }
  for (int r = 0; r < R; ++r) {
    double sum = vaddvq_f64(total[r]);
    for (int64_t j = i; j < n; ++j)
      sum += static_cast<double>(Format::value(w[j])) * static_cast<double>(Format::value(rows[r][j]));
    out[r] = static_cast<float>(sum);
  }
}

struct F32Format {
  using Element = float;
  static void load(const float* p, float32x4_t* v) {
    for (int k = 0; k < 4; ++k) v[k] = vld1q_f32(p + 4 * k);
  }
  static float value(float x) { return x; }
};

// NaN payloads do not matter inside a product, so the plain conversion does.
struct F16Format {
  using Element = uint16_t;
  static void load(const uint16_t* p, float32x4_t* v) {
    const float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16(p));
    const float16x8_t h1 = vreinterpretq_f16_u16(vld1q_u16(p + 8));
    v[0] = vcvt_f32_f16(vget_low_f16(h0));
    v[1] = vcvt_high_f32_f16(h0);
    v[2] = vcvt_f32_f16(vget_low_f16(h1));
    v[3] = vcvt_high_f32_f16(h1);
  }
  static float value(uint16_t h) { return half_to_float(h); }
};

// A bfloat16 is the top half of a float32: widening shifts convert it.
struct BF16Format {
  using Element = uint16_t;
  static void load(const uint16_t* p, float32x4_t* v) {
    const uint16x8_t h0 = vld1q_u16(p);
    const uint16x8_t h1 = vld1q_u16(p + 8);
    v[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h0), 16));
    v[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h0, 16));
    v[2] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h1), 16));
    v[3] = vreinterpretq_f32_u32(vshll_high_n_u16(h1, 16));
  }
  static float value(uint16_t h) { return bfloat_to_float(h); }
};

// --- 32-value blocks against Q8_0 ------------------------------------------------

// Format::unpack(block, w0, w1) gives values 0..15 and 16..31 of a block as
// int8: signed levels for the symmetric formats (x = d * q), unsigned ones
// for the offset formats (x = d * q + m, kHasOffset).
struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr bool kHasOffset = false;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t q = vld1q_u8(b.qs);
    w0 = vsubq_s8(low_nibbles(q), vdupq_n_s8(8));
    w1 = vsubq_s8(high_nibbles(q), vdupq_n_s8(8));
  }
};

struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr bool kHasOffset = false;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    const uint8x16_t q = vld1q_u8(b.qs);
    w0 = vsubq_s8(vorrq_s8(low_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh))), vdupq_n_s8(16));
    w1 = vsubq_s8(vorrq_s8(high_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh >> 16))), vdupq_n_s8(16));
  }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr bool kHasOffset = false;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    w0 = vld1q_s8(b.qs);
    w1 = vld1q_s8(b.qs + 16);
  }
};

// 4-bit indices into a table of 16 signed levels (IQ4_NL's codebook,
// MXFP4's doubled E2M1 values).
template <typename B, const int8_t* kLevels>
struct CodebookFormat {
  using Block = B;
  static constexpr bool kHasOffset = false;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    const int8x16_t codebook = vld1q_s8(kLevels);
    const uint8x16_t q = vld1q_u8(b.qs);
    w0 = vqtbl1q_s8(codebook, vandq_u8(q, vdupq_n_u8(0x0f)));
    w1 = vqtbl1q_s8(codebook, vshrq_n_u8(q, 4));
  }
};
using IQ4_NLFormat = CodebookFormat<BlockIQ4_NL, kIq4Values>;
using MXFP4Format = CodebookFormat<BlockMXFP4, kMxfp4Values>;

// The float scale of a weight block: a half in every format but MXFP4's.
template <typename Block>
inline float weight_scale(const Block& b) {
  return scale_of(b.d);
}
inline float weight_scale(const BlockMXFP4& b) { return mxfp4_scale(b.e); }

struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr bool kHasOffset = true;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t q = vld1q_u8(b.qs);
    w0 = low_nibbles(q);
    w1 = high_nibbles(q);
  }
};

struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr bool kHasOffset = true;
  static void unpack(const Block& b, int8x16_t& w0, int8x16_t& w1) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    const uint8x16_t q = vld1q_u8(b.qs);
    w0 = vorrq_s8(low_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh)));
    w1 = vorrq_s8(high_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh >> 16)));
  }
};

// The exact integer dot of each block, scaled by d_w * d_a in four float
// lanes; the offset formats add m * d_a * sum(a) per block.
template <int R, typename Format>
void dot_legacy_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  using Block = typename Format::Block;
  const auto* wb = static_cast<const Block*>(w);
  const BlockQ8_0* rows[R];
  float32x4_t sum[R];
  float offsets[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = activation_row<BlockQ8_0>(a, stride, r);
    sum[r] = vdupq_n_f32(0);
    offsets[r] = 0;
  }
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    int8x16_t w0, w1;
    Format::unpack(wb[b], w0, w1);
    const float dw = weight_scale(wb[b]);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& ab = rows[r][b];
      const int8x16_t a0 = vld1q_s8(ab.qs), a1 = vld1q_s8(ab.qs + 16);
      const int32x4_t dot = dot16(dot16(vdupq_n_s32(0), w0, a0), w1, a1);
      const float da = scale_of(ab.d);
      sum[r] = vfmaq_n_f32(sum[r], vcvtq_f32_s32(dot), dw * da);
      if constexpr (Format::kHasOffset) {
        const int activation_sum = vaddlvq_s8(a0) + vaddlvq_s8(a1);
        offsets[r] += scale_of(wb[b].m) * (da * static_cast<float>(activation_sum));
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(sum[r]) + offsets[r];
}

// --- 256-value super-blocks against Q8_K ---------------------------------------

// The K-quant kernels collect sum_g scale[g] * (q . a over group g) in four
// int32 lanes (at most 16 groups * 128 * 16 * 128 * 16 < 2^31) and the
// minimums' sum_g min[g] * (sum of a over group g) from Q8_K's bsums, then
// apply the block's float scales once, in the scalar kernels' order:
//   sum += (d * d_a) * scaled - (dmin * d_a) * min_dot.
//
// Each format says how to walk a block: Format::prepare(block) unpacks its
// integer scales (and mins) once, and Format::each_part(block, prepared,
// visit) calls visit(offset, w0, w1, scale0, scale1) for each 32 values of
// the block: levels offset..+15 in w0 with integer scale scale0, the next 16
// in w1 with scale1 (the same scale for the formats with 32-value groups,
// kGroupsOf32, whose two halves are then summed before scaling).

// Q4_K/Q5_K: eight 6-bit scales and mins in 12 bytes (layout in k_quants.cpp).
struct Scales6 {
  int32_t scale[8];
  uint8_t min[8];
};

inline Scales6 unpack_scales6(const uint8_t* s) {
  Scales6 out;
  for (int g = 0; g < 4; ++g) {
    out.scale[g] = s[g] & 63;
    out.min[g] = s[g + 4] & 63;
    out.scale[g + 4] = (s[g + 8] & 0x0f) | ((s[g] >> 6) << 4);
    out.min[g + 4] = static_cast<uint8_t>((s[g + 8] >> 4) | ((s[g + 4] >> 6) << 4));
  }
  return out;
}

// sum_g min[g] * (activation sum of the 32 values of group g).
inline int min_dot_32(const uint8_t* min, const int16_t* bsums) {
  // Pairwise adds turn the sixteen 16-value sums into eight 32-value ones
  // (|sum| <= 32 * 128 fits int16).
  const int16x8_t group_sums = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(min)));
  const int32x4_t products = vmlal_high_s16(vmull_s16(vget_low_s16(group_sums), vget_low_s16(mins)), group_sums, mins);
  return vaddvq_s32(products);
}

// sum_g min[g] * bsums[g] over sixteen 16-value groups.
inline int min_dot_16(uint8x16_t mins, const int16_t* bsums) {
  const int16x8_t min_low = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
  const int16x8_t min_high = vreinterpretq_s16_u16(vmovl_high_u8(mins));
  const int16x8_t bs0 = vld1q_s16(bsums), bs1 = vld1q_s16(bsums + 8);
  int32x4_t products = vmull_s16(vget_low_s16(min_low), vget_low_s16(bs0));
  products = vmlal_high_s16(products, min_low, bs0);
  products = vmlal_s16(products, vget_low_s16(min_high), vget_low_s16(bs1));
  products = vmlal_high_s16(products, min_high, bs1);
  return vaddvq_s32(products);
}

// Q4_K: in each 64 values, the low nibbles of 32 bytes, then their high ones.
struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr bool kGroupsOf32 = true;  // scale0 == scale1 always
  static constexpr bool kHasMin = true;
  using Prepared = Scales6;
  static Prepared prepare(const Block& b) { return unpack_scales6(b.scales); }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared& s, Visit&& visit) {
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8x16_t q0 = vld1q_u8(b.qs + 32 * chunk), q1 = vld1q_u8(b.qs + 32 * chunk + 16);
      const int g = 2 * chunk;
      visit(64 * chunk, low_nibbles(q0), low_nibbles(q1), s.scale[g], s.scale[g]);
      visit(64 * chunk + 32, high_nibbles(q0), high_nibbles(q1), s.scale[g + 1], s.scale[g + 1]);
    }
  }
  static int min_dot(const Prepared& s, const BlockQ8_K& a) { return min_dot_32(s.min, a.bsums); }
  static float dmin(const Block& b) { return scale_of(b.dmin); }
};

// Q5_K: Q4_K's nibbles, plus bit g of qh[l] as the fifth bit of value l of
// group g.
struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr bool kGroupsOf32 = true;  // scale0 == scale1 always
  static constexpr bool kHasMin = true;
  using Prepared = Scales6;
  static Prepared prepare(const Block& b) { return unpack_scales6(b.scales); }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared& s, Visit&& visit) {
    const uint8x16_t h0 = vld1q_u8(b.qh), h1 = vld1q_u8(b.qh + 16);
    const uint8x16_t sixteen = vdupq_n_u8(0x10);
    auto with_fifth_bit = [&](int8x16_t low, uint8x16_t h, int g) {
      const uint8x16_t fifth = vandq_u8(vtstq_u8(h, vdupq_n_u8(static_cast<uint8_t>(1u << g))), sixteen);
      return vorrq_s8(low, vreinterpretq_s8_u8(fifth));
    };
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8x16_t q0 = vld1q_u8(b.qs + 32 * chunk), q1 = vld1q_u8(b.qs + 32 * chunk + 16);
      const int g = 2 * chunk;
      visit(64 * chunk, with_fifth_bit(low_nibbles(q0), h0, g), with_fifth_bit(low_nibbles(q1), h1, g), s.scale[g],
            s.scale[g]);
      visit(64 * chunk + 32, with_fifth_bit(high_nibbles(q0), h0, g + 1), with_fifth_bit(high_nibbles(q1), h1, g + 1),
            s.scale[g + 1], s.scale[g + 1]);
    }
  }
  static int min_dot(const Prepared& s, const BlockQ8_K& a) { return min_dot_32(s.min, a.bsums); }
  static float dmin(const Block& b) { return scale_of(b.dmin); }
};

// Q6_K: per half of 128 values, value 32k + l takes its low nibble from
// ql[l] (k = 0, 2) or ql[32 + l] (k = 1, 3), low nibble first, and its top
// 2 bits from qh[l] at bit 2k; levels are stored + 32.
struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr bool kGroupsOf32 = false;
  static constexpr bool kHasMin = false;
  struct Prepared {};
  static Prepared prepare(const Block&) { return {}; }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared&, Visit&& visit) {
    const uint8x16_t nibble = vdupq_n_u8(0x0f), top = vdupq_n_u8(0x30);
    const int8x16_t bias = vdupq_n_s8(32);
    auto level = [&](uint8x16_t low, uint8x16_t high) {
      return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, high)), bias);
    };
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
      const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
      const int base = 128 * half;
      // Bits 2k, 2k + 1 of qh moved to bits 4, 5 for k = 0..3.
      visit(base, level(vandq_u8(l0, nibble), vandq_u8(vshlq_n_u8(h0, 4), top)),
            level(vandq_u8(l1, nibble), vandq_u8(vshlq_n_u8(h1, 4), top)), sc[0], sc[1]);
      visit(base + 32, level(vandq_u8(l2, nibble), vandq_u8(vshlq_n_u8(h0, 2), top)),
            level(vandq_u8(l3, nibble), vandq_u8(vshlq_n_u8(h1, 2), top)), sc[2], sc[3]);
      visit(base + 64, level(vshrq_n_u8(l0, 4), vandq_u8(h0, top)), level(vshrq_n_u8(l1, 4), vandq_u8(h1, top)), sc[4],
            sc[5]);
      visit(base + 96, level(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), top)),
            level(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), top)), sc[6], sc[7]);
    }
  }
  static int min_dot(const Prepared&, const BlockQ8_K&) { return 0; }
  static float dmin(const Block&) { return 0; }
};

// Q2_K and the low bits of Q3_K: in each half of 128 values, value 32k + l
// is bits 2k, 2k + 1 of byte l of the half's 32 bytes.
inline uint8x16_t two_bits(uint8x16_t q, int k) {
  return vandq_u8(vshlq_u8(q, vdupq_n_s8(static_cast<int8_t>(-2 * k))), vdupq_n_u8(3));
}

// Q2_K: group g's scale and min are the low and high nibble of scales[g];
// its 16 values are exactly those of bsums[g].
struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr bool kGroupsOf32 = false;
  static constexpr bool kHasMin = true;
  struct Prepared {
    uint8x16_t mins;
  };
  static Prepared prepare(const Block& b) { return {vshrq_n_u8(vld1q_u8(b.scales), 4)}; }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared&, Visit&& visit) {
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t q0 = vld1q_u8(b.qs + 32 * half), q1 = vld1q_u8(b.qs + 32 * half + 16);
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * half + 2 * k;
        visit(128 * half + 32 * k, vreinterpretq_s8_u8(two_bits(q0, k)), vreinterpretq_s8_u8(two_bits(q1, k)),
              b.scales[g] & 0x0f, b.scales[g + 1] & 0x0f);
      }
    }
  }
  static int min_dot(const Prepared& p, const BlockQ8_K& a) { return min_dot_16(p.mins, a.bsums); }
  static float dmin(const Block& b) { return scale_of(b.dmin); }
};

// Q3_K: two low bits as Q2_K's, the third is bit v / 32 of hmask[v % 32]:
// q = low + 4 * third - 4, in [-4, 3]. Sixteen 6-bit scales stored + 32.
struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr bool kGroupsOf32 = false;
  static constexpr bool kHasMin = false;
  struct Prepared {
    int scale[16];
  };
  static Prepared prepare(const Block& b) {
    Prepared p;
    for (int g = 0; g < 16; ++g) {
      const int low = g < 8 ? (b.scales[g] & 0x0f) : (b.scales[g - 8] >> 4);
      const int high = (b.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
      p.scale[g] = (low | (high << 4)) - 32;
    }
    return p;
  }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared& p, Visit&& visit) {
    const uint8x16_t m0 = vld1q_u8(b.hmask), m1 = vld1q_u8(b.hmask + 16);
    const uint8x16_t four = vdupq_n_u8(4);
    auto level = [&](uint8x16_t low, uint8x16_t mask, uint8x16_t bit) {
      return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, vandq_u8(vtstq_u8(mask, bit), four))), vdupq_n_s8(4));
    };
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t q0 = vld1q_u8(b.qs + 32 * half), q1 = vld1q_u8(b.qs + 32 * half + 16);
      for (int k = 0; k < 4; ++k) {
        const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << (4 * half + k)));
        const int g = 8 * half + 2 * k;
        visit(128 * half + 32 * k, level(two_bits(q0, k), m0, bit), level(two_bits(q1, k), m1, bit), p.scale[g],
              p.scale[g + 1]);
      }
    }
  }
  static int min_dot(const Prepared&, const BlockQ8_K&) { return 0; }
  static float dmin(const Block&) { return 0; }
};

// IQ4_XS: eight groups of 32 laid out as IQ4_NL blocks, 6-bit scales stored
// + 32 (low nibble in scales_l, top 2 bits in scales_h).
struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr bool kGroupsOf32 = true;  // scale0 == scale1 always
  static constexpr bool kHasMin = false;
  struct Prepared {};
  static Prepared prepare(const Block&) { return {}; }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared&, Visit&& visit) {
    const int8x16_t codebook = vld1q_s8(kIq4Values);
    for (int g = 0; g < 8; ++g) {
      const uint8x16_t q = vld1q_u8(b.qs + 16 * g);
      const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
      const int high = (b.scales_h >> (2 * g)) & 3;
      const int scale = (low | (high << 4)) - 32;
      visit(32 * g, vqtbl1q_s8(codebook, vandq_u8(q, vdupq_n_u8(0x0f))), vqtbl1q_s8(codebook, vshrq_n_u8(q, 4)), scale,
            scale);
    }
  }
  static int min_dot(const Prepared&, const BlockQ8_K&) { return 0; }
  static float dmin(const Block&) { return 0; }
};

// --- The grid types (IQ2, IQ3, IQ1) ---------------------------------------------
//
// Group g's 32 signed levels as iq_quants.cpp unpacks them, 16 to a
// vector: 8-value grid points (4-value ones paired for IQ3) with their sign
// bytes applied, or IQ1's 8 * point +- 1. Group scales are the odd integers
// 2s + 1; the format's power of two joins the super-block scale.

inline uint8x16_t two_points(uint64_t first, uint64_t second) {
  return vcombine_u8(vcreate_u8(first), vcreate_u8(second));
}

inline uint64_t paired(uint32_t first, uint32_t second) { return first | static_cast<uint64_t>(second) << 32; }

// `levels` negated in byte j of each half where bit j of that half's sign byte is set.
inline int8x16_t with_signs(uint8x16_t levels, uint8_t first, uint8_t second) {
  const uint8x16_t bits = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
  const int8x16_t negative = vreinterpretq_s8_u8(vtstq_u8(vcombine_u8(vdup_n_u8(first), vdup_n_u8(second)), bits));
  return vsubq_s8(veorq_s8(vreinterpretq_s8_u8(levels), negative), negative);
}

// IQ1: 8 * point + 1 per value, - 1 in a half whose delta is negative.
inline int8x16_t iq1_levels(uint8x16_t points, bool first_negative, bool second_negative) {
  const int8x16_t delta = vcombine_s8(vdup_n_s8(first_negative ? -1 : 1), vdup_n_s8(second_negative ? -1 : 1));
  return vaddq_s8(vshlq_n_s8(vreinterpretq_s8_u8(points), 3), delta);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// What the grid formats share: each_part over group(), d times 2^-kShift.
template <typename Derived, typename BlockType, int kShift, bool kPer32>
struct GridFormat {
  using Block = BlockType;
  static constexpr bool kGroupsOf32 = kPer32;
  static constexpr bool kHasMin = false;
  struct Prepared {};
  static Prepared prepare(const Block&) { return {}; }
  template <typename Visit>
  static void each_part(const Block& b, const Prepared&, Visit&& visit) {
    for (int g = 0; g < 8; ++g) {
      int8x16_t w0, w1;
      int s0, s1;
      Derived::group(b, g, w0, w1, s0, s1);
      visit(32 * g, w0, w1, s0, s1);
    }
  }
  static float super_scale(const Block& b) { return scale_of(Derived::d(b)) * (1.0f / (1 << kShift)); }
  static uint16_t d(const Block& b) { return b.d; }
  static int min_dot(const Prepared&, const BlockQ8_K&) { return 0; }
  static float dmin(const Block&) { return 0; }
};

struct IQ2_XXSFormat : GridFormat<IQ2_XXSFormat, BlockIQ2_XXS, 3, true> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    const uint8_t* q = b.qs + 8 * g;
    const uint32_t word = load_u32(q + 4);
    auto sign = [&](int l) { return kSignBytes[(word >> (7 * l)) & 127]; };
    w0 = with_signs(two_points(kGridIq2Xxs[q[0]], kGridIq2Xxs[q[1]]), sign(0), sign(1));
    w1 = with_signs(two_points(kGridIq2Xxs[q[2]], kGridIq2Xxs[q[3]]), sign(2), sign(3));
    s0 = s1 = 2 * static_cast<int>(word >> 28) + 1;
  }
};

struct IQ2_XSFormat : GridFormat<IQ2_XSFormat, BlockIQ2_XS, 3, false> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    const uint16_t* q = b.qs + 4 * g;
    auto point = [&](int l) { return kGridIq2Xs[q[l] & 511]; };
    auto sign = [&](int l) { return kSignBytes[q[l] >> 9]; };
    w0 = with_signs(two_points(point(0), point(1)), sign(0), sign(1));
    w1 = with_signs(two_points(point(2), point(3)), sign(2), sign(3));
    s0 = 2 * (b.scales[g] & 0x0f) + 1;
    s1 = 2 * (b.scales[g] >> 4) + 1;
  }
};

struct IQ2_SFormat : GridFormat<IQ2_SFormat, BlockIQ2_S, 3, false> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    auto point = [&](int l) { return kGridIq2S[b.qs[4 * g + l] | (((b.qh[g] >> (2 * l)) & 3) << 8)]; };
    const uint8_t* signs = b.qs + 32 + 4 * g;
    w0 = with_signs(two_points(point(0), point(1)), signs[0], signs[1]);
    w1 = with_signs(two_points(point(2), point(3)), signs[2], signs[3]);
    s0 = 2 * (b.scales[g] & 0x0f) + 1;
    s1 = 2 * (b.scales[g] >> 4) + 1;
  }
};

struct IQ3_XXSFormat : GridFormat<IQ3_XXSFormat, BlockIQ3_XXS, 2, true> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    const uint8_t* q = b.qs + 8 * g;
    const uint32_t word = load_u32(b.qs + 64 + 4 * g);
    auto pair = [&](int l) { return paired(kGridIq3Xxs[q[2 * l]], kGridIq3Xxs[q[2 * l + 1]]); };
    auto sign = [&](int l) { return kSignBytes[(word >> (7 * l)) & 127]; };
    w0 = with_signs(two_points(pair(0), pair(1)), sign(0), sign(1));
    w1 = with_signs(two_points(pair(2), pair(3)), sign(2), sign(3));
    s0 = s1 = 2 * static_cast<int>(word >> 28) + 1;
  }
};

struct IQ3_SFormat : GridFormat<IQ3_SFormat, BlockIQ3_S, 0, true> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    auto point = [&](int k) { return kGridIq3S[b.qs[8 * g + k] | (((b.qh[g] >> k) & 1) << 8)]; };
    auto pair = [&](int l) { return paired(point(2 * l), point(2 * l + 1)); };
    const uint8_t* signs = b.signs + 4 * g;
    w0 = with_signs(two_points(pair(0), pair(1)), signs[0], signs[1]);
    w1 = with_signs(two_points(pair(2), pair(3)), signs[2], signs[3]);
    s0 = s1 = 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0x0f) + 1;
  }
};

struct IQ1_SFormat : GridFormat<IQ1_SFormat, BlockIQ1_S, 3, true> {
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    const unsigned high = b.qh[g];
    auto point = [&](int l) { return kGridIq1S[b.qs[4 * g + l] | (((high >> (3 * l)) & 7) << 8)]; };
    const bool negative = (high & 0x8000) != 0;
    w0 = iq1_levels(two_points(point(0), point(1)), negative, negative);
    w1 = iq1_levels(two_points(point(2), point(3)), negative, negative);
    s0 = s1 = 2 * static_cast<int>((high >> 12) & 7) + 1;
  }
};

struct IQ1_MFormat : GridFormat<IQ1_MFormat, BlockIQ1_M, 3, false> {
  static uint16_t word(const Block& b, int w) { return static_cast<uint16_t>(b.scales[2 * w] | (b.scales[2 * w + 1] << 8)); }
  static uint16_t d(const Block& b) {
    uint16_t d = 0;
    for (int w = 0; w < 4; ++w) d |= static_cast<uint16_t>((word(b, w) >> 12) << (4 * w));
    return d;
  }
  static void group(const Block& b, int g, int8x16_t& w0, int8x16_t& w1, int& s0, int& s1) {
    auto nibble = [&](int l) { return (b.qh[2 * g + l / 2] >> (4 * (l % 2))) & 0x0f; };
    auto point = [&](int l) { return kGridIq1S[b.qs[4 * g + l] | ((nibble(l) & 7) << 8)]; };
    auto negative = [&](int l) { return (nibble(l) & 8) != 0; };
    w0 = iq1_levels(two_points(point(0), point(1)), negative(0), negative(1));
    w1 = iq1_levels(two_points(point(2), point(3)), negative(2), negative(3));
    const unsigned scales = word(b, g / 2) >> (6 * (g % 2));
    s0 = 2 * static_cast<int>(scales & 7) + 1;
    s1 = 2 * static_cast<int>((scales >> 3) & 7) + 1;
  }
};

// The super-block scale d: the grid formats' own (IQ1_M's is spread over its
// scale words, and their power of two is folded in), else the half d.
template <typename Format>
float super_scale_of(const typename Format::Block& x) {
  if constexpr (requires { Format::super_scale(x); }) return Format::super_scale(x);
  else return scale_of(x.d);
}

template <int R, typename Format>
void dot_k_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  using Block = typename Format::Block;
  const auto* wb = static_cast<const Block*>(w);
  const BlockQ8_K* rows[R];
  float sum[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = activation_row<BlockQ8_K>(a, stride, r);
    sum[r] = 0;
  }
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const Block& x = wb[b];
    const typename Format::Prepared prepared = Format::prepare(x);
    int32x4_t scaled[R];
    for (int r = 0; r < R; ++r) scaled[r] = vdupq_n_s32(0);
    Format::each_part(x, prepared, [&](int offset, int8x16_t w0, int8x16_t w1, int scale0, int scale1) {
      for (int r = 0; r < R; ++r) {
        const int8_t* aq = rows[r][b].qs + offset;
        if constexpr (Format::kGroupsOf32) {
          scaled[r] = vmlaq_n_s32(scaled[r], dot32(w0, w1, aq), scale0);
        } else {
          scaled[r] = vmlaq_n_s32(scaled[r], dot16(vdupq_n_s32(0), w0, vld1q_s8(aq)), scale0);
          scaled[r] = vmlaq_n_s32(scaled[r], dot16(vdupq_n_s32(0), w1, vld1q_s8(aq + 16)), scale1);
        }
      }
    });
    const float d = super_scale_of<Format>(x);
    for (int r = 0; r < R; ++r) {
      const float da = rows[r][b].d;
      sum[r] += (d * da) * static_cast<float>(vaddvq_s32(scaled[r]));
      if constexpr (Format::kHasMin)
        sum[r] -= (Format::dmin(x) * da) * static_cast<float>(Format::min_dot(prepared, rows[r][b]));
    }
  }
  for (int r = 0; r < R; ++r) out[r] = sum[r];
}

// The one- and four-row kernels of a 256-block format.
template <typename Format>
KernelEntry k_dots() {
  return dots<dot_k_rows<1, Format>, dot_k_rows<4, Format>>();
}

}  // namespace

bool neon_supported() { return true; }

void install_neon(OverrideFn record) {
  record(TensorType::F32, dots<dot_float_rows<1, F32Format>, dot_float_rows<4, F32Format>>());
  KernelEntry f16 = dots<dot_float_rows<1, F16Format>, dot_float_rows<4, F16Format>>();
  f16.dequantize = dequantize_f16_neon;
  f16.quantize = quantize_f16_neon;
  record(TensorType::F16, f16);
  record(TensorType::BF16, dots<dot_float_rows<1, BF16Format>, dot_float_rows<4, BF16Format>>());
  record(TensorType::Q4_0, dots<dot_legacy_rows<1, Q4_0Format>, dot_legacy_rows<4, Q4_0Format>>());
  record(TensorType::Q4_1, dots<dot_legacy_rows<1, Q4_1Format>, dot_legacy_rows<4, Q4_1Format>>());
  record(TensorType::Q5_0, dots<dot_legacy_rows<1, Q5_0Format>, dot_legacy_rows<4, Q5_0Format>>());
  record(TensorType::Q5_1, dots<dot_legacy_rows<1, Q5_1Format>, dot_legacy_rows<4, Q5_1Format>>());
  KernelEntry q8_0 = dots<dot_legacy_rows<1, Q8_0Format>, dot_legacy_rows<4, Q8_0Format>>();
  q8_0.quantize = quantize_q8_0_neon;
  record(TensorType::Q8_0, q8_0);
  record(TensorType::IQ4_NL, dots<dot_legacy_rows<1, IQ4_NLFormat>, dot_legacy_rows<4, IQ4_NLFormat>>());
  record(TensorType::MXFP4, dots<dot_legacy_rows<1, MXFP4Format>, dot_legacy_rows<4, MXFP4Format>>());
  record(TensorType::Q2_K, k_dots<Q2_KFormat>());
  record(TensorType::Q3_K, k_dots<Q3_KFormat>());
  record(TensorType::Q4_K, k_dots<Q4_KFormat>());
  record(TensorType::Q5_K, k_dots<Q5_KFormat>());
  record(TensorType::Q6_K, k_dots<Q6_KFormat>());
  record(TensorType::IQ4_XS, k_dots<IQ4_XSFormat>());
  record(TensorType::IQ2_XXS, k_dots<IQ2_XXSFormat>());
  record(TensorType::IQ2_XS, k_dots<IQ2_XSFormat>());
  record(TensorType::IQ2_S, k_dots<IQ2_SFormat>());
  record(TensorType::IQ3_XXS, k_dots<IQ3_XXSFormat>());
  record(TensorType::IQ3_S, k_dots<IQ3_SFormat>());
  record(TensorType::IQ1_S, k_dots<IQ1_SFormat>());
  record(TensorType::IQ1_M, k_dots<IQ1_MFormat>());
  record(TensorType::Q8_K, {.quantize = quantize_q8_k_neon});
}

}  // namespace revis::quant

#endif
