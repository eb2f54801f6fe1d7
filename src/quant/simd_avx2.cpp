// AVX2 + FMA + F16C kernels (x86-64). This file alone is compiled with
// -mavx2 -mfma -mf16c; dispatch.cpp calls in only when the CPU has them.
//
// Activation quantization (Q8_0, Q8_K, F16) gives the scalar kernels'
// bytes exactly: the same float operations in the same order per value,
// and the same NaN/infinity handling (see the comments at each step).
//
// The dot products do the scalar kernels' integer arithmetic: exact
// integer sums per block or group, scaled once per block by the float
// scales; only the float summation order differs. The workhorse is
// vpmaddubsw, unsigned bytes times signed bytes with adjacent pairs summed
// to int16, followed by vpmaddwd against the group scales (or ones) to
// reach int32. Weights stored as unsigned levels (every K-quant, Q4_1,
// Q5_1) go in as they are and their offsets (q - 32, q - 4, minimums) are
// applied once per block through Q8_K's group sums. Signed weights (Q8_0,
// centred Q4_0/Q5_0, the IQ4 codebook) use |w| * (a with w's sign), which
// is exact because no activation byte is -128: Q8_0 clamps to +-127 and
// Q8_K maps the value of largest magnitude to -127.
//
// Each dot kernel is a template over T, the number of activation rows it
// serves: T = 1 is vec_dot, T = 4 the dot4 entry of batched matmuls, which
// unpacks every weight block once for four tokens. (The signed 32-value
// types have their own vec_dot, dot_signed_one, which treats four blocks of
// one row the way the T = 4 kernel treats one block of four rows.)
#include "quant/simd.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/f16_stripes.h"
#include "quant/k_stripes.h"
#include "quant/packed_q8_0.h"
#include "quant/simd_x86.h"

namespace revis::quant {
namespace {

// --- Helpers -----------------------------------------------------------------

inline float hsum(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hsum(__m256 v) { return hsum(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }

inline double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Running max of |v| that ignores NaN: maxps returns its second operand
// when either is NaN, so a NaN lane keeps the running value, as fmax does.
inline __m256 max_abs(__m256 v, __m256 running) { return _mm256_max_ps(abs_ps(v), running); }

// quantize_clamped() for 8 floats: fmax(lo, fmin(hi, v)) then nearbyint.
// minps returns its second operand (hi) for a NaN v, as fmin does; the
// conversion rounds in the current rounding mode, exactly like nearbyint.
inline __m256i round_clamped(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(v, hi), lo));
}

// Four vectors of 8 int32 in [-128, 127] -> 32 int8 in order.
inline __m256i pack_to_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  // The packs work per 128-bit half, leaving 4-value pieces in the order
  // a0 b0 c0 d0 a1 b1 c1 d1; one permute of 32-bit pieces restores a b c d.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 8 int32 lanes: sums of w[i] * a[i] over groups of 4 bytes, w signed with
// |w| precomputed, a signed and never -128.
inline __m256i dot_signed(__m256i w_abs, __m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));
}

// 8 int32 lanes: sums of q[i] * a[i] over groups of 4 bytes, q unsigned.
inline __m256i dot_unsigned(__m256i q, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
}

// The 32 nibbles of a 32-value block (value j < 16 in the low nibble of
// byte j, value j + 16 in the high one) as 32 bytes in value order.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  // The 16 bytes loaded into both halves, the high half shifted by 4.
  const __m256i both = _mm256_broadcastsi128_si256(load128(qs));
  return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
}

// 0x10 in byte j where bit j of the little-endian word at qh is set: the
// fifth bit of Q5_0 and Q5_1 values.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof bits);
  // Byte j takes byte j / 8 of the word, then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// kIq4Values in both 128-bit halves, for byte lookups with vpshufb.
inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(load128(kIq4Values));
}

// Activation block b of row t, the rows `stride` bytes apart.
template <typename Block>
inline const Block& act(const uint8_t* a, size_t stride, int t, int64_t b) {
  return reinterpret_cast<const Block*>(a + t * stride)[b];
}

// The scales of activation block b of rows 0..T-1 in lanes 0..T-1 (T is 1
// or 4): the kernels multiply them with the weight scale for all rows at
// once, and each row then broadcasts its product from memory.
template <int T>
inline __m128 row_scales_q8_0(const uint8_t* a, size_t stride, int64_t b) {
  static_assert(T == 1 || T == 4);
  auto d = [&](int t) { return static_cast<short>(act<BlockQ8_0>(a, stride, t, b).d); };
  if constexpr (T == 4) return _mm_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), 0, 0, 0, 0));
  return _mm_set_ss(half(act<BlockQ8_0>(a, stride, 0, b).d));
}

template <int T>
inline __m128 row_scales_q8_k(const uint8_t* a, size_t stride, int64_t b) {
  static_assert(T == 1 || T == 4);
  auto d = [&](int t) { return act<BlockQ8_K>(a, stride, t, b).d; };
  if constexpr (T == 4) return _mm_setr_ps(d(0), d(1), d(2), d(3));
  return _mm_set_ss(d(0));
}

// The float side of a dot kernel for T rows: add(sums, scales) adds row t's
// 8 int32 partial sums times lane t of scales. For four rows the partial
// sums are first folded into one vector, [sums of lanes 0..3 of rows 0..3 |
// sums of lanes 4..7 of rows 0..3], so one conversion and one FMA serve all
// four rows instead of four of each; the integer folding is exact and runs
// on the shuffle units, which the integer dot products leave idle. It
// unpacks and adds rather than using vphaddd, which AMD cores run several
// times slower (Zen 4: the four-row Q8_0 kernel took 13% less time).
template <int T>
class RowAccumulator;

// add_with_offsets(sums, offsets, scales, super_scales) is add(sums,
// scales * d) plus add(offsets, scales * -dmin), super_scales being
// [d, -dmin, ...]: the K-quants whose offsets have a scale of their own.
template <>
class RowAccumulator<1> {
 public:
  void add(const __m256i* sums, __m128 scales) {
    acc_ = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[0]), _mm256_broadcastss_ps(scales), acc_);
  }
  // The two integer vectors are first folded into one, [sums, sums,
  // offsets, offsets], so that one conversion and one FMA serve both: on a
  // single row these few float steps are a large part of a block's work.
  void add_with_offsets(const __m256i* sums, const __m256i* offsets, __m128 scales, __m128 super_scales) {
    const __m256i pairs = _mm256_add_epi32(_mm256_unpacklo_epi64(sums[0], offsets[0]), _mm256_unpackhi_epi64(sums[0], offsets[0]));
    const __m128i folded = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
    const __m128 lane_scales = _mm_mul_ps(_mm_unpacklo_ps(super_scales, super_scales), _mm_broadcastss_ps(scales));
    folded_ = _mm_fmadd_ps(_mm_cvtepi32_ps(folded), lane_scales, folded_);
  }
  void store(float* out) const { out[0] = hsum(acc_) + hsum(folded_); }

 private:
  __m256 acc_ = _mm256_setzero_ps();
  __m128 folded_ = _mm_setzero_ps();
};

template <>
class RowAccumulator<4> {
 public:
  void add(const __m256i* sums, __m128 scales) {
    const __m256i rows01 = pair_sums(sums[0], sums[1]), rows23 = pair_sums(sums[2], sums[3]);
    const __m256i folded = _mm256_add_epi32(_mm256_unpacklo_epi64(rows01, rows23), _mm256_unpackhi_epi64(rows01, rows23));
    acc_ = _mm256_fmadd_ps(_mm256_cvtepi32_ps(folded), _mm256_set_m128(scales, scales), acc_);
  }
  void store(float* out) const {
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(acc_), _mm256_extractf128_ps(acc_, 1)));
  }
  void add_with_offsets(const __m256i* sums, const __m256i* offsets, __m128 scales, __m128 super_scales) {
    add(sums, _mm_mul_ps(scales, _mm_permute_ps(super_scales, 0x00)));
    add(offsets, _mm_mul_ps(scales, _mm_permute_ps(super_scales, 0x55)));
  }

 private:
  // Per 128-bit half: [a's lanes 0+2, b's 0+2, a's 1+3, b's 1+3].
  static __m256i pair_sums(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
  }

  __m256 acc_ = _mm256_setzero_ps();
};

// --- Activation quantization -----------------------------------------------

void quantize_q8_0_avx2(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    const float* x = src + b * kLegacyBlock;
    __m256 v[4];
    __m256 running = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      running = max_abs(v[k], running);
    }
    const float amax = hmax(running);
    blocks[b].d = encode_scale(amax / 127.0f);
    const __m256 inverse = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = round_clamped(_mm256_mul_ps(v[k], inverse), lo, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocks[b].qs), pack_to_bytes(q[0], q[1], q[2], q[3]));
  }
}

void quantize_q8_k_avx2(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* x = src + b * kSuperBlock;
    BlockQ8_K& out = blocks[b];
    __m256 running = _mm256_setzero_ps();
    for (int k = 0; k < kSuperBlock / 8; ++k) running = max_abs(_mm256_loadu_ps(x + 8 * k), running);
    const float amax = hmax(running);
    if (amax == 0 || std::isinf(amax)) {
      // The scalar kernel's extreme is zero or infinite exactly then.
      out = BlockQ8_K{};
      continue;
    }
    // The scalar extreme is the first value of largest magnitude: its
    // strict > keeps the earliest of equal magnitudes, and skips NaN.
    float extreme = 0;
    const __m256 target = _mm256_set1_ps(amax);
    for (int k = 0; k < kSuperBlock / 8; ++k) {
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * k)), target, _CMP_EQ_OQ));
      if (hits != 0) {
        extreme = x[8 * k + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float inverse_scalar = -127.0f / extreme;
    out.d = 1.0f / inverse_scalar;
    const __m256 inverse = _mm256_set1_ps(inverse_scalar);
    const __m256i ones_u8 = _mm256_set1_epi8(1);
    const __m256i ones_i16 = _mm256_set1_epi16(1);
    int32_t quad_sums[kSuperBlock / 4];  // sums of 4 consecutive q's
    for (int k = 0; k < kSuperBlock / 32; ++k) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) q[j] = round_clamped(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * j), inverse), lo, hi);
      const __m256i bytes = pack_to_bytes(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + 32 * k), bytes);
      const __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(ones_u8, bytes), ones_i16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(quad_sums + 8 * k), quads);
    }
    for (int s = 0; s < kSuperBlock / 16; ++s)
      out.bsums[s] = static_cast<int16_t>(quad_sums[4 * s] + quad_sums[4 * s + 1] + quad_sums[4 * s + 2] +
                                          quad_sums[4 * s + 3]);
  }
}

// --- F16 ---------------------------------------------------------------------

void dequantize_f16_avx2(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(load128(h + i)));
  for (; i < n; ++i) dst[i] = half_to_float(h[i]);
}

void quantize_f16_avx2(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  // Round to nearest even; overflow to infinity and NaN quieting match
  // float_to_half bit for bit.
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) h[i] = float_to_half(src[i]);
}

// How each plain float type loads eight values as floats, and one (for a
// row's last few).
struct F32Format {
  using Value = float;
  static __m256 eight(const float* p) { return _mm256_loadu_ps(p); }
  static float one(float v) { return v; }
};
struct F16Format {
  using Value = uint16_t;
  static __m256 eight(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static float one(uint16_t h) { return half_to_float(h); }
};
struct BF16Format {
  using Value = uint16_t;
  // A bfloat16 is the top half of a float.
  static __m256 eight(const uint16_t* p) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16)); }
  static float one(uint16_t h) { return bfloat_to_float(h); }
};

// Float rows against rows of the same type: float FMAs over spans of 256
// values, each span then added in double, so long rows keep close to the
// scalar kernels' all-double sum.
template <int T, typename Format>
void dot_float_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  using Value = typename Format::Value;
  constexpr int64_t kSpan = 256;
  const auto* x = static_cast<const Value*>(w);
  const Value* y[T];
  for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const Value*>(a + t * stride);
  __m256d total[T];
  for (int t = 0; t < T; ++t) total[t] = _mm256_setzero_pd();
  int64_t i = 0;
  while (i + 8 <= n) {
    const int64_t span_end = std::min(n - n % 8, i + kSpan);
    // Two accumulators per row hide the FMA latency when T is 1.
    __m256 acc[T][2];
    for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (; i + 16 <= span_end; i += 16) {
      const __m256 w0 = Format::eight(x + i), w1 = Format::eight(x + i + 8);
      for (int t = 0; t < T; ++t) {
        acc[t][0] = _mm256_fmadd_ps(w0, Format::eight(y[t] + i), acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(w1, Format::eight(y[t] + i + 8), acc[t][1]);
      }
    }
    if (i < span_end) {  // one group of 8 left in the span
      const __m256 w0 = Format::eight(x + i);
      for (int t = 0; t < T; ++t) acc[t][0] = _mm256_fmadd_ps(w0, Format::eight(y[t] + i), acc[t][0]);
      i += 8;
    }
    for (int t = 0; t < T; ++t) {
      const __m256 span = _mm256_add_ps(acc[t][0], acc[t][1]);
      total[t] = _mm256_add_pd(total[t], _mm256_cvtps_pd(_mm256_castps256_ps128(span)));
      total[t] = _mm256_add_pd(total[t], _mm256_cvtps_pd(_mm256_extractf128_ps(span, 1)));
    }
  }
  for (int t = 0; t < T; ++t) {
    double sum = hsum(total[t]);
    for (int64_t j = i; j < n; ++j) sum += static_cast<double>(Format::one(x[j])) * Format::one(y[t][j]);
    out[t] = static_cast<float>(sum);
  }
}

// --- 32-value blocks against Q8_0 ---------------------------------------------

// Formats whose block decodes to 32 signed bytes w with x = d * w. (A Q8_0
// weight of -128 is fine: |w| = 128 still fits vpmaddubsw's unsigned side.)
// Q4_0 and Q5_0 store w + kLevelOffset as unsigned levels, which the
// one-token kernel with activation sums (dot_summed_one) takes as they are.
struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr int kLevelOffset = 8;
  static __m256i levels(const Block& b) { return unpack_nibbles(b.qs); }
  static __m256i weights(const Block& b) { return _mm256_sub_epi8(levels(b), _mm256_set1_epi8(kLevelOffset)); }
};
struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kLevelOffset = 16;
  static __m256i levels(const Block& b) { return _mm256_or_si256(unpack_nibbles(b.qs), fifth_bits(b.qh)); }
  static __m256i weights(const Block& b) { return _mm256_sub_epi8(levels(b), _mm256_set1_epi8(kLevelOffset)); }
};
struct Q8_0Format {
  using Block = BlockQ8_0;
  static __m256i weights(const Block& b) { return load256(b.qs); }
};
struct IQ4_NLFormat {
  using Block = BlockIQ4_NL;
  static __m256i weights(const Block& b) { return _mm256_shuffle_epi8(iq4_table(), unpack_nibbles(b.qs)); }
};
struct MXFP4Format {
  using Block = BlockMXFP4;
  static __m256i weights(const Block& b) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(load128(kMxfp4Values)), unpack_nibbles(b.qs));
  }
};

// The float scale of a weight block: a half in every format but MXFP4's.
template <typename Block>
inline float weight_scale(const Block& b) {
  return half(b.d);
}
inline float weight_scale(const BlockMXFP4& b) { return mxfp4_scale(b.e); }

template <int T, typename Format>
void dot_signed_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  RowAccumulator<T> acc;
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    const __m256i q = Format::weights(wb[b]);
    const __m256i q_abs = _mm256_abs_epi8(q);
    __m256i sums[T];
    for (int t = 0; t < T; ++t) sums[t] = dot_signed(q_abs, q, load256(act<BlockQ8_0>(a, stride, t, b).qs));
    acc.add(sums, _mm_mul_ps(row_scales_q8_0<T>(a, stride, b), _mm_set1_ps(weight_scale(wb[b]))));
  }
  acc.store(out);
}

// Four halves as one 64-bit word, for a single conversion (vcvtph2ps).
inline int64_t four_halves(const uint16_t* h) {
  const uint32_t low = h[0] | static_cast<uint32_t>(h[1]) << 16, high = h[2] | static_cast<uint32_t>(h[3]) << 16;
  return static_cast<int64_t>(low | static_cast<uint64_t>(high) << 32);
}

// dot for one row, four blocks at a time: their sums are folded like four
// rows' (RowAccumulator<4>), so that one conversion and one multiply-add
// serve four blocks and the scales are converted four at a time. A tail
// of fewer than four blocks takes zeros in place of the missing ones.
template <typename Format>
void dot_signed_one(const void* w, const uint8_t* a, size_t, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const auto* ab = reinterpret_cast<const BlockQ8_0*>(a);
  const int64_t blocks = n / kLegacyBlock;
  RowAccumulator<4> acc;
  auto add_four = [&](int64_t b, int present) __attribute__((always_inline)) {
    __m256i sums[4];
    // The eight scales (halves) are gathered in general registers: a
    // vpinsrw per half costs AMD cores two vector operations.
    uint16_t dw[4] = {}, da[4] = {};
    for (int j = 0; j < 4; ++j) {
      if (j < present) {
        const __m256i q = Format::weights(wb[b + j]);
        sums[j] = dot_signed(_mm256_abs_epi8(q), q, load256(ab[b + j].qs));
        dw[j] = wb[b + j].d;
        da[j] = ab[b + j].d;
      } else {
        sums[j] = _mm256_setzero_si256();
      }
    }
    const __m256 both = _mm256_cvtph_ps(_mm_set_epi64x(four_halves(da), four_halves(dw)));
    acc.add(sums, _mm_mul_ps(_mm256_castps256_ps128(both), _mm256_extractf128_ps(both, 1)));
  };
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) add_four(b, 4);
  if (b < blocks) add_four(b, static_cast<int>(blocks - b));
  float four[4];
  acc.store(four);
  out[0] = (four[0] + four[1]) + (four[2] + four[3]);
}

// --- Octets (packed_q8_0.h): eight blocks side by side ---------------------

// Transposes eight vectors as an 8 x 8 matrix of dwords: afterwards lane j
// of v[k] holds what lane k of v[j] held.
inline void transpose_dwords(__m256i* v) {
  __m256i a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    a[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int k = 0; k < 2; ++k) {
      b[i + k] = _mm256_unpacklo_epi64(a[i + k], a[i + k + 2]);
      b[i + k + 2] = _mm256_unpackhi_epi64(a[i + k], a[i + k + 2]);
    }
  // b[0], b[2], b[1], b[3] hold rows 0-3 of columns 0-3 in their low halves
  // and of columns 4-7 in their high halves; b[4..7] the same of rows 4-7.
  const int order[4] = {0, 2, 1, 3};
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_permute2x128_si256(b[order[k]], b[order[k] + 4], 0x20);
    v[k + 4] = _mm256_permute2x128_si256(b[order[k]], b[order[k] + 4], 0x31);
  }
}

// SummedOctets' weights: a block after the last whole eight.
struct OffsetLevels {
  uint16_t d, m;
  uint8_t qs[32];
};
static_assert(sizeof(OffsetLevels) == SummedOctets::kTailWeightBytes);

template <typename Layout>
constexpr bool kSummedOctets = std::is_same_v<Layout, SummedOctets>;

// The weights' blocks after the last whole eight.
template <typename Layout>
using OctetTailBlock = std::conditional_t<kSummedOctets<Layout>, OffsetLevels, BlockQ8_0>;

// The weights' side of the octets: each block decoded to 32 bytes with its
// scale, so that one kernel serves every format whose blocks decode that
// way: signed bytes (Format::weights) in Octets, the rows growing to Q8_0's
// size; unsigned levels (Format::levels) and the offset m in SummedOctets.
template <typename Layout>
size_t octet_weight_bytes(int64_t n) {
  return static_cast<size_t>(n / kLegacyBlock) * (Layout::kWeightBytes / Layout::kBlocks);
}

template <typename Format, typename Layout>
void repack_octets(const void* w, size_t w_stride, int64_t rows, int64_t n, void* out) {
  constexpr bool kSums = kSummedOctets<Layout>;
  const int64_t blocks = n / kLegacyBlock, whole = blocks / Layout::kBlocks * Layout::kBlocks;
  auto* dst = static_cast<uint8_t*>(out);
  auto decoded = [](const typename Format::Block& b) {
    if constexpr (kSums) return Format::levels(b); else return Format::weights(b);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const auto* row = reinterpret_cast<const typename Format::Block*>(static_cast<const uint8_t*>(w) + r * w_stride);
    for (int64_t first = 0; first < whole; first += Layout::kBlocks, dst += Layout::kWeightBytes) {
      __m256i v[8];
      uint16_t scales[8], offsets[8];
      for (int j = 0; j < 8; ++j) {
        v[j] = decoded(row[first + j]);
        scales[j] = row[first + j].d;
        if constexpr (kSums) offsets[j] = row[first + j].m;
      }
      transpose_dwords(v);
      for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * k), v[k]);
      std::memcpy(dst + 8 * 32, scales, sizeof scales);
      if constexpr (kSums) std::memcpy(dst + 8 * 32 + sizeof scales, offsets, sizeof offsets);
    }
    for (int64_t b = whole; b < blocks; ++b, dst += sizeof(OctetTailBlock<Layout>)) {
      OctetTailBlock<Layout> block;
      block.d = row[b].d;
      if constexpr (kSums) block.m = row[b].m;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs), decoded(row[b]));
      std::memcpy(dst, &block, sizeof block);
    }
  }
}

// Four float vectors' lane sums as one vector: [sum(a), sum(b), sum(c), sum(d)].
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3 per half
  const __m256 cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
  const __m256 all = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd))),
                                   _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(ab), _mm256_castps_pd(cd))));
  return _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1));
}

// dot4 between repacked weights and packed activations, both octets: per
// eight blocks, each row's eight lanes gather one block's sum each, and
// one conversion and one multiply-add per row apply the eight scales (and,
// in SummedOctets, one more multiply-add the eight offsets). Levels are
// signed in Octets, so vpmaddubsw takes their magnitudes and the
// activations with their signs; unsigned in SummedOctets, it takes them
// as they are.
// MatMul calls this once per weight row and slice (a few thousand values),
// so what happens around the loop counts too: the four sums stay in
// registers and are folded together once at the end (with the results
// kept in arrays, g++ zeroed and spilled them around the loop, a fifth of
// the kernel's time on rows of 2048 values).
template <typename Layout>
void dot4_octets(const void* w, const void* packed, int64_t n, float* out) {
  constexpr bool kSums = kSummedOctets<Layout>;
  const auto* weights = static_cast<const uint8_t*>(w);
  const auto* values = static_cast<const uint8_t*>(packed);
  const int64_t blocks = n / kLegacyBlock, whole = blocks / Layout::kBlocks * Layout::kBlocks;
  auto product = [](__m256i q, __m256i q_abs, __m256i y) { return kSums ? dot_unsigned(q, y) : dot_signed(q_abs, q, y); };
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t first = 0; first < whole;
       first += Layout::kBlocks, weights += Layout::kWeightBytes, values += Layout::kActivationBytes) {
    __m256i sums[4];
    for (__m256i& s : sums) s = _mm256_setzero_si256();
    // Unrolled fully, g++ schedules all 32 products ahead of their adds and
    // spills them: llvm-mca puts that loop at 1.5 cycles per block and row
    // on Zen 3 and 4.3 on Zen 2, this one at 1.1 and 2.0 (and it measured
    // 5-8% faster on a Sapphire Rapids core).
#pragma GCC unroll 2
    for (int v = 0; v < 8; ++v) {
      const __m256i q = load256(weights + 32 * v), q_abs = kSums ? q : _mm256_abs_epi8(q);
      for (int t = 0; t < 4; ++t) sums[t] = _mm256_add_epi32(sums[t], product(q, q_abs, load256(values + 256 * t + 32 * v)));
    }
    const __m256 weight_scales = _mm256_cvtph_ps(load128(weights + 8 * 32));
    const auto* row_scales = reinterpret_cast<const float*>(values + 4 * 256);
    const auto* row_sums = reinterpret_cast<const float*>(values + SummedOctets::kSumsOffset);
    const __m256 weight_offsets =
        kSums ? _mm256_cvtph_ps(load128(weights + 8 * 32 + 8 * sizeof(uint16_t))) : _mm256_setzero_ps();
    auto accumulate = [&](int t, __m256& acc) __attribute__((always_inline)) {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(weight_scales, _mm256_loadu_ps(row_scales + 8 * t)), acc);
      if constexpr (kSums) acc = _mm256_fmadd_ps(weight_offsets, _mm256_loadu_ps(row_sums + 8 * t), acc);
    };
    accumulate(0, acc0);
    accumulate(1, acc1);
    accumulate(2, acc2);
    accumulate(3, acc3);
  }
  __m128 total = hsum4(acc0, acc1, acc2, acc3);
  // Blocks after the last whole eight (rows not a multiple of 256 values).
  if (whole < blocks) {
    RowAccumulator<4> tail;
    for (int64_t b = whole; b < blocks;
         ++b, weights += sizeof(OctetTailBlock<Layout>), values += Layout::kTailActivationBytes) {
      OctetTailBlock<Layout> block;
      std::memcpy(&block, weights, sizeof block);
      const __m256i q = load256(block.qs), q_abs = kSums ? q : _mm256_abs_epi8(q);
      __m256i sums[4];
      for (int t = 0; t < 4; ++t) sums[t] = product(q, q_abs, load256(values + 32 * t));
      tail.add(sums, _mm_mul_ps(_mm_loadu_ps(reinterpret_cast<const float*>(values + 4 * 32)), _mm_set1_ps(half(block.d))));
      if constexpr (kSums)
        total = _mm_fmadd_ps(_mm_set1_ps(half(block.m)),
                             _mm_loadu_ps(reinterpret_cast<const float*>(values + SummedOctets::kTailSumsOffset)), total);
    }
    float tails[4];
    tail.store(tails);
    total = _mm_add_ps(total, _mm_loadu_ps(tails));
  }
  _mm_storeu_ps(out, total);
}

template <typename Format, typename Layout>
const PackedDot* octets() {
  static const PackedDot form{Layout::bytes, Layout::pack, dot4_octets<Layout>, octet_weight_bytes<Layout>,
                              repack_octets<Format, Layout>};
  return &form;
}

// --- One token with activation sums ----------------------------------------
//
// Q4_0, Q5_0, Q4_1 and Q5_1 hold unsigned levels q with x = d * q + offset
// per block: offset = m for Q4_1 and Q5_1, -8 d and -16 d for Q4_0 and Q5_0
// (which store w + 8 and w + 16). So sum x * y over a block is
//   d * dy * (q . yq) + offset * dy * (sum of yq),
// and with each activation block's dy * sum at hand, vpmaddubsw multiplies
// the levels as they are. The signed kernels spend three more operations per
// block on the bias and vpmaddubsw's sign rules, and the offset kernels one
// more multiply per block for the sum; on one token their arithmetic, not
// memory, set the pace of decoding (Q4_0 streamed 15 GB/s from a matrix in
// cache here, Q8_0 31). One token's activations are therefore packed once
// per matrix product with those sums, four blocks to a group: their 4 x 32
// quants, then the 4 scales dy and the 4 values dy * sum as floats.
//
// The signed formats (Q8_0, IQ4_NL) take the same packed form, without
// the sums, for its scales: as floats, four to a load, where gathering four halves
// from the blocks took ten operations in general registers. With the
// constant four blocks of a full group this made the Q8_0 kernel 22 -> 19
// cycles per 256 values in cache (Zen 5), and decoding a Llama-3.2-1B-shaped
// Q8_0 model reached 94 % of the roofline instead of 90 (medians of nine
// alternating pairs; twelfth session in docs/perf-log/sessions-1-13.md).
struct SummedQ8 {
  static constexpr int64_t kBlocks = 4;
  static constexpr size_t kScalesOffset = kBlocks * kLegacyBlock;
  static constexpr size_t kSumsOffset = kScalesOffset + kBlocks * sizeof(float);
  static constexpr size_t kGroupBytes = kSumsOffset + kBlocks * sizeof(float);

  // A partial last group takes a whole group's bytes. For k a multiple of
  // 128 values (so of 256, as PackedDot asks) values k.. start at bytes(k).
  static size_t bytes(int64_t n) {
    return static_cast<size_t>((n / kLegacyBlock + kBlocks - 1) / kBlocks) * kGroupBytes;
  }

  // kSums: whether the sums are needed (formats with unsigned levels); for
  // the others their slots stay zero.
  template <bool kSums>
  static void pack(const void* a, size_t, int64_t n, void* packed) {
    const auto* in = static_cast<const BlockQ8_0*>(a);
    auto* out = static_cast<uint8_t*>(packed);
    const int64_t blocks = n / kLegacyBlock;
    std::memset(out, 0, bytes(n));  // the missing blocks of a partial group count zero
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* group = out + (b / kBlocks) * kGroupBytes;
      const int64_t j = b % kBlocks;
      std::memcpy(group + j * kLegacyBlock, in[b].qs, kLegacyBlock);
      const float scale = half(in[b].d);
      std::memcpy(group + kScalesOffset + j * sizeof(float), &scale, sizeof scale);
      if constexpr (kSums) {
        int sum = 0;
        for (int8_t q : in[b].qs) sum += q;
        const float scaled_sum = scale * static_cast<float>(sum);
        std::memcpy(group + kSumsOffset + j * sizeof(float), &scaled_sum, sizeof scaled_sum);
      }
    }
  }
};

// Formats that store unsigned levels: Q4_0 and Q5_0 (w + kLevelOffset),
// Q4_1 and Q5_1 (kLevelOffset 0: an offset m of their own).
template <typename Format>
constexpr bool kHasLevels = requires { Format::kLevelOffset; };
template <typename Format>
constexpr bool kHasOwnOffset = requires { requires Format::kLevelOffset == 0; };

// 8 int32 lanes of sums of block x's products with activations y: its
// levels as stored, or its signed weights.
template <typename Format>
inline __m256i block_products(const typename Format::Block& x, __m256i y) {
  if constexpr (kHasLevels<Format>) {
    return dot_unsigned(Format::levels(x), y);  // per pair at most 2 * 31 * 128: inside int16
  } else {
    const __m256i q = Format::weights(x);
    return dot_signed(_mm256_abs_epi8(q), q, y);
  }
}

template <typename Format>
void dot_summed_one(const void* w, const void* packed, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const int64_t blocks = n / kLegacyBlock;
  RowAccumulator<4> products;  // the four blocks of a group fold like four rows
  __m128 offsets = _mm_setzero_ps();
  // The group from block b, of which `present` blocks exist; inlined with
  // present = 4 for every full group, so that loop tests nothing per block.
  auto add_group = [&](int64_t b, const uint8_t* group, int present) __attribute__((always_inline)) {
    __m256i sums[SummedQ8::kBlocks];
    uint16_t d[SummedQ8::kBlocks] = {}, m[SummedQ8::kBlocks] = {};
    for (int j = 0; j < SummedQ8::kBlocks; ++j) {
      if (j < present) {
        const typename Format::Block& x = wb[b + j];
        sums[j] = block_products<Format>(x, load256(group + j * kLegacyBlock));
        d[j] = x.d;
        if constexpr (kHasOwnOffset<Format>) m[j] = x.m;
      } else {
        sums[j] = _mm256_setzero_si256();
      }
    }
    const __m128 activation_scales = _mm_loadu_ps(reinterpret_cast<const float*>(group + SummedQ8::kScalesOffset));
    const __m128 scaled_sums = _mm_loadu_ps(reinterpret_cast<const float*>(group + SummedQ8::kSumsOffset));
    if constexpr (!kHasLevels<Format>) {
      products.add(sums, _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(four_halves(d))), activation_scales));
    } else if constexpr (kHasOwnOffset<Format>) {
      const __m256 d_and_m = _mm256_cvtph_ps(_mm_set_epi64x(four_halves(m), four_halves(d)));
      products.add(sums, _mm_mul_ps(_mm256_castps256_ps128(d_and_m), activation_scales));
      offsets = _mm_fmadd_ps(_mm256_extractf128_ps(d_and_m, 1), scaled_sums, offsets);
    } else {
      const __m128 d_w = _mm_cvtph_ps(_mm_cvtsi64_si128(four_halves(d)));
      products.add(sums, _mm_mul_ps(d_w, activation_scales));
      offsets = _mm_fmadd_ps(_mm_mul_ps(d_w, _mm_set1_ps(-Format::kLevelOffset)), scaled_sums, offsets);
    }
  };
  const auto* group = static_cast<const uint8_t*>(packed);
  int64_t b = 0;
  for (; b + SummedQ8::kBlocks <= blocks; b += SummedQ8::kBlocks, group += SummedQ8::kGroupBytes)
    add_group(b, group, SummedQ8::kBlocks);
  if (b < blocks) add_group(b, group, static_cast<int>(blocks - b));
  float four[4];
  products.store(four);
  out[0] = ((four[0] + four[1]) + (four[2] + four[3])) + hsum(offsets);
}

template <typename Format>
const PackedDot* summed_one() {
  static const PackedDot form{SummedQ8::bytes, SummedQ8::pack<kHasLevels<Format>>, dot_summed_one<Format>};
  return &form;
}

template <typename Format>
KernelEntry signed_kernels() {
  KernelEntry entry = dots<dot_signed_one<Format>, dot_signed_rows<4, Format>>();
  entry.packed4 = octets<Format, Octets>();
  entry.packed1 = summed_one<Format>();
  return entry;
}

// x = d * q + m with q unsigned: the offset needs each activation block's sum.
struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int kLevelOffset = 0;  // the offset is m
  static __m256i levels(const Block& b) { return unpack_nibbles(b.qs); }
};
struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int kLevelOffset = 0;
  static __m256i levels(const Block& b) { return _mm256_or_si256(unpack_nibbles(b.qs), fifth_bits(b.qh)); }
};

template <int T, typename Format>
void dot_offset_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const __m256i ones = _mm256_set1_epi8(1);
  RowAccumulator<T> acc;
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    const __m256i q = Format::levels(wb[b]);
    __m256i dots[T], activation_sums[T];
    for (int t = 0; t < T; ++t) {
      const __m256i y = load256(act<BlockQ8_0>(a, stride, t, b).qs);
      dots[t] = dot_unsigned(q, y);
      activation_sums[t] = dot_unsigned(ones, y);
    }
    const __m128 da = row_scales_q8_0<T>(a, stride, b);
    acc.add(dots, _mm_mul_ps(da, _mm_set1_ps(half(wb[b].d))));
    acc.add(activation_sums, _mm_mul_ps(da, _mm_set1_ps(half(wb[b].m))));
  }
  acc.store(out);
}

template <typename Format>
KernelEntry offset_kernels() {
  KernelEntry entry = dots<dot_offset_rows<1, Format>, dot_offset_rows<4, Format>>();
  entry.packed1 = summed_one<Format>();
  entry.packed4 = octets<Format, SummedOctets>();
  return entry;
}

// --- K-quants and IQ4_XS against Q8_K -------------------------------------------
//
// Every 256-value block is handled as 16 groups of 16 values (a 32-value
// group is two with the same scale): value v is
//   d * scale[v / 16] * q[v] - dmin * offset[v / 16].
// A Format supplies d, dmin, the offsets as 16 int16 in group order (they
// multiply Q8_K's 16 group sums, which is all a per-group constant needs),
// the scales as 16 int16 with the even groups in the low 128-bit half and
// the odd groups in the high half (or, with kScaleBytes, the eight 32-value
// groups' scales as bytes 0..7 of both halves), and the q's in 8 chunks of
// 32 values.
// Chunk c covers groups 2c and 2c + 1: its vpmaddubsw pair sums meet group
// 2c's scale in the low half and group 2c + 1's in the high half, and with
// that layout both come from one in-lane shuffle (chunk_scales).

struct KHeader {
  __m256i scales;        // 16 x int16, even groups low, odd groups high (or bytes: chunk_scales)
  __m256i offsets;       // 16 x int16, group order
  __m128 super_scales;   // d, -dmin (0 where the format has none), 0, 0
};


// Super-block scales from d and dmin stored next to each other, converted
// together (super_scale in simd_x86.h converts a lone d).
template <typename Block>
inline __m128 super_scales(const Block& b) {
  static_assert(offsetof(Block, dmin) == offsetof(Block, d) + sizeof b.d, "d and dmin must be adjacent");
  uint32_t both;
  std::memcpy(&both, &b.d, sizeof both);
  return _mm_xor_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(both))), _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));
}

// Group order -> even groups then odd groups, for 16 bytes.
inline __m128i even_then_odd(__m128i bytes) {
  return _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
}

// Scales of eight 32-value groups (bytes 0..7) as KHeader::scales: both
// 16-value halves of group g carry its scale, so each half holds all 8.
inline __m256i scales_of_32_groups(__m128i bytes) {
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(bytes, bytes));
}

// Chunk c's scales: int16 lane c of each half, or with kScaleBytes, byte c
// of each half widened to every lane.
template <int kC, bool kScaleBytes>
inline __m256i chunk_scales(__m256i scales) {
  constexpr int kPick = kScaleBytes ? (0x80 << 8) | kC : ((2 * kC + 1) << 8) | (2 * kC);
  return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<short>(kPick)));
}

// Bits [kFrom, kFrom + kWidth) of every byte moved to [kTo, kTo + kWidth),
// the other bits cleared. 16-bit shifts are fine: whatever crosses from
// one byte into the other lands outside the mask.
template <int kFrom, int kTo, int kWidth = 1>
inline __m256i move_bits(__m256i v) {
  if constexpr (kFrom > kTo) v = _mm256_srli_epi16(v, kFrom - kTo);
  if constexpr (kFrom < kTo) v = _mm256_slli_epi16(v, kTo - kFrom);
  return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(((1 << kWidth) - 1) << kTo)));
}

// Q2_K's 2-bit values and Q3_K's low bits: chunk c = 4 * half + k is bits
// 2k..2k+1 of the half's 32 bytes.
template <int kC>
inline __m256i two_bit_chunk(const uint8_t* qs) {
  return move_bits<2 * (kC % 4), 0, 2>(load256(qs + 32 * (kC / 4)));
}

// Q4_K's and Q5_K's nibbles: chunk c is the low (c even) or high (c odd)
// nibbles of bytes 32 * (c / 2) .. + 31.
template <int kC>
inline __m256i nibble_chunk(const uint8_t* qs) {
  return move_bits<4 * (kC % 2), 0, 4>(load256(qs + 32 * (kC / 2)));
}

// Q4_K's and Q5_K's header keeps the decoded bytes as they come, scales
// 0..7 then mins 0..7 in each half (kScaleBytes): chunk_scales widens the
// one it needs, and a shuffle spreads the mins to Q8_K's groups of 16.
template <typename Block>
inline KHeader header_6bit(const Block& b) {
  const __m256i s = scales_6bit_twice(b.scales);
  const __m256i mins = _mm256_shuffle_epi8(s, _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1,  //
                                                               12, -1, 12, -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
  return {s, mins, super_scales(b)};
}

struct Q2_KFormat {
  using Block = BlockQ2_K;
  static constexpr Offsets kOffsets = Offsets::kOwnScale;
  static constexpr bool kSigned = false;
  static constexpr bool kScaleBytes = false;
  static KHeader header(const Block& b) {
    const ScalesAndMins s = q2_k_scales(b.scales);
    return {_mm256_cvtepu8_epi16(even_then_odd(s.scales)), _mm256_cvtepu8_epi16(s.mins), super_scales(b)};
  }
  template <int kC>
  static __m256i chunk(const Block& b) { return two_bit_chunk<kC>(b.qs); }
};

struct Q3_KFormat {
  using Block = BlockQ3_K;
  static constexpr Offsets kOffsets = Offsets::kSameScale;
  static constexpr bool kSigned = false;
  static constexpr bool kScaleBytes = false;
  static KHeader header(const Block& b) {
    const __m128i scales = q3_k_scales(b.scales);
    // q is stored + 4 (the top bit clear means -4): offset 4 * scale.
    return {_mm256_cvtepi8_epi16(even_then_odd(scales)), _mm256_slli_epi16(_mm256_cvtepi8_epi16(scales), 2), super_scale(b.d)};
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    return _mm256_or_si256(two_bit_chunk<kC>(b.qs), move_bits<kC, 2>(load256(b.hmask)));
  }
};

struct Q4_KFormat {
  using Block = BlockQ4_K;
  static constexpr Offsets kOffsets = Offsets::kOwnScale;
  static constexpr bool kSigned = false;
  static constexpr bool kScaleBytes = true;
  static KHeader header(const Block& b) { return header_6bit(b); }
  template <int kC>
  static __m256i chunk(const Block& b) { return nibble_chunk<kC>(b.qs); }
};

struct Q5_KFormat {
  using Block = BlockQ5_K;
  static constexpr Offsets kOffsets = Offsets::kOwnScale;
  static constexpr bool kSigned = false;
  static constexpr bool kScaleBytes = true;
  static KHeader header(const Block& b) { return header_6bit(b); }
  // Bit 4 of chunk c's value l is bit c of qh[l].
  template <int kC>
  static __m256i chunk(const Block& b) {
    return _mm256_or_si256(nibble_chunk<kC>(b.qs), move_bits<kC, 4>(load256(b.qh)));
  }
};

struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr Offsets kOffsets = Offsets::kSameScale;
  static constexpr bool kSigned = false;
  static constexpr bool kScaleBytes = false;
  static KHeader header(const Block& b) {
    const __m128i scales = load128(b.scales);
    // q is stored + 32: offset 32 * scale.
    return {_mm256_cvtepi8_epi16(even_then_odd(scales)), _mm256_slli_epi16(_mm256_cvtepi8_epi16(scales), 5), super_scale(b.d)};
  }
  // Chunk c = 4 * half + k: low nibble from ql[64 * half + 32 * (k % 2) + l]
  // (the low nibble for k < 2, the high one after), top 2 bits from
  // qh[32 * half + l] at bit 2k.
  template <int kC>
  static __m256i chunk(const Block& b) {
    constexpr int kHalf = kC / 4, kK = kC % 4;
    const __m256i low = move_bits<4 * (kK / 2), 0, 4>(load256(b.ql + 64 * kHalf + 32 * (kK % 2)));
    return _mm256_or_si256(low, move_bits<2 * kK, 4, 2>(load256(b.qh + 32 * kHalf)));
  }
};

struct IQ4_XSFormat {
  using Block = BlockIQ4_XS;
  static constexpr Offsets kOffsets = Offsets::kNone;
  static constexpr bool kSigned = true;
  static constexpr bool kScaleBytes = false;
  // Group g's 6-bit scale (stored + 32): its low 4 bits are nibble g of the
  // 32-bit word scales_l, its top 2 bits field g of the 16-bit scales_h.
  // Both are spread to byte g of a 64-bit word in general registers: built
  // byte by byte in memory, the vector load behind it waited for the
  // stores (IQ4_XS decoded at 12 GB/s, from cache too).
  static KHeader header(const Block& b) {
    uint32_t low_nibbles;
    std::memcpy(&low_nibbles, b.scales_l, sizeof low_nibbles);
    uint64_t low = low_nibbles;
    low = (low | low << 16) & 0x0000ffff0000ffffULL;
    low = (low | low << 8) & 0x00ff00ff00ff00ffULL;
    low = (low | low << 4) & 0x0f0f0f0f0f0f0f0fULL;
    uint64_t top = b.scales_h;
    top = (top | top << 24) & 0x000000ff000000ffULL;
    top = (top | top << 12) & 0x000f000f000f000fULL;
    top = (top | top << 6) & 0x0303030303030303ULL;
    const __m128i stored = _mm_cvtsi64_si128(static_cast<int64_t>(low | top << 4));
    const __m256i scales = _mm256_sub_epi16(scales_of_32_groups(stored), _mm256_set1_epi16(32));
    return {scales, _mm256_setzero_si256(), super_scale(b.d)};
  }
  // Group c's 32 indices are laid out as an IQ4_NL block; the chunk holds
  // the signed codebook levels.
  template <int kC>
  static __m256i chunk(const Block& b) { return _mm256_shuffle_epi8(iq4_table(), unpack_nibbles(b.qs + 16 * kC)); }
};

// --- The grid types (IQ2, IQ3, IQ1) ------------------------------------------------
//
// Chunk c is group c's 32 signed levels as iq_quants.cpp unpacks them: four
// 8-value grid points (eight 4-value ones for IQ3) gathered as words, with
// their signs applied. Group scales are the odd integers 2s + 1; the
// format's power of two joins the super-block scale d.

// Byte l of `four` copied to the 8 bytes of 64-bit word l.
inline __m256i spread_to_words(uint32_t four) {
  return _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(four)),
                             _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
}

// `levels` negated in byte j of 64-bit word l where bit j of byte l of `signs` is set.
inline __m256i with_signs(__m256i levels, uint32_t signs) {
  const __m256i bits = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread_to_words(signs), bits), bits);
  return _mm256_sub_epi8(_mm256_xor_si256(levels, negative), negative);
}

// The four 7-bit sign fields of an IQ2_XXS / IQ3_XXS group word as 4 sign bytes.
inline uint32_t sign_fields(uint32_t word) {
  return kSignBytes[word & 127] | kSignBytes[(word >> 7) & 127] << 8 | kSignBytes[(word >> 14) & 127] << 16 |
         static_cast<uint32_t>(kSignBytes[(word >> 21) & 127]) << 24;
}

// 2s + 1 in each int16 lane holding s.
inline __m256i odd(__m256i s) { return _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1)); }

// Odd scales of eight 32-value groups from s in bytes 0..7.
inline __m256i odd_scales_32(uint64_t s) { return odd(scales_of_32_groups(_mm_cvtsi64_si128(static_cast<int64_t>(s)))); }

// Odd scales of sixteen 16-value groups from s in bytes 0..15, group order.
inline __m256i odd_scales_16(__m128i s) { return odd(_mm256_cvtepu8_epi16(even_then_odd(s))); }

// Odd scales of sixteen 16-value groups from eight bytes, each with the
// even group's s in its low nibble and the odd group's in its high one.
inline __m256i odd_scales_16_nibbles(const uint8_t* nibbles) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(nibbles));
  const __m128i low = _mm_and_si128(v, _mm_set1_epi8(0x0f));
  const __m128i high = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
  return odd(_mm256_cvtepu8_epi16(_mm_unpacklo_epi64(low, high)));
}

inline KHeader grid_header(__m256i scales, __m128 d) { return {scales, _mm256_setzero_si256(), d}; }

// IQ1's levels 8 * point + 1, or - 1 where byte l of `negative_delta` (point l's) is 1.
inline __m256i iq1_levels(__m256i points, uint32_t negative_delta) {
  const __m256i twice = _mm256_add_epi8(points, points), four = _mm256_add_epi8(twice, twice);
  const __m256i minus = _mm256_sub_epi8(_mm256_setzero_si256(), spread_to_words(negative_delta));  // 0 or -1
  return _mm256_add_epi8(_mm256_add_epi8(four, four), _mm256_add_epi8(_mm256_set1_epi8(1), _mm256_add_epi8(minus, minus)));
}

// What the grid formats share: signed levels, no offsets, int16 scales.
struct GridFormat {
  static constexpr Offsets kOffsets = Offsets::kNone;
  static constexpr bool kSigned = true;
  static constexpr bool kScaleBytes = false;
};

struct IQ2_XXSFormat : GridFormat {
  using Block = BlockIQ2_XXS;
  static KHeader header(const Block& b) {
    uint64_t s = 0;
    for (int g = 0; g < 8; ++g) s |= static_cast<uint64_t>(b.qs[8 * g + 7] >> 4) << (8 * g);
    return grid_header(odd_scales_32(s), grid_scale<3>(b.d));
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    const uint8_t* q = b.qs + 8 * kC;
    const __m256i points = _mm256_setr_epi64x(static_cast<int64_t>(kGridIq2Xxs[q[0]]), static_cast<int64_t>(kGridIq2Xxs[q[1]]),
                                              static_cast<int64_t>(kGridIq2Xxs[q[2]]), static_cast<int64_t>(kGridIq2Xxs[q[3]]));
    return with_signs(points, sign_fields(load_u32(q + 4)));
  }
};

struct IQ2_XSFormat : GridFormat {
  using Block = BlockIQ2_XS;
  static KHeader header(const Block& b) { return grid_header(odd_scales_16_nibbles(b.scales), grid_scale<3>(b.d)); }
  template <int kC>
  static __m256i chunk(const Block& b) {
    const uint16_t* q = b.qs + 4 * kC;
    auto point = [&](int l) { return static_cast<int64_t>(kGridIq2Xs[q[l] & 511]); };
    const uint32_t signs = kSignBytes[q[0] >> 9] | kSignBytes[q[1] >> 9] << 8 | kSignBytes[q[2] >> 9] << 16 |
                           static_cast<uint32_t>(kSignBytes[q[3] >> 9]) << 24;
    return with_signs(_mm256_setr_epi64x(point(0), point(1), point(2), point(3)), signs);
  }
};

struct IQ2_SFormat : GridFormat {
  using Block = BlockIQ2_S;
  static KHeader header(const Block& b) { return grid_header(odd_scales_16_nibbles(b.scales), grid_scale<3>(b.d)); }
  template <int kC>
  static __m256i chunk(const Block& b) {
    auto point = [&](int l) {
      return static_cast<int64_t>(kGridIq2S[b.qs[4 * kC + l] | (((b.qh[kC] >> (2 * l)) & 3) << 8)]);
    };
    return with_signs(_mm256_setr_epi64x(point(0), point(1), point(2), point(3)), load_u32(b.qs + 32 + 4 * kC));
  }
};

struct IQ3_XXSFormat : GridFormat {
  using Block = BlockIQ3_XXS;
  static KHeader header(const Block& b) {
    uint64_t s = 0;
    for (int g = 0; g < 8; ++g) s |= static_cast<uint64_t>(b.qs[64 + 4 * g + 3] >> 4) << (8 * g);
    return grid_header(odd_scales_32(s), grid_scale<2>(b.d));
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    const uint8_t* q = b.qs + 8 * kC;
    auto point = [&](int k) { return static_cast<int>(kGridIq3Xxs[q[k]]); };
    const __m256i points = _mm256_setr_epi32(point(0), point(1), point(2), point(3), point(4), point(5), point(6), point(7));
    return with_signs(points, sign_fields(load_u32(b.qs + 64 + 4 * kC)));
  }
};

struct IQ3_SFormat : GridFormat {
  using Block = BlockIQ3_S;
  static KHeader header(const Block& b) {
    uint32_t nibbles;
    std::memcpy(&nibbles, b.scales, sizeof nibbles);
    uint64_t s = 0;
    for (int g = 0; g < 8; ++g) s |= static_cast<uint64_t>((nibbles >> (4 * g)) & 0x0f) << (8 * g);
    return grid_header(odd_scales_32(s), super_scale(b.d));
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    auto point = [&](int k) { return static_cast<int>(kGridIq3S[b.qs[8 * kC + k] | (((b.qh[kC] >> k) & 1) << 8)]); };
    const __m256i points = _mm256_setr_epi32(point(0), point(1), point(2), point(3), point(4), point(5), point(6), point(7));
    return with_signs(points, load_u32(b.signs + 4 * kC));
  }
};

struct IQ1_SFormat : GridFormat {
  using Block = BlockIQ1_S;
  static KHeader header(const Block& b) {
    uint64_t s = 0;
    for (int g = 0; g < 8; ++g) s |= static_cast<uint64_t>((b.qh[g] >> 12) & 7) << (8 * g);
    return grid_header(odd_scales_32(s), grid_scale<3>(b.d));
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    const unsigned high = b.qh[kC];
    auto point = [&](int l) { return static_cast<int64_t>(kGridIq1S[b.qs[4 * kC + l] | (((high >> (3 * l)) & 7) << 8)]); };
    return iq1_levels(_mm256_setr_epi64x(point(0), point(1), point(2), point(3)), high & 0x8000 ? 0x01010101u : 0u);
  }
};

struct IQ1_MFormat : GridFormat {
  using Block = BlockIQ1_M;
  static KHeader header(const Block& b) {
    uint16_t words[4];
    std::memcpy(words, b.scales, sizeof words);
    alignas(16) uint8_t s[16];
    for (int g = 0; g < 8; ++g) {
      s[2 * g] = static_cast<uint8_t>((words[g / 2] >> (6 * (g % 2))) & 7);
      s[2 * g + 1] = static_cast<uint8_t>((words[g / 2] >> (6 * (g % 2) + 3)) & 7);
    }
    const auto d = static_cast<uint16_t>((words[0] >> 12) | ((words[1] >> 8) & 0x00f0) | ((words[2] >> 4) & 0x0f00) |
                                         (words[3] & 0xf000));
    return grid_header(odd_scales_16(load128(s)), grid_scale<3>(d));
  }
  template <int kC>
  static __m256i chunk(const Block& b) {
    auto nibble = [&](int l) { return (b.qh[2 * kC + l / 2] >> (4 * (l % 2))) & 0x0f; };
    auto point = [&](int l) { return static_cast<int64_t>(kGridIq1S[b.qs[4 * kC + l] | ((nibble(l) & 7) << 8)]); };
    uint32_t negative = 0;
    for (int l = 0; l < 4; ++l) negative |= static_cast<uint32_t>(nibble(l) >> 3) << (8 * l);
    return iq1_levels(_mm256_setr_epi64x(point(0), point(1), point(2), point(3)), negative);
  }
};

// Calls f.template operator()<c>() for c = 0..7: chunk indices must be
// compile-time constants, they pick shift counts and shuffles.
template <typename F, int... kC>
inline void for_chunks(F&& f, std::integer_sequence<int, kC...>) {
  (f.template operator()<kC>(), ...);
}

// Keeps v in a register at this point. GCC otherwise re-associates a
// token's chain of integer sums into a wide tree over all 8 chunks, whose
// partial sums (32 vectors at T = 4) no longer fit the 16 registers.
inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

template <int T, typename Format>
void dot_k_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  RowAccumulator<T> acc;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const typename Format::Block& x = wb[b];
    const KHeader h = Format::header(x);
    // Per lane at most 32 values * 63 * 128 * 128: far inside int32.
    __m256i sums[T];
    for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_si256();
    for_chunks(
        [&]<int kC>() {
          const __m256i q = Format::template chunk<kC>(x);
          const __m256i scale = chunk_scales<kC, Format::kScaleBytes>(h.scales);
          const __m256i q_abs = Format::kSigned ? _mm256_abs_epi8(q) : q;
          for (int t = 0; t < T; ++t) {
            __m256i y = load256(act<BlockQ8_K>(a, stride, t, b).qs + 32 * kC);
            if constexpr (Format::kSigned) y = _mm256_sign_epi8(y, q);
            sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, y), scale));
            keep_in_register(sums[t]);
          }
        },
        std::make_integer_sequence<int, 8>());
    const __m128 da = row_scales_q8_k<T>(a, stride, b);
    if constexpr (Format::kOffsets == Offsets::kOwnScale) {
      __m256i offsets[T];
      for (int t = 0; t < T; ++t) offsets[t] = _mm256_madd_epi16(load256(act<BlockQ8_K>(a, stride, t, b).bsums), h.offsets);
      acc.add_with_offsets(sums, offsets, da, h.super_scales);
    } else {
      if constexpr (Format::kOffsets == Offsets::kSameScale)
        for (int t = 0; t < T; ++t)
          sums[t] = _mm256_sub_epi32(sums[t], _mm256_madd_epi16(load256(act<BlockQ8_K>(a, stride, t, b).bsums), h.offsets));
      acc.add(sums, _mm_mul_ps(da, T == 1 ? h.super_scales : _mm_permute_ps(h.super_scales, 0x00)));
    }
  }
  acc.store(out);
}

// One token against Q4_K, with its Q8_K activations packed
// (kQ4_KOnePieces). Each 16-byte piece of qs holds 16 values of chunk 2p
// in its low nibbles and the same 16 of chunk 2p + 1 in its high ones; a
// broadcast load puts it in both halves and one variable shift brings the
// high half's nibbles down, so each vector covers two chunks, the
// activations packed to match. The two vectors of a chunk pair then share
// their scales: their vpmaddubsw sums (at most 2 * 15 * 128 each) are
// added as int16 before a single vpmaddwd, where dot_k_rows needs a
// vpmaddwd, a scale shuffle and an add per chunk.
constexpr int kQ4_KOnePieces[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};

void dot_q4_k_one(const void* w, const void* packed, int64_t n, float* out) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(packed);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i high_half_down = _mm256_setr_epi64x(0, 0, 4, 4);
  RowAccumulator<1> acc;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const BlockQ4_K& x = wb[b];
    const KHeader h = Q4_KFormat::header(x);
    auto levels = [&](int piece) {
      const __m256i both = _mm256_broadcastsi128_si256(load128(x.qs + 16 * piece));
      return _mm256_and_si256(_mm256_srlv_epi64(both, high_half_down), nibble);
    };
    __m256i sums = _mm256_setzero_si256();
    for_chunks(
        [&]<int kP>() {
          const int8_t* a = ab[b].qs + 64 * kP;
          const __m256i products = _mm256_add_epi16(_mm256_maddubs_epi16(levels(2 * kP), load256(a)),
                                                    _mm256_maddubs_epi16(levels(2 * kP + 1), load256(a + 32)));
          // Group 2p's scale in the low half, 2p + 1's in the high. (Written
          // out, the mask is one constant; built from two 128-bit halves, GCC
          // assembled all four at every call and kept them on the stack.)
          constexpr short kLow = static_cast<short>(0x8000 | (2 * kP)), kHigh = static_cast<short>(0x8000 | (2 * kP + 1));
          const __m256i scales = _mm256_shuffle_epi8(
              h.scales, _mm256_setr_epi16(kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow,  //
                                          kHigh, kHigh, kHigh, kHigh, kHigh, kHigh, kHigh, kHigh));
          sums = _mm256_add_epi32(sums, _mm256_madd_epi16(products, scales));
        },
        std::make_integer_sequence<int, 4>());
    const __m256i offsets = _mm256_madd_epi16(load256(ab[b].bsums), h.offsets);
    acc.add_with_offsets(&sums, &offsets, _mm_set_ss(ab[b].d), h.super_scales);
  }
  acc.store(out);
}

// --- Q4_K in stripes of eight rows (k_stripes.h) -----------------------------
//
// A lane is one row: vpmaddubsw multiplies four of its levels with four of
// a token's values broadcast to every lane, into two int16 sums; vpmaddwd
// then applies a group's scale, the same in both halves of each lane.

// The int16 pair (v, v) in each dword lane holding v (0 <= v < 2^15).
inline __m256i twice16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }

// Eight Q4_K rows against the first kTokens tokens of a packed group of
// four: out[8t + r], each token's bits the same for any kTokens (one token
// alone is dot_one). A group's eight steps add up in int16 before its
// scale applies (at most 8 x 2 x 15 x 128).
// bench --matmul q4_k, a 64-token prefill, 2 threads: 148 G products/s
// against dot_k_rows's 128.
template <int kTokens>
void dot_q4_k_stripe(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = Q4_KStripes<8>;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const uint8_t*>(packed);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
  __m256 acc[kTokens];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  const size_t call_bytes = static_cast<size_t>(n / kSuperBlock) * Layout::kBlockBytes;
  for (int64_t b = 0; b < n / kSuperBlock; ++b, stripe += Layout::kBlockBytes, act += Layout::kActivationBytes) {
    __m256i sums[kTokens];
    for (__m256i& s : sums) s = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      if constexpr (kTokens == 1)
        stream_ahead(stripe + g * Layout::kBlockBytes / 8, Layout::kBlockBytes / 8, call_bytes);
      __m256i group_sums[kTokens];
      for (__m256i& s : group_sums) s = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i bytes = load256(stripe + 32 * (8 * (g / 2) + s));
        const __m256i levels = _mm256_and_si256(g % 2 == 0 ? bytes : _mm256_srli_epi16(bytes, 4), low_nibbles);
        for (int t = 0; t < kTokens; ++t) {
          const __m256i values = _mm256_set1_epi32(static_cast<int>(load_u32(act + kSuperBlock * t + 32 * g + 4 * s)));
          group_sums[t] = _mm256_add_epi16(group_sums[t], _mm256_maddubs_epi16(levels, values));
        }
      }
      const __m256i scale = twice16(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
          reinterpret_cast<const __m128i*>(stripe + Layout::kScalesOffset + 8 * g))));
      for (int t = 0; t < kTokens; ++t) sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(group_sums[t], scale));
    }
    const __m256 d = _mm256_cvtph_ps(load128(stripe + Layout::kDOffset));
    const __m256 dmin = _mm256_cvtph_ps(load128(stripe + Layout::kDminOffset));
    const auto* token_d = reinterpret_cast<const float*>(act + Layout::kActivationScalesOffset);
    for (int t = 0; t < kTokens; ++t) {
      __m256i min_sums = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i mins = _mm256_cvtepu8_epi16(load128(stripe + Layout::kMinsOffset + 16 * p));
        const uint8_t* group_sums = act + Layout::kSumsOffset + sizeof(int16_t) * (8 * t + 2 * p);
        min_sums = _mm256_add_epi32(min_sums, _mm256_madd_epi16(mins, _mm256_set1_epi32(static_cast<int>(load_u32(group_sums)))));
      }
      const __m256 da = _mm256_set1_ps(token_d[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[t]), _mm256_mul_ps(d, da), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sums), _mm256_mul_ps(dmin, da), acc[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// --- Q8_0 in stripes of eight rows, with AVX-VNNI (packed_q8_0.h) ----------
//
// AVX-VNNI (Intel from Alder Lake, AMD from Zen 5) brings vpdpbusd to
// 256-bit registers without AVX-512. Q8_0 then takes AVX-512's stripe form
// at half the width: one vpdpbusd adds four products of each of eight rows
// for a token, where the octets spend a sign, a vpmaddubsw, a vpmaddwd and
// an add. Without AVX-VNNI the octets stay: vpmaddubsw on the biased
// weights would saturate.

// A stripe's block of levels as vpdpbusd meets them, step s of eight
// against a token's dword s (as AVX-512's twins of these, eight rows).
struct Q8_0StripeLevels {
  using Layout = Q8_0Stripes<8>;
  static constexpr int kStartShift = 0;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    for (int s = 0; s < 8; ++s) add(s, load256(block + 32 * s));
  }
  static __m256 scales(const uint8_t* block) { return _mm256_cvtph_ps(load128(block + Layout::kDOffset)); }
};
// Applies add(s, levels) to the nibbles of a Q4_0 or MXFP4 stripe block,
// each nibble turned into its level by `level`.
template <typename Add, typename Level>
inline void each_nibble(const uint8_t* block, Add add, Level level) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
  for (int s = 0; s < 4; ++s) {
    const __m256i q = load256(block + 32 * s);
    add(s, level(_mm256_and_si256(q, low_nibbles)));
    add(s + 4, level(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibbles)));
  }
}
struct Q4_0StripeLevels {
  using Layout = Q4_0Stripes<8>;
  static constexpr int kStartShift = Layout::kStartShift;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    each_nibble(block, add, [](__m256i q) { return q; });
  }
  static __m256 scales(const uint8_t* block) { return _mm256_cvtph_ps(load128(block + Layout::kDOffset)); }
};
struct Mxfp4StripeLevels {
  using Layout = Mxfp4Stripes<8>;
  static constexpr int kStartShift = Layout::kStartShift;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    const __m256i levels = _mm256_add_epi8(_mm256_broadcastsi128_si256(load128(kMxfp4Values)),
                                           _mm256_set1_epi8(Layout::kLevelOffset));
    each_nibble(block, add, [levels](__m256i q) { return _mm256_shuffle_epi8(levels, q); });
  }
  // mxfp4_scale of eight exponent bytes.
  static __m256 scales(const uint8_t* block) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + Layout::kScaleOffset)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i below_two = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, below_two));
  }
};

// Eight rows of Q8_0, Q4_0 or MXFP4 (kLevels) against the first kTokens tokens of
// a packed group of four: out[8t + r], each token's bits the same for any
// kTokens (one token alone is dot_one); a token's integer sum goes in two
// chains, one token's alone in four, which changes no bit (integer sums
// are exact).
template <typename kLevels, int kTokens>
__attribute__((target("avxvnni"))) void dot_legacy_stripe(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = typename kLevels::Layout;
  using Activations = Q8_0Stripes<8>;
  constexpr int kChains = kTokens == 1 ? 4 : 2;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const uint8_t*>(packed);
  __m256 acc[kTokens];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kLegacyBlock; ++b, stripe += Layout::kBlockBytes, act += Activations::kActivationBytes) {
    __m256i sums[kTokens][kChains];
    for (int t = 0; t < kTokens; ++t) {
      const int32_t start = static_cast<int32_t>(load_u32(act + Activations::kSumsOffset + sizeof(int32_t) * t));
      sums[t][0] = _mm256_set1_epi32(start >> kLevels::kStartShift);
      for (int k = 1; k < kChains; ++k) sums[t][k] = _mm256_setzero_si256();
    }
    kLevels::each(stripe, [&](int s, __m256i q) __attribute__((target("avxvnni"))) {
      for (int t = 0; t < kTokens; ++t) {
        __m256i& chain = sums[t][s % kChains];
        chain = _mm256_dpbusd_avx_epi32(chain, q, _mm256_set1_epi32(static_cast<int>(load_u32(act + 32 * t + 4 * s))));
      }
    });
    const __m256 d = kLevels::scales(stripe);
    const auto* token_d = reinterpret_cast<const float*>(act + Activations::kScalesOffset);
    for (int t = 0; t < kTokens; ++t) {
      __m256i total = sums[t][0];
      for (int k = 1; k < kChains; ++k) total = _mm256_add_epi32(total, sums[t][k]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(token_d[t])), acc[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(out + 8 * t, acc[t]);
}

// The stripe form of kLevels' type: eight rows, Q8_0Stripes' activations.
template <typename kLevels>
const PackedDot* legacy_stripes() {
  using Layout = typename kLevels::Layout;
  using Activations = Q8_0Stripes<8>;
  static const PackedDot four{Activations::bytes, Activations::pack, dot_legacy_stripe<kLevels, 4>,
                              Layout::weight_bytes, Layout::repack,  8,
                              dot_legacy_stripe<kLevels, 1>};
  return &four;
}

// Eight F16 rows against the first kTokens tokens of a packed group of
// four (f16_stripes.h): out[8t + r]. A token's sums go in two chains,
// column c adding to chain c % 2, added at the end (four tokens' chains
// fill half the sixteen registers): the same float steps for any kTokens,
// so that one token alone (dot_one) gets the bits it gets among four.
template <int kTokens>
void dot_f16_stripe(const void* w, const void* packed, int64_t n, float* out) {
  constexpr int kChains = 2;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const float*>(packed);
  __m256 acc[kTokens][kChains];
  for (auto& token : acc)
    for (__m256& a : token) a = _mm256_setzero_ps();
  auto column = [&](int64_t c, int chain) {
    const __m256 values = _mm256_cvtph_ps(load128(stripe + F16Stripes<8>::kColumnBytes * c));
    for (int t = 0; t < kTokens; ++t)
      acc[t][chain] = _mm256_fmadd_ps(values, _mm256_set1_ps(act[4 * c + t]), acc[t][chain]);
  };
  int64_t c = 0;
  for (; c + kChains <= n; c += kChains)
    for (int k = 0; k < kChains; ++k) column(c + k, k);
  for (int k = 0; c < n; ++c, ++k) column(c, k);
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(out + 8 * t, _mm256_add_ps(acc[t][0], acc[t][1]));
}

}  // namespace

bool avx_vnni_supported() {
  // CPUID leaf 7, subleaf 1, EAX bit 4 (clang 14's __builtin_cpu_supports
  // does not know "avxvnni"). The YMM state is AVX2's, checked with it.
  unsigned eax, ebx, ecx, edx;
  return avx2_supported() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
}

bool avx2_supported() {
  // Not every compiler's __builtin_cpu_supports knows "f16c" (clang 14
  // rejects it): read its CPUID bit. The OS support for the YMM state it
  // shares with AVX2 is part of the "avx2" check.
  unsigned eax, ebx, ecx, edx;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void install_avx2(OverrideFn record) {
  record(TensorType::F32, dots<dot_float_rows<1, F32Format>, dot_float_rows<4, F32Format>>());
  KernelEntry f16 = dots<dot_float_rows<1, F16Format>, dot_float_rows<4, F16Format>>();
  f16.dequantize = dequantize_f16_avx2;
  f16.quantize = quantize_f16_avx2;
  using F16Layout = F16Stripes<8>;
  static const PackedDot f16_four{F16Layout::bytes,  F16Layout::pack, dot_f16_stripe<4>, F16Layout::weight_bytes,
                                  F16Layout::repack, 8,               dot_f16_stripe<1>};
  f16.packed4 = &f16_four;
  record(TensorType::F16, f16);
  record(TensorType::BF16, dots<dot_float_rows<1, BF16Format>, dot_float_rows<4, BF16Format>>());
  KernelEntry q8_0 = signed_kernels<Q8_0Format>();
  q8_0.quantize = quantize_q8_0_avx2;
  KernelEntry q4_0 = signed_kernels<Q4_0Format>();
  if (avx_vnni_supported()) {
    q8_0.packed4 = legacy_stripes<Q8_0StripeLevels>();
    q4_0.packed4 = legacy_stripes<Q4_0StripeLevels>();
  }
  record(TensorType::Q8_0, q8_0);
  record(TensorType::Q8_K, {.quantize = quantize_q8_k_avx2});
  record(TensorType::Q4_0, q4_0);
  record(TensorType::Q5_0, signed_kernels<Q5_0Format>());
  record(TensorType::IQ4_NL, signed_kernels<IQ4_NLFormat>());
  // MXFP4's byte scales do not fit the octets, which read halves; the
  // stripes read them as they are.
  KernelEntry mxfp4 = dots<dot_signed_rows<1, MXFP4Format>, dot_signed_rows<4, MXFP4Format>>();
  if (avx_vnni_supported()) mxfp4.packed4 = legacy_stripes<Mxfp4StripeLevels>();
  record(TensorType::MXFP4, mxfp4);
  record(TensorType::Q4_1, offset_kernels<Q4_1Format>());
  record(TensorType::Q5_1, offset_kernels<Q5_1Format>());
  record(TensorType::Q2_K, dots<dot_k_rows<1, Q2_KFormat>, dot_k_rows<4, Q2_KFormat>>());
  record(TensorType::Q3_K, dots<dot_k_rows<1, Q3_KFormat>, dot_k_rows<4, Q3_KFormat>>());
  static const PackedDot q4_k_one{q8_k_packed_bytes, pack_q8_k_pieces<kQ4_KOnePieces>, dot_q4_k_one};
  using Q4_KLayout = Q4_KStripes<8>;
  static const PackedDot q4_k_four{Q4_KLayout::bytes,  Q4_KLayout::pack, dot_q4_k_stripe<4>, Q4_KLayout::weight_bytes,
                                   Q4_KLayout::repack, 8,                dot_q4_k_stripe<1>};
  KernelEntry q4_k = dots<dot_k_rows<1, Q4_KFormat>, dot_k_rows<4, Q4_KFormat>>();
  q4_k.packed1 = &q4_k_one;
  q4_k.packed4 = &q4_k_four;
  record(TensorType::Q4_K, q4_k);
  record(TensorType::Q5_K, dots<dot_k_rows<1, Q5_KFormat>, dot_k_rows<4, Q5_KFormat>>());
  // Q6_K in stripes of eight rows lost here (bench --matmul q6_k, a
  // 64-token prefill: 127 G products/s against 129): unpacking its six-bit
  // levels for eight rows at a time costs more than the scales it saves.
  record(TensorType::Q6_K, dots<dot_k_rows<1, Q6_KFormat>, dot_k_rows<4, Q6_KFormat>>());
  record(TensorType::IQ4_XS, dots<dot_k_rows<1, IQ4_XSFormat>, dot_k_rows<4, IQ4_XSFormat>>());
  record(TensorType::IQ2_XXS, dots<dot_k_rows<1, IQ2_XXSFormat>, dot_k_rows<4, IQ2_XXSFormat>>());
  record(TensorType::IQ2_XS, dots<dot_k_rows<1, IQ2_XSFormat>, dot_k_rows<4, IQ2_XSFormat>>());
  record(TensorType::IQ2_S, dots<dot_k_rows<1, IQ2_SFormat>, dot_k_rows<4, IQ2_SFormat>>());
  record(TensorType::IQ3_XXS, dots<dot_k_rows<1, IQ3_XXSFormat>, dot_k_rows<4, IQ3_XXSFormat>>());
  record(TensorType::IQ3_S, dots<dot_k_rows<1, IQ3_SFormat>, dot_k_rows<4, IQ3_SFormat>>());
  record(TensorType::IQ1_S, dots<dot_k_rows<1, IQ1_SFormat>, dot_k_rows<4, IQ1_SFormat>>());
  record(TensorType::IQ1_M, dots<dot_k_rows<1, IQ1_MFormat>, dot_k_rows<4, IQ1_MFormat>>());
}

}  // namespace revis::quant

#endif
