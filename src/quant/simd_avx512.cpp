// AVX-512 kernels (x86-64 with AVX-512 F, BW, VL, VNNI and BMI2: Intel Ice Lake
// and later servers, AMD Zen 4 and later). This file alone is compiled with
// those flags; dispatch.cpp calls in only when the CPU has them.
//
// Why a second x86 backend: on such a CPU the AVX2 dot products decode a
// token at about two thirds of the memory bandwidth, because the kernels,
// not the memory, are the limit (a pass over the same weights that only
// loads them streams half again as fast). The cost is in instructions:
// 32-value pieces, and scales shuffled into place per piece. Here a 512-bit
// register holds two pieces, vpdpbusd / vpdpwssd fuse the multiply with the
// accumulation, and a weight block costs about half the instructions.
//
// The backend starts from install_avx2()'s table and overrides the weight
// types that make up nearly all of the bytes of the usual model files: Q8_0,
// Q4_0 and the K-quants Q4_K and Q6_K (Q4_K_M files are Q4_K + Q6_K), and
// for Q8_0, Q4_0 and Q5_0 (the K-quant mixes' type for rows that are not
// whole super-blocks) adds packed forms of dot4 and (Q8_0) dot (quant.h's
// PackedDot); Q4_K's, Q6_K's, Q8_0's, Q4_0's and F16's packed dot4 take
// sixteen rows at once (k_stripes.h, packed_q8_0.h, f16_stripes.h), and so
// do their dot_one for one token.
// It also overrides the other K-quants (Q2_K, Q3_K, Q5_K) and the grid types
// (IQ2_*, IQ3_*, IQ1_*): two groups of grid points to a register, their
// signs a mask (built with BMI2, which every CPU with AVX-512 has). The
// integer arithmetic is the scalar kernels', exactly; only the float
// summation order differs (tests/quant/simd_test.cpp).
#include "quant/simd.h"

#if defined(__x86_64__)

// GCC 12's own AVX-512 headers start casts and reductions from
// _mm512_undefined_*(), which its -Wuninitialized then reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/f16_stripes.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/packed_q8_0.h"
#include "quant/k_stripes.h"
#include "quant/simd_x86.h"

namespace revis::quant {
namespace {

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Two 32-byte pieces, at p and q, as one register: p in the low half. (A
// masked broadcast from memory, unlike an insert, does not need the
// shuffle port, which the scales below keep busy.)
inline __m512i pair(const void* p, const void* q) {
  return _mm512_mask_broadcast_i64x4(_mm512_castsi256_si512(load256(p)), 0xf0, load256(q));
}

// Two halves as 16 floats: eight of each, the first in the low half.
inline __m512 pair_scales(uint16_t low, uint16_t high) {
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(high)), _mm_set1_epi16(static_cast<short>(low))));
}

// Mask of the high 256 bits, for masked operations on 16-bit lanes.
constexpr __mmask32 kHighHalf = 0xffff0000u;

// --- Q8_0 and Q4_0 against Q8_0 ------------------------------------------------
//
// w * a with w signed: vpdpbusd wants one unsigned side, so it multiplies
// |w| with a carrying w's sign (exact: no Q8_0 activation is -128). Blocks
// go two to a register; an odd last block takes the 256-bit path.

struct Q8_0Pair {
  using Block = BlockQ8_0;
  static __m512i weights(const Block* b) { return pair(b[0].qs, b[1].qs); }
  static __m256i weights(const Block& b) { return load256(b.qs); }
};

struct Q4_0Pair {
  using Block = BlockQ4_0;
  // Value j < 16 is the low nibble of byte j, j + 16 the high one; minus 8.
  static __m256i weights(const Block& b) {
    const __m128i packed = load128(b.qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
  static __m512i weights(const Block* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(weights(b[0])), weights(b[1]), 1);
  }
};

struct Q5_0Pair {
  using Block = BlockQ5_0;
  // Q4_0's nibbles with a fifth bit each, bit j of qh for value j; minus
  // 16: values whose bit is clear drop by 16, the others are their nibble.
  static __m256i weights(const Block& b) {
    const __m128i packed = load128(b.qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
    const __mmask32 clear = _knot_mask32(_cvtu32_mask32(load_u32(b.qh)));
    return _mm256_mask_sub_epi8(q, clear, q, _mm256_set1_epi8(16));
  }
  static __m512i weights(const Block* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(weights(b[0])), weights(b[1]), 1);
  }
};

template <int T, typename Format>
void dot_signed_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  using Block = typename Format::Block;
  const auto* wb = static_cast<const Block*>(w);
  const BlockQ8_0* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_0*>(a + t * stride);
  const int64_t blocks = n / kLegacyBlock;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const __m512i q = Format::weights(wb + b);
    const __m512i q_abs = _mm512_abs_epi8(q);
    const __mmask64 negative = _mm512_movepi8_mask(q);
    const __m512 dw = pair_scales(wb[b].d, wb[b + 1].d);
    for (int t = 0; t < T; ++t) {
      const __m512i y = pair(ab[t][b].qs, ab[t][b + 1].qs);
      const __m512i y_signed = _mm512_mask_sub_epi8(y, negative, _mm512_setzero_si512(), y);
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q_abs, y_signed);
      const __m512 d = _mm512_mul_ps(dw, pair_scales(ab[t][b].d, ab[t][b + 1].d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), d, acc[t]);
    }
  }
  float tail[T] = {};
  if (b < blocks) {
    const __m256i q = Format::weights(wb[b]);
    const __m256i q_abs = _mm256_abs_epi8(q);
    const float dw = half(wb[b].d);
    for (int t = 0; t < T; ++t) {
      const __m256i y_signed = _mm256_sign_epi8(load256(ab[t][b].qs), q);
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q_abs, y_signed);
      const __m256 s = _mm256_cvtepi32_ps(sums);
      const __m128 folded = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
      tail[t] = _mm_cvtss_f32(_mm_dp_ps(folded, _mm_set1_ps(1.0f), 0xf1)) * dw * half(ab[t][b].d);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]) + tail[t];
}

// dot and dot4 against packed_q8_0.h's quads. Four blocks' weights, 128
// values, fill two registers; vector v of the quad needs, in lane 4j + i,
// dword Quads::dword(i, v) of block j, which one two-source permute per
// vector picks out. Adding 128 (xor 0x80) makes the weights vpdpbusd's
// unsigned side, and the quad's starting sums take the 128 x activations
// back out, so each lane sums exactly its share of one block's products.
// One multiply-add then scales sixteen such sums, where pairs of blocks
// needed one per pair and row.
template <int kRows, typename Format>
void dot_quads(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = Quads<kRows>;
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const auto* quad = static_cast<const uint8_t*>(packed);
  const int64_t blocks = n / kLegacyBlock;
  const __m512i unsigned_bias = _mm512_set1_epi8(static_cast<char>(0x80));
  // Block j is dwords 8j..8j+7 of the two registers together.
  static constexpr auto kPick = [] {
    std::array<std::array<int32_t, 16>, Layout::kVectors> pick{};
    for (int v = 0; v < Layout::kVectors; ++v)
      for (int lane = 0; lane < 16; ++lane) pick[v][lane] = 8 * (lane / 4) + Layout::dword(lane % 4, v);
    return pick;
  }();
  __m512i pick[Layout::kVectors];
  for (int v = 0; v < Layout::kVectors; ++v) pick[v] = load512(kPick[v].data());
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  // Four blocks from block b, of which `present` exist: the last quad may
  // be short, its missing blocks zeros, as are the activations and scales
  // they meet. Inlined with present = 4 for every full quad, so that loop
  // has no test per block.
  auto add_quad = [&](int64_t b, const uint8_t* quad, int present) __attribute__((always_inline)) {
    auto weights = [&](int j) { return j < present ? Format::weights(wb[b + j]) : _mm256_setzero_si256(); };
    auto scale = [&](int j) { return static_cast<short>(j < present ? wb[b + j].d : 0); };
    const __m512i w01 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(weights(0)), weights(1), 1), unsigned_bias);
    const __m512i w23 = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(weights(2)), weights(3), 1), unsigned_bias);
    const __m128 dw4 = _mm_cvtph_ps(_mm_setr_epi16(scale(0), scale(1), scale(2), scale(3), 0, 0, 0, 0));
    __m512 scales;  // weight scale x activation scale, per lane
    if constexpr (kRows == 1) {
      // The block's scales are multiplied before they are spread.
      const __m128 d4 = _mm_mul_ps(dw4, _mm_loadu_ps(reinterpret_cast<const float*>(quad + Layout::kScalesOffset)));
      scales = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(d4));
    } else {
      scales = _mm512_mul_ps(_mm512_permutexvar_ps(spread, _mm512_castps128_ps512(dw4)),
                             _mm512_loadu_ps(quad + Layout::kScalesOffset));
    }
    __m512i sums = _mm512_slli_epi32(_mm512_cvtepi16_epi32(load256(quad + Layout::kSumsOffset)), 7);
    for (int v = 0; v < Layout::kVectors; ++v)
      sums = _mm512_dpbusd_epi32(sums, _mm512_permutex2var_epi32(w01, pick[v], w23), load512(quad + 64 * v));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scales, acc);
  };
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4, quad += Layout::kBytes) add_quad(b, quad, 4);
  if (b < blocks) add_quad(b, quad, static_cast<int>(blocks - b));
  if constexpr (kRows == 1) {
    out[0] = _mm512_reduce_add_ps(acc);
  } else {
    // Row t's result is lane t of each 128-bit quarter.
    const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1)));
  }
}

// A vpdpbusd sum kept in kChains registers, step k adding to chain
// k % kChains, and added up at the end: one token alone would otherwise
// wait on each vpdpbusd's latency before the next. Integer sums are exact
// (and wrap alike in any order), so the chains change no bit of a result:
// a one-token kernel may use more of them than its four-token twin.
template <int kChains>
struct DpbusdSum {
  __m512i chain[kChains];
  explicit DpbusdSum(__m512i start = _mm512_setzero_si512()) {
    chain[0] = start;
    for (int k = 1; k < kChains; ++k) chain[k] = _mm512_setzero_si512();
  }
  void add(int step, __m512i u8, __m512i s8) {
    __m512i& c = chain[step % kChains];
    c = _mm512_dpbusd_epi32(c, u8, s8);
  }
  __m512i total() const {
    __m512i sum = chain[0];
    for (int k = 1; k < kChains; ++k) sum = _mm512_add_epi32(sum, chain[k]);
    return sum;
  }
};

// A stripe's block of levels as vpdpbusd meets them (packed_q8_0.h), step
// s of eight against a token's dword s: Q8_0's biased bytes as stored;
// Q4_0's nibbles, the low ones of dword s at step s, the high ones at s + 4;
// MXFP4's nibbles the same way, each looked up as its biased level. And
// the sixteen rows' scales as floats.
struct Q8_0StripeLevels {
  using Layout = Q8_0Stripes<16>;
  static constexpr int kStartShift = 0;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    for (int s = 0; s < 8; ++s) add(s, load512(block + 64 * s));
  }
  static __m512 scales(const uint8_t* block) { return _mm512_cvtph_ps(load256(block + Layout::kDOffset)); }
};
// Applies add(s, levels) to the nibbles of a Q4_0 or MXFP4 stripe block,
// each nibble turned into its level by `level`.
template <typename Add, typename Level>
inline void each_nibble(const uint8_t* block, Add add, Level level) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  for (int s = 0; s < 4; ++s) {
    const __m512i q = load512(block + 64 * s);
    add(s, level(_mm512_and_si512(q, low_nibbles)));
    add(s + 4, level(_mm512_and_si512(_mm512_srli_epi16(q, 4), low_nibbles)));
  }
}
struct Q4_0StripeLevels {
  using Layout = Q4_0Stripes<16>;
  static constexpr int kStartShift = Layout::kStartShift;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    each_nibble(block, add, [](__m512i q) { return q; });
  }
  static __m512 scales(const uint8_t* block) { return _mm512_cvtph_ps(load256(block + Layout::kDOffset)); }
};
struct Mxfp4StripeLevels {
  using Layout = Mxfp4Stripes<16>;
  static constexpr int kStartShift = Layout::kStartShift;
  template <typename Add>
  static void each(const uint8_t* block, Add add) {
    const __m512i levels = _mm512_add_epi8(_mm512_broadcast_i32x4(load128(kMxfp4Values)),
                                           _mm512_set1_epi8(Layout::kLevelOffset));
    each_nibble(block, add, [levels](__m512i q) { return _mm512_shuffle_epi8(levels, q); });
  }
  // mxfp4_scale of sixteen exponent bytes.
  static __m512 scales(const uint8_t* block) {
    const __m512i e = _mm512_cvtepu8_epi32(load128(block + Layout::kScaleOffset));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, subnormal));
  }
};

// Sixteen rows of Q8_0, Q4_0 or MXFP4 (kLevels) against the first kTokens tokens
// of a packed group of four (packed_q8_0.h's stripes): out[16t + r]. Each
// token's steps are the same for any kTokens, so one token alone (dot_one)
// gets the bits it gets among four. Per block and token, eight vpdpbusd add
// a row's 32 products in its lane to the token's starting sum, which takes
// the weights' offset back out; one multiply-add applies the sixteen rows'
// scales times the token's. Each token's sum goes in two chains, one
// token's alone in four (DpbusdSum).
template <typename kLevels, int kTokens>
void dot_legacy_stripe(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = typename kLevels::Layout;
  using Activations = Q8_0Stripes<16>;
  constexpr int kChains = kTokens == 1 ? 4 : 2;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const uint8_t*>(packed);
  __m512 acc[kTokens];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kLegacyBlock; ++b, stripe += Layout::kBlockBytes, act += Activations::kActivationBytes) {
    DpbusdSum<kChains> sums[kTokens];
    for (int t = 0; t < kTokens; ++t) {
      const int32_t start = static_cast<int32_t>(load_u32(act + Activations::kSumsOffset + sizeof(int32_t) * t));
      sums[t] = DpbusdSum<kChains>(_mm512_set1_epi32(start >> kLevels::kStartShift));
    }
    kLevels::each(stripe, [&](int s, __m512i q) {
      for (int t = 0; t < kTokens; ++t)
        sums[t].add(s, q, _mm512_set1_epi32(static_cast<int>(load_u32(act + 32 * t + 4 * s))));
    });
    const __m512 d = kLevels::scales(stripe);
    const auto* token_d = reinterpret_cast<const float*>(act + Activations::kScalesOffset);
    for (int t = 0; t < kTokens; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t].total()), _mm512_mul_ps(d, _mm512_set1_ps(token_d[t])), acc[t]);
  }
  for (int t = 0; t < kTokens; ++t) _mm512_storeu_ps(out + 16 * t, acc[t]);
}

// The stripe form of kLevels' type: sixteen rows, Q8_0Stripes' activations.
template <typename kLevels>
const PackedDot* legacy_stripes() {
  using Layout = typename kLevels::Layout;
  using Activations = Q8_0Stripes<16>;
  static const PackedDot four{Activations::bytes, Activations::pack, dot_legacy_stripe<kLevels, 4>,
                              Layout::weight_bytes, Layout::repack,  16,
                              dot_legacy_stripe<kLevels, 1>};
  return &four;
}

// kOneToken: whether the packed form of dot is this file's quads. Q4_0
// keeps AVX2's instead (activations with block sums, which multiplies its
// stored levels as they are): in MatMul from a matrix in cache it decoded
// at 23 GB/s, the quads at 18. Q5_0's fifth bit takes that form's
// advantage away: the quads decode it at 19.5 GB/s from memory, AVX2's at
// 18.6 (one thread).
template <typename Format, bool kOneToken>
KernelEntry signed_kernels() {
  static const PackedDot four{Quads<4>::bytes, Quads<4>::pack, dot_quads<4, Format>};
  KernelEntry entry = dots<dot_signed_rows<1, Format>, dot_signed_rows<4, Format>>();
  if constexpr (kOneToken) {
    static const PackedDot one{Quads<1>::bytes, Quads<1>::pack, dot_quads<1, Format>};
    entry.packed1 = &one;
  }
  entry.packed4 = &four;
  return entry;
}

// Q8_0 and Q4_0: stripes of sixteen rows for four tokens (and for one, in
// a model: batch invariance); the quads (Q8_0), AVX2's form with block sums
// (Q4_0) for one token of a matrix stored as rows.
template <typename Format, bool kOneToken, typename kLevels>
KernelEntry striped_legacy_kernels() {
  KernelEntry entry = signed_kernels<Format, kOneToken>();
  entry.packed4 = legacy_stripes<kLevels>();
  return entry;
}

// --- K-quants against Q8_K ---------------------------------------------------------
//
// A 256-value block is four pairs of 32-value chunks; pair p covers values
// 64p .. 64p + 63, which are contiguous in Q8_K's qs, so one 512-bit load
// brings a pair's activations. vpmaddubsw multiplies the unsigned levels
// with the activations into int16 sums of two, and vpdpwssd multiplies those
// with the 16-bit group scales and adds them up in int32, in one step.
// Offsets (Q2_K's and Q4_K's minimums, Q3_K's -4, Q6_K's -32) use Q8_K's
// sums of 16 values.

// Group scales reach a pair's 32 int16 lanes with one in-lane vpshufb (one
// uop, where a cross-lane vpermw is two): the format's header keeps int16
// scales in every 128-bit lane, and lane i of the result repeats the one in
// slot kSlot_i of that lane.
template <int kSlot0, int kSlot1, int kSlot2, int kSlot3>
inline __m512i spread_slots(__m512i scales) {
  // vpshufb control bytes 2s, 2s + 1 pick the int16 in slot s; twice per dword.
  constexpr auto pick = [](int s) { return (2 * s | (2 * s + 1) << 8) * 0x10001; };
  const __m512i control = _mm512_set_epi32(pick(kSlot3), pick(kSlot3), pick(kSlot3), pick(kSlot3), pick(kSlot2),
                                           pick(kSlot2), pick(kSlot2), pick(kSlot2), pick(kSlot1), pick(kSlot1),
                                           pick(kSlot1), pick(kSlot1), pick(kSlot0), pick(kSlot0), pick(kSlot0),
                                           pick(kSlot0));
  return _mm512_shuffle_epi8(scales, control);
}

// Where a block's group scales sit (a format's Scales), and which each
// 128-bit lane of pair p, that is group of 16 values 4p + i in lane i, takes.
// Eight scales of 32 values each: all eight in slots 0-7 of every lane.
struct ScalesOf32 {
  static __m512i from(__m128i bytes) { return _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(bytes)); }  // bytes 0-7
  template <int kP>
  static __m512i pair(__m512i scales) { return spread_slots<2 * kP, 2 * kP, 2 * kP + 1, 2 * kP + 1>(scales); }
};

// Sixteen scales of 16 values each: lane i holds those of groups i, i + 4,
// i + 8 and i + 12 in slots 0-3.
struct ScalesOf16 {
  static __m512i from(__m256i words) {  // int16, group order
    static constexpr auto kIndex = [] {
      std::array<int16_t, 32> index{};
      for (int e = 0; e < 32; ++e) index[e] = static_cast<int16_t>(e / 8 + 4 * (e % 4));
      return index;
    }();
    return _mm512_permutexvar_epi16(load512(kIndex.data()), _mm512_castsi256_si512(words));
  }
  template <int kP>
  static __m512i pair(__m512i scales) { return spread_slots<kP, kP, kP, kP>(scales); }
};

// What a format gives the kernel for one block: its group scales as int16
// (laid out as its Scales says), the offsets that multiply Q8_K's 16 group
// sums, and the float scales d and dmin in lanes 0 and 1 (converted by one
// instruction, not two).
struct KHeader {
  __m512i scales;
  __m256i offsets;
  __m128 d_dmin;
};

// A pair's 64 levels, unsigned; for a signed format (kSigned) the values
// whose sign is minus are the set bits of `negative`, bit j for value j.
struct PairLevels {
  __m512i q;
  __mmask64 negative = 0;
};

// Half kH of a block: pairs 2kH (even) and 2kH + 1 (odd).
struct HalfLevels {
  PairLevels even, odd;
};

// The float16 at p and the one after it, as floats in lanes 0 and 1.
inline __m128 two_halves(const uint16_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
}

// Bit kFrom of every byte at bit kTo, by a 16-bit shift: the bits that
// cross from the neighbouring byte are for the caller to mask off.
template <int kFrom, int kTo>
inline __m512i bit_to(__m512i v) {
  if constexpr (kFrom > kTo) return _mm512_srli_epi16(v, kFrom - kTo);
  if constexpr (kFrom < kTo) return _mm512_slli_epi16(v, kTo - kFrom);
  return v;
}

// Q3_K's hmask and Q5_K's qh keep one more bit of each value: bit c of
// byte l for value l of chunk c. That bit of half kH's pairs (chunks 4kH
// .. 4kH + 3) at bit kTo, the other bits cleared. The high half shifted
// down by 1 has chunk 4kH + 1's bit where the low half has 4kH's, and 4kH
// + 3's where it has 4kH + 2's.
template <int kH, int kTo>
inline HalfLevels one_more_bit(const uint8_t* bits) {
  __m512i v = _mm512_broadcast_i64x4(load256(bits));
  v = _mm512_mask_srli_epi16(v, kHighHalf, v, 1);
  const __m512i bit = _mm512_set1_epi8(1 << kTo);
  return {{_mm512_and_si512(bit_to<4 * kH, kTo>(v), bit)}, {_mm512_and_si512(bit_to<4 * kH + 2, kTo>(v), bit)}};
}

// Q2_K's values and Q3_K's low two bits: chunk c = 4h + k is bits 2k .. 2k
// + 1 of qs[32h .. 32h + 31], so half kH's four chunks come from the same
// 32 bytes; shifted down by 2, the high half has chunk 4kH + 1 where the
// low one has 4kH, and 4kH + 3 where it has 4kH + 2.
template <int kH>
inline HalfLevels two_bit_pairs(const uint8_t* qs) {
  __m512i v = _mm512_broadcast_i64x4(load256(qs + 32 * kH));
  v = _mm512_mask_srli_epi16(v, kHighHalf, v, 2);
  const __m512i two_bits = _mm512_set1_epi8(3);
  return {{_mm512_and_si512(v, two_bits)}, {_mm512_and_si512(_mm512_srli_epi16(v, 4), two_bits)}};
}

// Q2_K: x = d * scale * q - dmin * min per group of 16, scale and min the
// low and high nibbles of scales[group].
struct Q2_KPairs {
  using Block = BlockQ2_K;
  using Scales = ScalesOf16;
  static constexpr Offsets kOffsets = Offsets::kOwnScale;
  static constexpr bool kSigned = false;
  static KHeader header(const Block& b) {
    const ScalesAndMins s = q2_k_scales(b.scales);
    return {Scales::from(_mm256_cvtepu8_epi16(s.scales)), _mm256_cvtepu8_epi16(s.mins), two_halves(&b.d)};
  }
  template <int kH>
  static HalfLevels levels(const Block& b) { return two_bit_pairs<kH>(b.qs); }
};

// Q3_K and Q6_K: groups of 16, x = d * scale * (q - offset), q stored
// unsigned; the offsets are offset * scale, in the integer sum.
struct FixedOffsetLevels {
  using Scales = ScalesOf16;
  static constexpr Offsets kOffsets = Offsets::kSameScale;
  static constexpr bool kSigned = false;
};

// Q3_K: offset 4, q's top bit in hmask.
struct Q3_KPairs : FixedOffsetLevels {
  using Block = BlockQ3_K;
  static KHeader header(const Block& b) {
    const __m256i scales = _mm256_cvtepi8_epi16(q3_k_scales(b.scales));
    return {Scales::from(scales), _mm256_slli_epi16(scales, 2), super_scale(b.d)};
  }
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const HalfLevels low = two_bit_pairs<kH>(b.qs), top = one_more_bit<kH, 2>(b.hmask);
    return {{_mm512_or_si512(low.even.q, top.even.q)}, {_mm512_or_si512(low.odd.q, top.odd.q)}};
  }
};

// Q4_K's and Q5_K's header: eight 6-bit scales and mins, d and dmin.
struct SixBitScales {
  using Scales = ScalesOf32;
  static constexpr Offsets kOffsets = Offsets::kOwnScale;
  static constexpr bool kSigned = false;
  template <typename Block>
  static KHeader header(const Block& b) {
    const __m128i packed = scales_6bit(b.scales);  // scales 0..7, mins 0..7
    // Each min serves two groups of 16, as Q8_K's sums come.
    return {Scales::from(packed), _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(packed, packed)), two_halves(&b.d)};
  }
};

// Q4_K: x = d * scale * q - dmin * min per group of 32. Pair p is the low
// (chunk 2p) and high (chunk 2p + 1) nibbles of qs[32p .. 32p + 31]: the 32
// bytes go to both halves, the high half shifted down by 4.
template <int kH>
inline HalfLevels nibble_pairs(const uint8_t* qs) {
  auto pair = [&](int p) {
    const __m512i bytes = _mm512_broadcast_i64x4(load256(qs + 32 * p));
    return _mm512_and_si512(_mm512_mask_srli_epi16(bytes, kHighHalf, bytes, 4), _mm512_set1_epi8(0x0f));
  };
  return {{pair(2 * kH)}, {pair(2 * kH + 1)}};
}

struct Q4_KPairs : SixBitScales {
  using Block = BlockQ4_K;
  template <int kH>
  static HalfLevels levels(const Block& b) { return nibble_pairs<kH>(b.qs); }
};

// Q5_K: Q4_K's nibbles with a fifth bit each (one_more_bit).
struct Q5_KPairs : SixBitScales {
  using Block = BlockQ5_K;
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const HalfLevels q = nibble_pairs<kH>(b.qs);
    const HalfLevels top = one_more_bit<kH, 4>(b.qh);
    return {{_mm512_or_si512(q.even.q, top.even.q)}, {_mm512_or_si512(q.odd.q, top.odd.q)}};
  }
};

// Q6_K: offset 32. Chunk c = 4h + k takes its
// low nibble from ql[64h + 32(k % 2) + l] (the high nibble when k >= 2) and
// its top two bits from qh[32h + l] at bit 2k. Pair p = 2h + k / 2 thus
// covers ql[64h .. 64h + 63], low nibbles for p even and high for p odd, and
// bits 4(p % 2) and 4(p % 2) + 2 of qh. Both pairs of a half come from the
// same qh bytes, shifted once for the two.
struct Q6_KPairs : FixedOffsetLevels {
  using Block = BlockQ6_K;
  static KHeader header(const Block& b) {
    const __m128i bytes = load128(b.scales);
    // As ScalesOf16::from, but the signed bytes are put in place before they
    // are widened, which needs no cross-lane word permute.
    const __m128i by_lane = _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i lanes = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3),
                                                   _mm512_castsi256_si512(_mm256_cvtepi8_epi16(by_lane)));
    return {lanes, _mm256_slli_epi16(_mm256_cvtepi8_epi16(bytes), 5), _mm_cvtph_ps(_mm_cvtsi32_si128(b.d))};
  }
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const __m512i ql = load512(b.ql + 64 * kH);
    const __m512i nibble = _mm512_set1_epi8(0x0f), top_bits = _mm512_set1_epi8(0x30);
    __m512i qh = _mm512_broadcast_i64x4(load256(b.qh + 32 * kH));
    // The even pair's top bits are bits 0-1 (its low half) and 2-3 (its high
    // half) of qh, the odd pair's 4-5 and 6-7. The high half shifted down by
    // 2 has them at 0-1 and 4-5 in both halves.
    qh = _mm512_mask_srli_epi16(qh, kHighHalf, qh, 2);
    // low | (top & 0x30), the top bits moved to bits 4-5 first.
    const __m512i even = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, nibble), _mm512_slli_epi16(qh, 4), top_bits, 0xf8);
    const __m512i odd = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble), qh, top_bits, 0xf8);
    return {{even}, {odd}};
  }
};

// --- The grid types (IQ2, IQ3, IQ1) ------------------------------------------------
//
// Pair p is groups 2p and 2p + 1 of 32 values (iq_quants.cpp's): eight
// 8-value grid points (IQ2, IQ1) or sixteen 4-value ones (IQ3) in one
// register, loaded or looked up in registers (below). The points are unsigned, and their signs become a 64-bit mask
// with which one masked subtraction negates the activations they meet,
// where AVX2 spreads each sign bit to a byte and applies them with three
// instructions. Group scales are the odd integers 2s + 1; the format's
// power of two joins d.

template <typename Self>
struct GridPairs {
  static constexpr Offsets kOffsets = Offsets::kNone;
  static constexpr bool kSigned = true;
  template <int kH, typename Block>
  static HalfLevels levels(const Block& b) { return {Self::template pair<2 * kH>(b), Self::template pair<2 * kH + 1>(b)}; }
};

// The eight 8-value points of `grid` at index(0) .. index(7), loaded one by
// one with the indices computed in general registers. On Zen 5 that beat
// both vpgatherdq (IQ2_XXS 208 ns a row of 4096 values, against 159) and
// vector-computed indices stored and read back (IQ2_S 211 ns against 196).
template <size_t kPoints, typename Index>
inline __m512i points_of_8(const std::array<uint64_t, kPoints>& grid, Index index) {
  auto p = [&](int k) { return static_cast<int64_t>(grid[index(k)]); };
  return _mm512_set_epi64(p(7), p(6), p(5), p(4), p(3), p(2), p(1), p(0));
}

// The grids of up to 256 points (and IQ3_S's 512) go faster the other way:
// as 16-bit codes (iq_grids.h) looked up in registers, 32 points at a
// time, then widened (points_of_codes). Per row of 4096 values on Zen 5,
// one token: IQ2_XXS 147 ns against 157 loading points, IQ3_XXS 135
// against 262, IQ3_S 163 against 410. IQ2_XS, 512 points of 8 values, did
// not gain, IQ2_S's 1024 took twice as long (394 ns against 195), and
// IQ1's 2048 would take 32 searches.
//
// The entries of a table of codes at 32 indices (int16 lanes): every 64
// entries are two registers, which vpermt2w searches for index bits 0-5,
// and bits 6 and up choose among those candidates.
template <size_t kEntries>
inline __m512i lookup_codes(const std::array<uint16_t, kEntries>& table, __m512i indices) {
  constexpr size_t kTables = kEntries / 64;
  __m512i candidate[kTables];
  for (size_t t = 0; t < kTables; ++t)
    candidate[t] = _mm512_permutex2var_epi16(load512(table.data() + 64 * t), indices, load512(table.data() + 64 * t + 32));
  for (size_t n = kTables, bit = 6; n > 1; n /= 2, ++bit) {
    const __mmask32 upper = _mm512_test_epi16_mask(indices, _mm512_set1_epi16(static_cast<short>(1 << bit)));
    for (size_t t = 0; t < n / 2; ++t) candidate[t] = _mm512_mask_blend_epi16(upper, candidate[2 * t], candidate[2 * t + 1]);
  }
  return candidate[0];
}

// The points of 16-bit codes kFirst, kFirst + 1, ... of `codes` as a pair's
// 64 levels: 8 values a point with 2-bit level indices (IQ2) or 4 with
// 3-bit ones (IQ3). Each code is spread to the 16-bit words of its point,
// word i shifted down to its values 2i and 2i + 1, the odd byte's index
// moved up into that byte; vpshufb then maps indices to levels.
template <int kBits, int kFirst, const auto& kLevels>
inline __m512i points_of_codes(__m512i codes) {
  constexpr int kWordsPerPoint = kBits == 2 ? 4 : 2;
  static constexpr auto kLevelBytes = [] {
    std::array<uint8_t, 16> bytes{};
    for (size_t i = 0; i < std::size(kLevels); ++i) bytes[i] = kLevels[i];
    return bytes;
  }();
  static constexpr auto kSpread = [] {
    std::array<int16_t, 32> spread{};
    for (int e = 0; e < 32; ++e) spread[e] = static_cast<int16_t>(kFirst + e / kWordsPerPoint);
    return spread;
  }();
  static constexpr auto kShift = [] {
    std::array<int16_t, 32> shift{};
    for (int e = 0; e < 32; ++e) shift[e] = static_cast<int16_t>(2 * kBits * (e % kWordsPerPoint));
    return shift;
  }();
  const __m512i words = _mm512_srlv_epi16(_mm512_permutexvar_epi16(load512(kSpread.data()), codes), load512(kShift.data()));
  const __m512i both = _mm512_mask_blend_epi8(0xaaaaaaaaaaaaaaaaULL, words, _mm512_slli_epi16(words, 8 - kBits));
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(load128(kLevelBytes.data())),
                             _mm512_and_si512(both, _mm512_set1_epi8((1 << kBits) - 1)));
}

// 2s + 1 in each byte holding s.
inline __m128i odd_bytes(__m128i s) { return _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1)); }

inline KHeader grid_header(__m512i scales, __m128 d) { return {scales, _mm256_setzero_si256(), d}; }

// IQ2_XS and IQ2_S: sixteen 4-bit scales, two to a byte (the even group's
// in the low nibble), and d / 8.
template <typename Self>
struct IQ2NibbleScalePairs : GridPairs<Self> {
  using Scales = ScalesOf16;
  template <typename Block>
  static KHeader header(const Block& b) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i s = _mm_and_si128(_mm_unpacklo_epi8(v, _mm_srli_epi16(v, 4)), _mm_set1_epi8(0x0f));
    return grid_header(Scales::from(_mm256_cvtepu8_epi16(odd_bytes(s))), grid_scale<3>(b.d));
  }
};

// Eight bytes of seven sign bits each (bit 7 clear), each completed with
// the eighth that makes its count of ones even (kSignBytes, eight at once).
inline __mmask64 sign_bytes(uint64_t seven) {
  uint64_t parity = seven ^ (seven >> 4);  // within each byte: bits 4..6 have nowhere to come from
  parity ^= parity >> 2;
  parity ^= parity >> 1;
  return _cvtu64_mask64(seven | (parity & 0x0101010101010101ULL) << 7);
}

// IQ2_XXS and IQ3_XXS: the signs of two groups, from the four 7-bit fields
// in bits 0-27 of each group's word.
inline __mmask64 sign_fields(uint32_t first, uint32_t second) {
  const uint64_t fields = (first & 0x0fffffffu) | static_cast<uint64_t>(second & 0x0fffffffu) << 28;
  return sign_bytes(_pdep_u64(fields, 0x7f7f7f7f7f7f7f7fULL));
}

inline __mmask64 full_sign_bytes(const uint8_t* p) {
  uint64_t signs;
  std::memcpy(&signs, p, sizeof signs);
  return _cvtu64_mask64(signs);
}

struct IQ2_XXSPairs : GridPairs<IQ2_XXSPairs> {
  using Block = BlockIQ2_XXS;
  using Scales = ScalesOf32;
  // Group g's scale: the top nibble of its word, bytes 8g + 4 .. 8g + 7.
  static KHeader header(const Block& b) {
    const __m128i s = _mm512_cvtepi64_epi8(_mm512_srli_epi64(load512(b.qs), 60));
    return grid_header(Scales::from(odd_bytes(s)), grid_scale<3>(b.d));
  }
  // Half h is groups 4h .. 4h + 3, the 32 bytes from 32h: four point
  // indices and a word each.
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const uint8_t* q = b.qs + 32 * kH;
    const __m128i indices = _mm256_cvtepi64_epi32(load256(q));
    const __m512i codes = lookup_codes(kGridIq2XxsCodes, _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(indices)));
    return {{points_of_codes<2, 0, kIq2Levels>(codes), sign_fields(load_u32(q + 4), load_u32(q + 12))},
            {points_of_codes<2, 8, kIq2Levels>(codes), sign_fields(load_u32(q + 20), load_u32(q + 28))}};
  }
};

struct IQ2_XSPairs : IQ2NibbleScalePairs<IQ2_XSPairs> {
  using Block = BlockIQ2_XS;
  // Points loaded one by one: looked up in registers (8 searches, 7
  // blends), IQ2_XS took 166-174 ns a row of 4096 values against 158-166.
  template <int kP>
  static PairLevels pair(const Block& b) {
    const uint16_t* q = b.qs + 8 * kP;  // index in bits 0-8, seven signs in 9-15
    const __m128i signs = _mm_packus_epi16(_mm_srli_epi16(load128(q), 9), _mm_setzero_si128());
    return {points_of_8(kGridIq2Xs, [&](int k) { return q[k] & 511; }),
            sign_bytes(static_cast<uint64_t>(_mm_cvtsi128_si64(signs)))};
  }
};

struct IQ2_SPairs : IQ2NibbleScalePairs<IQ2_SPairs> {
  using Block = BlockIQ2_S;
  // Index bits 8-9 of point j are bits 2j of qh[2p] and qh[2p + 1] together.
  template <int kP>
  static PairLevels pair(const Block& b) {
    uint16_t high;
    std::memcpy(&high, b.qh + 2 * kP, sizeof high);
    const uint8_t* q = b.qs + 8 * kP;
    return {points_of_8(kGridIq2S, [&](int k) { return q[k] | ((high >> (2 * k)) & 3) << 8; }),
            full_sign_bytes(b.qs + 32 + 8 * kP)};
  }
};

struct IQ3_XXSPairs : GridPairs<IQ3_XXSPairs> {
  using Block = BlockIQ3_XXS;
  using Scales = ScalesOf32;
  // Group g's scale: the top nibble of its word at qs[64 + 4g].
  static KHeader header(const Block& b) {
    const __m128i s = _mm256_cvtepi32_epi8(_mm256_srli_epi32(load256(b.qs + 64), 28));
    return grid_header(Scales::from(odd_bytes(s)), grid_scale<2>(b.d));
  }
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const __m512i codes = lookup_codes(kGridIq3XxsCodes, _mm512_cvtepu8_epi16(load256(b.qs + 32 * kH)));
    const uint8_t* words = b.qs + 64 + 16 * kH;
    return {{points_of_codes<3, 0, kIq3XxsLevels>(codes), sign_fields(load_u32(words), load_u32(words + 4))},
            {points_of_codes<3, 16, kIq3XxsLevels>(codes), sign_fields(load_u32(words + 8), load_u32(words + 12))}};
  }
};

struct IQ3_SPairs : GridPairs<IQ3_SPairs> {
  using Block = BlockIQ3_S;
  using Scales = ScalesOf32;
  static KHeader header(const Block& b) {
    const uint64_t s = _pdep_u64(load_u32(b.scales), 0x0f0f0f0f0f0f0f0fULL);  // nibble g to byte g
    return grid_header(Scales::from(odd_bytes(_mm_cvtsi64_si128(static_cast<int64_t>(s)))), super_scale(b.d));
  }
  // Index bit 8 of point k of half h is bit k of qh[4h .. 4h + 3] together.
  template <int kH>
  static HalfLevels levels(const Block& b) {
    const __m512i low = _mm512_cvtepu8_epi16(load256(b.qs + 32 * kH));
    const __m512i codes = lookup_codes(
        kGridIq3SCodes, _mm512_mask_add_epi16(low, _cvtu32_mask32(load_u32(b.qh + 4 * kH)), low, _mm512_set1_epi16(256)));
    return {{points_of_codes<3, 0, kIq3SLevels>(codes), full_sign_bytes(b.signs + 16 * kH)},
            {points_of_codes<3, 16, kIq3SLevels>(codes), full_sign_bytes(b.signs + 16 * kH + 8)}};
  }
};

// IQ1's levels 8 * point +- 1 (-9 .. 9) are taken plus 9, unsigned, and the
// 9 * scale this adds per group comes back out through Q8_K's sums.
template <typename Self>
struct IQ1Pairs : GridPairs<Self> {
  static constexpr Offsets kOffsets = Offsets::kSameScale;
  static constexpr bool kSigned = false;
};

// The odd scales of sixteen groups of 16, as bytes in group order, and
// their header.
inline KHeader iq1_header(__m128i odd_scales, __m512i scales, __m128 d) {
  return {scales, _mm256_mullo_epi16(_mm256_cvtepu8_epi16(odd_scales), _mm256_set1_epi16(9)), d};
}

// 8 * point + 10, or + 8 where the value's delta is negative: the points
// are int8 -1, 0, 1, and the 16-bit shift's carries from the byte below
// land in bits the mask clears.
inline __m512i iq1_levels(__m512i points, __mmask64 negative_delta) {
  const __m512i eight_times = _mm512_and_si512(_mm512_slli_epi16(points, 3), _mm512_set1_epi8(static_cast<char>(0xf8)));
  return _mm512_add_epi8(eight_times, _mm512_mask_blend_epi8(negative_delta, _mm512_set1_epi8(10), _mm512_set1_epi8(8)));
}

struct IQ1_SPairs : IQ1Pairs<IQ1_SPairs> {
  using Block = BlockIQ1_S;
  using Scales = ScalesOf32;
  static KHeader header(const Block& b) {
    const __m128i words = _mm_and_si128(_mm_srli_epi16(load128(b.qh), 12), _mm_set1_epi16(7));
    const __m128i s = odd_bytes(_mm_packus_epi16(words, _mm_setzero_si128()));
    return iq1_header(_mm_unpacklo_epi8(s, s), Scales::from(s), grid_scale<3>(b.d));
  }
  // Point l of group g: index bits 8-10 are bits 3l of qh[g]; bit 15 is
  // the group's delta sign.
  template <int kP>
  static PairLevels pair(const Block& b) {
    const uint32_t high = load_u32(b.qh + 2 * kP);
    const uint8_t* q = b.qs + 8 * kP;
    auto index = [&](int k) { return q[k] | ((high >> (3 * k + 4 * (k / 4))) & 7) << 8; };
    const uint64_t negative = ((high >> 15) & 1 ? 0xffffffffULL : 0) | ((high >> 31) ? 0xffffffff00000000ULL : 0);
    return {iq1_levels(points_of_8(kGridIq1S, index), _cvtu64_mask64(negative))};
  }
};

struct IQ1_MPairs : IQ1Pairs<IQ1_MPairs> {
  using Block = BlockIQ1_M;
  using Scales = ScalesOf16;
  // Group j of 16 takes bits 3(j % 4) .. of word j / 4, and the words' top
  // nibbles are d.
  static KHeader header(const Block& b) {
    uint64_t words;
    std::memcpy(&words, b.scales, sizeof words);
    const uint64_t fields = _pext_u64(words, 0x0fff0fff0fff0fffULL);
    const uint64_t spread = 0x0707070707070707ULL;
    const __m128i s = odd_bytes(_mm_set_epi64x(static_cast<int64_t>(_pdep_u64(fields >> 24, spread)),
                                               static_cast<int64_t>(_pdep_u64(fields, spread))));
    const auto d = static_cast<uint16_t>(_pext_u64(words, 0xf000f000f000f000ULL));
    return iq1_header(s, ScalesOf16::from(_mm256_cvtepu8_epi16(s)), grid_scale<3>(d));
  }
  // Point j of the pair: nibble j of the word at qh[4p], its bits 0-2 the
  // index's bits 8-10, bit 3 the delta's sign.
  template <int kP>
  static PairLevels pair(const Block& b) {
    const uint32_t nibbles = load_u32(b.qh + 4 * kP);
    const uint8_t* q = b.qs + 8 * kP;
    auto index = [&](int k) { return q[k] | ((nibbles >> (4 * k)) & 7) << 8; };
    const uint64_t negative = _pdep_u64(_pext_u32(nibbles, 0x88888888u), 0x0101010101010101ULL) * 0xff;
    return {iq1_levels(points_of_8(kGridIq1S, index), _cvtu64_mask64(negative))};
  }
};

// acc with low added to its low eight lanes, and sums with low subtracted
// from its low eight. Masked: GCC 12 builds the zero-extending casts
// through the stack, which cost a dot4 call on short rows a fifth of its
// time.
inline __m512 add_low8(__m512 acc, __m256 low) {
  return _mm512_mask_add_ps(acc, 0x00ff, acc, _mm512_castps256_ps512(low));
}
inline __m512i sub_low8(__m512i sums, __m256i low) {
  return _mm512_mask_sub_epi32(sums, 0x00ff, sums, _mm512_castsi256_si512(low));
}

// Adds a block's integer sums (its groups' scaled products with one token,
// sums) to acc and its offsets to acc_offsets, in floats scaled by the
// weights' d (and dmin) and the token's d.
template <typename Format>
inline void add_k_block(const KHeader& h, const BlockQ8_K& a, __m512i sums, __m512& acc, __m256& acc_offsets) {
  const __m128 scaled = _mm_mul_ps(h.d_dmin, _mm_set1_ps(a.d));  // d x da, dmin x da
  if constexpr (Format::kOffsets != Offsets::kNone) {
    const __m256i offsets = _mm256_madd_epi16(load256(a.bsums), h.offsets);
    if constexpr (Format::kOffsets == Offsets::kOwnScale)
      acc_offsets = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offsets),
                                     _mm256_permutexvar_ps(_mm256_set1_epi32(1), _mm256_castps128_ps256(scaled)), acc_offsets);
    else
      sums = sub_low8(sums, offsets);
  }
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_broadcastss_ps(scaled), acc);
}

// The totals of four vectors into out[0..3], all four summed in the same
// order (matmul.h's padded groups rely on it): pairs of lanes within each
// 128-bit quarter, then the quarters. 13 instructions, where four
// reductions one by one take about 28, a large share of a dot4 call on
// short rows (an expert's 512-768 columns).
inline void store_totals4(const __m512 (&v)[4], float* out) {
  const auto as_pd = [](__m512 x) { return _mm512_castps_pd(x); };
  // Per quarter: v0[0] + v0[2], v1[0] + v1[2], v0[1] + v0[3], v1[1] + v1[3].
  const __m512 t01 = _mm512_add_ps(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
  const __m512 t23 = _mm512_add_ps(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
  // Per quarter: the four rows' totals of that quarter.
  const __m512 t = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(as_pd(t01), as_pd(t23))),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(as_pd(t01), as_pd(t23))));
  const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(t), _mm256_castpd_ps(_mm512_extractf64x4_pd(as_pd(t), 1)));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1)));
}

// One vector's total in store_totals4's order (pairs of lanes within each
// 128-bit quarter, then the quarters), so that dot_k_rows gives a token
// the same bits alone as among four.
inline float total_in_quarters(__m512 v) {
  const __m512 pairs = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));              // x0 + x2, x1 + x3
  const __m512 quarters = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, 0xb1));   // lane 4q: quarter q's total
  const __m256 halves = _mm256_add_ps(_mm512_castps512_ps256(quarters),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(quarters), 1)));
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1)));
}

// A block's integer sums with each of T tokens (a[t] its Q8_K block): its
// groups' products, each times the group's scale, spread over the lanes.
template <int T, typename Format>
inline void k_block_sums(const typename Format::Block& x, const KHeader& h, const BlockQ8_K* const* a, __m512i* sums) {
  for (int t = 0; t < T; ++t) sums[t] = _mm512_setzero_si512();
  auto add_pair = [&]<int kP>(const PairLevels& q) {
    const __m512i scale = Format::Scales::template pair<kP>(h.scales);
    for (int t = 0; t < T; ++t) {
      __m512i y = load512(a[t]->qs + 64 * kP);
      if constexpr (Format::kSigned) y = _mm512_mask_sub_epi8(y, q.negative, _mm512_setzero_si512(), y);
      const __m512i products = _mm512_maddubs_epi16(q.q, y);
      sums[t] = _mm512_dpwssd_epi32(sums[t], products, scale);
    }
  };
  auto add_half = [&]<int kH>() {
    const HalfLevels q = Format::template levels<kH>(x);
    add_pair.template operator()<2 * kH>(q.even);
    add_pair.template operator()<2 * kH + 1>(q.odd);
  };
  add_half.template operator()<0>();
  add_half.template operator()<1>();
}

template <int T, typename Format>
void dot_k_rows(const void* w, const uint8_t* a, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(a + t * stride);
  __m512 acc[T];
  __m256 acc_offsets[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps(), acc_offsets[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const KHeader h = Format::header(wb[b]);
    const BlockQ8_K* blocks[T];
    for (int t = 0; t < T; ++t) blocks[t] = &ab[t][b];
    __m512i sums[T];
    k_block_sums<T, Format>(wb[b], h, blocks, sums);
    for (int t = 0; t < T; ++t) add_k_block<Format>(h, ab[t][b], sums[t], acc[t], acc_offsets[t]);
  }
  for (int t = 0; t < T; ++t) acc[t] = add_low8(acc[t], acc_offsets[t]);
  if constexpr (T == 4)
    store_totals4(acc, out);
  else
    for (int t = 0; t < T; ++t) out[t] = total_in_quarters(acc[t]);
}

// One Q4_K or Q6_K row, where it is stored, against one Q8_K row, in the
// float steps of one lane of the type's stripe kernel (dot_q4_k_stripe,
// dot_q6_k_stripe): per block the integer sums are totalled exactly (the
// order of integer additions changes nothing), then met by d x da in one
// multiply-add, and for Q4_K the minimums by dmin x da in a second. A
// matrix read from a mapped file, never repacked, thus gives each token
// the bits its stripes would (quant.h's PackedDot::lane_dot).
template <typename Format>
float dot_k_lane(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const typename Format::Block*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const KHeader h = Format::header(wb[b]);
    const BlockQ8_K* block = &ab[b];
    __m512i sums;
    k_block_sums<1, Format>(wb[b], h, &block, &sums);
    const __m256i offsets = _mm256_madd_epi16(load256(block->bsums), h.offsets);
    __m128i offsets4 = _mm_add_epi32(_mm256_castsi256_si128(offsets), _mm256_extracti128_si256(offsets, 1));
    offsets4 = _mm_add_epi32(offsets4, _mm_shuffle_epi32(offsets4, 0x4e));
    const int32_t offset = _mm_cvtsi128_si32(_mm_add_epi32(offsets4, _mm_shuffle_epi32(offsets4, 0xb1)));
    const __m128 scaled = _mm_mul_ps(h.d_dmin, _mm_set1_ps(block->d));  // d x da, dmin x da
    const int32_t total = _mm512_reduce_add_epi32(sums);
    if constexpr (Format::kOffsets == Offsets::kOwnScale) {
      acc = _mm_fmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), total), scaled, acc);
      acc = _mm_fnmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), offset), _mm_movehdup_ps(scaled), acc);
    } else {
      static_assert(Format::kOffsets == Offsets::kSameScale);
      acc = _mm_fmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), total - offset), scaled, acc);
    }
  }
  return _mm_cvtss_f32(acc);
}

// One token's Q8_K activations packed for dot_q4_k_one: each block as
// Q8_K's, with its eight 32-value chunks in the order 0, 2, 1, 3, 4, 6, 5,
// 7 (moved as 16-byte pieces, kQ4_KOnePieces). A Q4_K block keeps chunks
// 2p and 2p + 1 in the low and high nibbles of qs[32p .. 32p + 31], so 64
// bytes of qs hold chunks 0-3 (or 4-7): their low nibbles are chunks 0 and
// 2, which the packing puts side by side, and their high ones chunks 1 and
// 3. One load, two masks and a shift then unpack 128 weights, where
// dot_k_rows takes a broadcast load, a masked shift and a mask for each 64.
constexpr int kQ4_KOnePieces[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};

// One Q4_K row against T tokens packed so, `stride` bytes apart: each
// token's steps the same for any T, so dot_q4_k_four gives every token the
// bits dot_q4_k_one gives it (what a model's stepwise prefill needs of a
// matrix stored as rows, matmul.h).
template <int T>
void dot_q4_k_tokens(const void* w, const void* packed, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* ab[T];
  for (int t = 0; t < T; ++t) ab[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(packed) + t * stride);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
  __m256 acc_offsets[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps(), acc_offsets[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const KHeader h = Q4_KPairs::header(wb[b]);
    __m512i sums[T];
    for (int t = 0; t < T; ++t) sums[t] = _mm512_setzero_si512();
    // Half kH: chunks 4kH .. 4kH + 3, from qs[64kH .. 64kH + 63].
    auto add_half = [&]<int kH>() {
      const __m512i bytes = load512(wb[b].qs + 64 * kH);
      const __m512i low = _mm512_and_si512(bytes, low_nibbles);  // chunks 4kH, 4kH + 2
      const __m512i high = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_nibbles);  // 4kH + 1, 4kH + 3
      const __m512i low_scales = spread_slots<4 * kH, 4 * kH, 4 * kH + 2, 4 * kH + 2>(h.scales);
      const __m512i high_scales = spread_slots<4 * kH + 1, 4 * kH + 1, 4 * kH + 3, 4 * kH + 3>(h.scales);
      for (int t = 0; t < T; ++t) {
        const int8_t* a = ab[t][b].qs + 128 * kH;
        sums[t] = _mm512_dpwssd_epi32(sums[t], _mm512_maddubs_epi16(low, load512(a)), low_scales);
        sums[t] = _mm512_dpwssd_epi32(sums[t], _mm512_maddubs_epi16(high, load512(a + 64)), high_scales);
      }
    };
    add_half.template operator()<0>();
    add_half.template operator()<1>();
    for (int t = 0; t < T; ++t) add_k_block<Q4_KPairs>(h, ab[t][b], sums[t], acc[t], acc_offsets[t]);
  }
  for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(add_low8(acc[t], acc_offsets[t]));
}

void dot_q4_k_one(const void* w, const void* packed, int64_t n, float* out) {
  dot_q4_k_tokens<1>(w, packed, 0, n, out);
}
void dot_q4_k_four(const void* w, const void* packed, size_t stride, int64_t n, float* out) {
  dot_q4_k_tokens<4>(w, packed, stride, n, out);
}

template <typename Format>
KernelEntry k_kernels() {
  KernelEntry entry = dots<dot_k_rows<1, Format>, dot_k_rows<4, Format>>();
  entry.dot4_exact = true;  // the same totals' order (total_in_quarters)
  return entry;
}

// Sixteen Q4_K rows against the first kTokens tokens of a packed group of
// four (k_stripes.h): out[16t + r], each token's bits the same for any
// kTokens, as Q8_0's. Per group of 32 values and token, eight vpdpbusd sum
// a row's products in its lane (one token's in four chains, DpbusdSum);
// the group's scale multiplies that sum (at most 32 x 15 x 128, times 63:
// eight groups stay inside int32), and vpdpwssd adds the minimums times
// the token's group sums, two groups at a time.
template <int kTokens>
void dot_q4_k_stripe(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = Q4_KStripes<16>;
  constexpr int kChains = kTokens == 1 ? 4 : 1;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const uint8_t*>(packed);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  __m512 acc[kTokens];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const size_t call_bytes = static_cast<size_t>(n / kSuperBlock) * Layout::kBlockBytes;
  for (int64_t b = 0; b < n / kSuperBlock; ++b, stripe += Layout::kBlockBytes, act += Layout::kActivationBytes) {
    __m512i sums[kTokens], min_sums[kTokens];
    for (int t = 0; t < kTokens; ++t) sums[t] = min_sums[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      if constexpr (kTokens == 1)
        stream_ahead(stripe + p * Layout::kBlockBytes / 4, Layout::kBlockBytes / 4, call_bytes);
      DpbusdSum<kChains> low_sums[kTokens], high_sums[kTokens];  // groups 2p and 2p + 1
      for (int s = 0; s < 8; ++s) {
        const __m512i bytes = load512(stripe + 64 * (8 * p + s));
        const __m512i low = _mm512_and_si512(bytes, low_nibbles);
        const __m512i high = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_nibbles);
        for (int t = 0; t < kTokens; ++t) {
          const uint8_t* values = act + kSuperBlock * t + 64 * p + 4 * s;
          low_sums[t].add(s, low, _mm512_set1_epi32(static_cast<int>(load_u32(values))));
          high_sums[t].add(s, high, _mm512_set1_epi32(static_cast<int>(load_u32(values + 32))));
        }
      }
      const __m512i low_scale = _mm512_cvtepu8_epi32(load128(stripe + Layout::kScalesOffset + 32 * p));
      const __m512i high_scale = _mm512_cvtepu8_epi32(load128(stripe + Layout::kScalesOffset + 32 * p + 16));
      const __m512i mins = _mm512_cvtepu8_epi16(load256(stripe + Layout::kMinsOffset + 32 * p));
      for (int t = 0; t < kTokens; ++t) {
        sums[t] = _mm512_add_epi32(sums[t], _mm512_add_epi32(_mm512_mullo_epi32(low_sums[t].total(), low_scale),
                                                             _mm512_mullo_epi32(high_sums[t].total(), high_scale)));
        const uint8_t* group_sums = act + Layout::kSumsOffset + sizeof(int16_t) * (8 * t + 2 * p);
        min_sums[t] = _mm512_dpwssd_epi32(min_sums[t], mins, _mm512_set1_epi32(static_cast<int>(load_u32(group_sums))));
      }
    }
    const __m512 d = _mm512_cvtph_ps(load256(stripe + Layout::kDOffset));
    const __m512 dmin = _mm512_cvtph_ps(load256(stripe + Layout::kDminOffset));
    const auto* token_d = reinterpret_cast<const float*>(act + Layout::kActivationScalesOffset);
    for (int t = 0; t < kTokens; ++t) {
      const __m512 da = _mm512_set1_ps(token_d[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t]), _mm512_mul_ps(d, da), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sums[t]), _mm512_mul_ps(dmin, da), acc[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) _mm512_storeu_ps(out + 16 * t, acc[t]);
}

// Sixteen Q6_K rows against the first kTokens tokens of a packed group of
// four (k_stripes.h): out[16t + r], each token's bits the same for any
// kTokens. As Q4_K's, with groups of 16 values and signed scales (one
// token's sums in two chains); the offset 32 meets Q8_K's group sums
// through vpdpwssd with the scales times -32, two groups at a time, in the
// same integer sum (at most 16 x 128 x 16 x 63 x 128 in products and
// 32 x 128 x 16 x 2032 in offsets: inside int32).
template <int kTokens>
void dot_q6_k_stripe(const void* w, const void* packed, int64_t n, float* out) {
  using Layout = Q6_KStripes<16>;
  constexpr int kChains = kTokens == 1 ? 2 : 1;  // a group is four steps
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const uint8_t*>(packed);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f), top_bits = _mm512_set1_epi8(0x30);
  __m512 acc[kTokens];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const size_t call_bytes = static_cast<size_t>(n / kSuperBlock) * Layout::kBlockBytes;
  for (int64_t b = 0; b < n / kSuperBlock; ++b, stripe += Layout::kBlockBytes, act += Layout::kActivationBytes) {
    __m512i sums[kTokens];
    for (__m512i& s : sums) s = _mm512_setzero_si512();
    // Chunk c's two groups: their products with the scales, and the offsets.
    auto add_groups = [&](int c, const DpbusdSum<kChains> (&group_sums)[kTokens], bool second) {
      const __m512i scale_pair = _mm512_cvtepi8_epi16(load256(stripe + Layout::kScalesOffset + 32 * c));
      const __m512i scale = second ? _mm512_srai_epi32(scale_pair, 16) : _mm512_srai_epi32(_mm512_slli_epi32(scale_pair, 16), 16);
      for (int t = 0; t < kTokens; ++t)
        sums[t] = _mm512_add_epi32(sums[t], _mm512_mullo_epi32(group_sums[t].total(), scale));
      if (!second) return;
      const __m512i offsets = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(scale_pair, 5));
      for (int t = 0; t < kTokens; ++t) {
        const uint8_t* pair_sums = act + Layout::kSumsOffset + sizeof(int16_t) * (16 * t + 2 * c);
        sums[t] = _mm512_dpwssd_epi32(sums[t], offsets, _mm512_set1_epi32(static_cast<int>(load_u32(pair_sums))));
      }
    };
    // Unrolled, so that every step's chain (DpbusdSum) is a register:
    // GCC left these loops rolled, the chains on the stack.
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        if constexpr (kTokens == 1) {
          const int quarter = 2 * h + j;
          stream_ahead(stripe + quarter * Layout::kBlockBytes / 4, Layout::kBlockBytes / 4, call_bytes);
        }
        const int low_chunk = 4 * h + j, high_chunk = low_chunk + 2;
        DpbusdSum<kChains> low_sums[kTokens], high_sums[kTokens];
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          if (s % 4 == 0)
            for (int t = 0; t < kTokens; ++t) low_sums[t] = high_sums[t] = DpbusdSum<kChains>();
          const __m512i ql = load512(stripe + 64 * (16 * h + 8 * j + s));
          const __m512i qh = load512(stripe + Layout::kHighOffset + 64 * (8 * h + s));
          // Chunk 4h + k's top bits are bits 2k of qh: moved to bits 4-5.
          const __m512i low_top = j == 0 ? _mm512_slli_epi16(qh, 4) : _mm512_slli_epi16(qh, 2);
          const __m512i high_top = j == 0 ? qh : _mm512_srli_epi16(qh, 2);
          const __m512i low = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low_nibbles), low_top, top_bits, 0xf8);
          const __m512i high = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low_nibbles), high_top,
                                                         top_bits, 0xf8);
          for (int t = 0; t < kTokens; ++t) {
            const uint8_t* values = act + kSuperBlock * t + 4 * s;
            low_sums[t].add(s, low, _mm512_set1_epi32(static_cast<int>(load_u32(values + 32 * low_chunk))));
            high_sums[t].add(s, high, _mm512_set1_epi32(static_cast<int>(load_u32(values + 32 * high_chunk))));
          }
          if (s % 4 == 3) {
            add_groups(low_chunk, low_sums, s == 7);
            add_groups(high_chunk, high_sums, s == 7);
          }
        }
      }
    const __m512 d = _mm512_cvtph_ps(load256(stripe + Layout::kDOffset));
    const auto* token_d = reinterpret_cast<const float*>(act + Layout::kActivationScalesOffset);
    for (int t = 0; t < kTokens; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t]), _mm512_mul_ps(d, _mm512_set1_ps(token_d[t])), acc[t]);
  }
  for (int t = 0; t < kTokens; ++t) _mm512_storeu_ps(out + 16 * t, acc[t]);
}

KernelEntry q4_k_kernels() {
  static const PackedDot one{.bytes = q8_k_packed_bytes, .pack = pack_q8_k_pieces<kQ4_KOnePieces>, .dot = dot_q4_k_one,
                             .dot4 = dot_q4_k_four};
  using Layout = Q4_KStripes<16>;
  static const PackedDot four{Layout::bytes,  Layout::pack,       dot_q4_k_stripe<4>, Layout::weight_bytes,
                              Layout::repack, 16, dot_q4_k_stripe<1>, nullptr,            dot_k_lane<Q4_KPairs>};
  KernelEntry entry = k_kernels<Q4_KPairs>();
  entry.packed1 = &one;
  entry.packed4 = &four;
  return entry;
}

KernelEntry q6_k_kernels() {
  using Layout = Q6_KStripes<16>;
  static const PackedDot four{Layout::bytes,  Layout::pack,       dot_q6_k_stripe<4>, Layout::weight_bytes,
                              Layout::repack, 16, dot_q6_k_stripe<1>, nullptr,            dot_k_lane<Q6_KPairs>};
  KernelEntry entry = k_kernels<Q6_KPairs>();
  entry.packed4 = &four;
  return entry;
}

// --- Float16 to float ------------------------------------------------------------
//
// What attention converts its float16 KV cache with, a chunk of positions at
// a time: sixteen values per instruction, where AVX2's conversion takes eight
// and made up about a quarter of attention's time.
void dequantize_f16_avx512(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(load256(h + i)));
  for (; i < n; ++i) dst[i] = half(h[i]);
}

// Sixteen F16 rows against the first kTokens tokens of a packed group of
// four (f16_stripes.h): out[16t + r]. A token's sums go in four chains,
// column c adding to chain c % 4, and are added (0 + 1) + (2 + 3) at the
// end: the same float steps for any kTokens, so that one token alone
// (dot_one) gets the bits it gets among four.
template <int kTokens>
void dot_f16_stripe(const void* w, const void* packed, int64_t n, float* out) {
  constexpr int kChains = 4;
  const auto* stripe = static_cast<const uint8_t*>(w);
  const auto* act = static_cast<const float*>(packed);
  __m512 acc[kTokens][kChains];
  for (auto& token : acc)
    for (__m512& a : token) a = _mm512_setzero_ps();
  auto column = [&](int64_t c, int chain) {
    const __m512 values = _mm512_cvtph_ps(load256(stripe + F16Stripes<16>::kColumnBytes * c));
    for (int t = 0; t < kTokens; ++t)
      acc[t][chain] = _mm512_fmadd_ps(values, _mm512_set1_ps(act[4 * c + t]), acc[t][chain]);
  };
  int64_t c = 0;
  for (; c + kChains <= n; c += kChains)
    for (int k = 0; k < kChains; ++k) column(c + k, k);
  for (int k = 0; c < n; ++c, ++k) column(c, k);
  for (int t = 0; t < kTokens; ++t)
    _mm512_storeu_ps(out + 16 * t, _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
}

KernelEntry f16_kernels() {
  using Layout = F16Stripes<16>;
  static const PackedDot four{Layout::bytes,  Layout::pack, dot_f16_stripe<4>, Layout::weight_bytes,
                              Layout::repack, 16,           dot_f16_stripe<1>};
  return {.dequantize = dequantize_f16_avx512, .packed4 = &four};
}

}  // namespace

bool avx512_supported() {
  // __builtin_cpu_supports also checks that the OS saves the 512-bit state.
  return avx2_supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("bmi2");
}

void install_avx512(OverrideFn record) {
  install_avx2(record);
  record(TensorType::Q8_0, striped_legacy_kernels<Q8_0Pair, true, Q8_0StripeLevels>());
  record(TensorType::Q4_0, striped_legacy_kernels<Q4_0Pair, false, Q4_0StripeLevels>());
  record(TensorType::Q5_0, signed_kernels<Q5_0Pair, true>());
  record(TensorType::Q2_K, k_kernels<Q2_KPairs>());
  record(TensorType::Q3_K, k_kernels<Q3_KPairs>());
  record(TensorType::Q4_K, q4_k_kernels());
  record(TensorType::Q5_K, k_kernels<Q5_KPairs>());
  record(TensorType::Q6_K, q6_k_kernels());
  record(TensorType::IQ2_XXS, k_kernels<IQ2_XXSPairs>());
  record(TensorType::IQ2_XS, k_kernels<IQ2_XSPairs>());
  record(TensorType::IQ2_S, k_kernels<IQ2_SPairs>());
  record(TensorType::IQ3_XXS, k_kernels<IQ3_XXSPairs>());
  record(TensorType::IQ3_S, k_kernels<IQ3_SPairs>());
  record(TensorType::IQ1_S, k_kernels<IQ1_SPairs>());
  record(TensorType::IQ1_M, k_kernels<IQ1_MPairs>());
  record(TensorType::F16, f16_kernels());
  // MXFP4 keeps AVX2's dot and dot4 for matrices not in stripes.
  record(TensorType::MXFP4, {.packed4 = legacy_stripes<Mxfp4StripeLevels>()});
}

}  // namespace revis::quant

#endif
