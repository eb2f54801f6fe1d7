// In-memory images of GGUF's quantized blocks, byte for byte.
//
// Every member is a byte, a little-endian 16-bit half (stored as raw bits),
// or in Q8_K a float, so the structs have no padding and can be laid over
// tensor data directly. The static_asserts tie each struct to the block
// geometry in types.cpp, so a layout slip fails the build, not a model.
//
// Internal to src/quant.
#pragma once

#include <bit>
#include <cstdint>

namespace revis::quant {

constexpr int kLegacyBlock = 32;  // values per block of Q4_0 .. Q8_0, IQ4_NL, MXFP4
constexpr int kSuperBlock = 256;  // values per block of the K-quants, IQ4_XS, Q8_K

// x = d * (q - 8), q 4-bit. Value j of the block sits in the low nibble of
// qs[j] for j < 16 and in the high nibble of qs[j - 16] otherwise.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kLegacyBlock / 2];
};

// x = d * q + m, q 4-bit, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kLegacyBlock / 2];
};

// x = d * (q - 16), q 5-bit: low 4 bits as in Q4_0, bit 4 of value j is bit j
// of the little-endian 32-bit word qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kLegacyBlock / 2];
};

// x = d * q + m, q 5-bit laid out as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kLegacyBlock / 2];
};

// x = d * q, q signed 8-bit.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kLegacyBlock];
};

// 16 groups of 16 values, x = d * sc * q - dmin * m with q 2-bit and each
// group's (sc, m) packed as the low / high nibble of scales[group].
// Value v's bits: qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32)).
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16, x = d * (sc - 32) * (q - 4), sc 6-bit, q 3-bit: the low 2
// bits placed as in Q2_K, the high bit is bit (v / 32) of hmask[v % 32].
// Scales: low nibbles in scales[0..7] (group g < 8 low nibble of byte g,
// g >= 8 high nibble of byte g - 8), top 2 bits in scales[8 + g % 4] at
// bit 2 * (g / 4).
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 groups of 32, x = d * sc * q - dmin * m, sc and m 6-bit packed into 12
// bytes (see k_quants.cpp), q 4-bit: within each 64 values, the first 32 are
// the low nibbles of 32 bytes of qs and the next 32 their high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kSuperBlock / 2];
};

// Q4_K plus a fifth bit: bit 4 of value v is bit (v / 32) of qh[v % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};

// 16 groups of 16, x = d * sc * (q - 32), sc signed 8-bit, q 6-bit. Per half
// of 128 values: ql holds the low nibbles (values 0..31 and 64..95 in bytes
// 0..31, 32..63 and 96..127 in bytes 32..63, low nibble first), qh the top 2
// bits of values l, l+32, l+64, l+96 in byte l.
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};

// Activations for the 256-blocks: x = d * q, plus the sum of each 16 q's so
// the dot products can apply per-group minimums without touching the q's.
struct BlockQ8_K {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[kSuperBlock / 16];
};

// x = d * kIq4Values[q], q 4-bit with Q4_0's nibble order.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kLegacyBlock / 2];
};

// 8 groups of 32, x = d * (sc - 32) * kIq4Values[q], sc 6-bit: low nibble of
// group g in scales_l[g / 2] (low nibble first), top 2 bits in scales_h at
// bit 2 * g. Each group's 32 q's are laid out as an IQ4_NL block's.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kSuperBlock / 64];
  uint8_t qs[kSuperBlock / 2];
};

// The non-uniform 4-bit codebook shared by IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// OCP microscaling FP4: x = 2^(e - 127) * fp4(q), q a 4-bit E2M1 code
// (sign, 2-bit exponent, 1-bit mantissa) in Q4_0's nibble order. e is an
// E8M0 exponent; 0xff means NaN in the OCP spec and is refused at load.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kLegacyBlock / 2];
};

// The E2M1 values times two, so that they are integers and the dot products
// run on bytes: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then the same negated.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The factor applied to kMxfp4Values: 2^(e - 128), the half that undoes
// their doubling folded in. Exact for every e (e < 2 gives subnormals).
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}
inline constexpr uint8_t kMxfp4InvalidExponent = 0xff;

// --- The grid types --------------------------------------------------------
//
// 256-value super-blocks whose values come in groups of 8 (or 4) picked
// from a fixed grid of points (iq_grids.h), each group with its own signs.
// x = d * s * grid value * sign, with s an odd group scale over a fixed
// power of two (see iq_quants.cpp). "Signs" of 8 values are 7 stored bits,
// the eighth chosen so that the count of minus signs is even (kIq2Signs).

// 8 groups of 32. Per group 8 bytes: bytes 0..3 index 4 points of
// kGridIq2Xxs (8 values each); bytes 4..7, a little-endian 32-bit word,
// hold 4 seven-bit sign fields (bits 7l..7l+6) and the 4-bit scale s in
// bits 28..31: x = d * (2s + 1) / 8 * point * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint8_t qs[kSuperBlock / 4];
};

// 8 groups of 32. qs[4g + l] (16-bit): point of kGridIq2Xs in bits 0..8,
// seven sign bits in bits 9..15. scales[g]: low nibble for values 0..15 of
// the group, high nibble for 16..31: x = d * (2s + 1) / 8 * point * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kSuperBlock / 8];
  uint8_t scales[kSuperBlock / 32];
};

// 8 groups of 32. qs[0..31]: low 8 bits of 32 indices into kGridIq2S;
// qs[32..63]: one full sign byte per 8 values (no parity rule); qh[g]
// bits 2l..2l+1: index bits 8..9 of point l of group g. Scales as IQ2_XS.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 4];
  uint8_t qh[kSuperBlock / 32];
  uint8_t scales[kSuperBlock / 32];
};

// 8 groups of 32. qs[0..63]: indices into kGridIq3Xxs (4 values each);
// qs[64 + 4g ..]: group g's 32-bit word of 4 seven-bit sign fields (each
// for 8 values) and the scale s in bits 28..31: x = d * (2s + 1) / 4 *
// point * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kSuperBlock / 8];
};

// 8 groups of 32. qs: low 8 bits of 64 indices into kGridIq3S; bit k of
// qh[g] is index bit 8 of point k of group g; signs: a full byte per 8
// values; scales[g / 2] nibble g % 2: x = d * (2s + 1) * point * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 4];
  uint8_t qh[kSuperBlock / 32];
  uint8_t signs[kSuperBlock / 8];
  uint8_t scales[kSuperBlock / 64];
};

// 8 groups of 32. qs: low 8 bits of 32 indices into kGridIq1S (values -1,
// 0, 1); qh[g]: bits 3l..3l+2 the index's bits 8..10 for point l, bits
// 12..14 the scale s, bit 15 the sign of the shift delta:
// x = d * (2s + 1) * (point + delta), delta = -1/8 if bit 15 is set, else +1/8.
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kSuperBlock / 8];
  uint16_t qh[kSuperBlock / 32];
};

// 8 groups of 32 with a scale per 16 values and a delta per 8. qs as
// IQ1_S; qh[2g + h] covers points 2h and 2h + 1 of group g, one nibble
// each (low first): bits 0..2 index bits 8..10, bit 3 the delta's sign.
// scales: four 16-bit words; group g's two 3-bit scales sit at bits
// 6 * (g % 2) and 6 * (g % 2) + 3 of word g / 2, and the top nibbles of the
// four words, word 0 lowest, form the half d.
struct BlockIQ1_M {
  uint8_t qs[kSuperBlock / 8];
  uint8_t qh[kSuperBlock / 16];
  uint8_t scales[kSuperBlock / 32];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);

}  // namespace revis::quant
