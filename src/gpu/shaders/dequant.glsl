// One group of 32 weights of a row, dequantized: group g of the row whose
// bytes start at byte `row`. Each weight type is compiled in by its macro
// (TYPE_F16, TYPE_Q8_0, ...); the float steps are the CPU reference's
// (src/quant), so a weight has the same value on both. The K-quants' and
// the grid types' 256 weights per block are its eight groups.

#if defined(TYPE_IQ2_XXS) || defined(TYPE_IQ2_XS) || defined(TYPE_IQ2_S) || defined(TYPE_IQ3_XXS) || \
    defined(TYPE_IQ3_S) || defined(TYPE_IQ1_S) || defined(TYPE_IQ1_M)
#define GRID_TYPE
// The grid types look their points up in the type's grid, bound at 3 as
// the host's own table (grid_bytes, quant.h): byte k of the words of a point
// is its value k; an 8-value point is words 2p, 2p + 1, a 4-value one word p.
layout(std430, binding = 3) readonly buffer Grid { uint grid[]; };

uvec2 grid_point(uint p) { return uvec2(grid[2u * p], grid[2u * p + 1u]); }
uint point_byte(uvec2 point, uint k) { return (point[k >> 2] >> ((k & 3u) * 8u)) & 0xFFu; }

// The 8 signs a 7-bit field stands for: the eighth makes the minus signs even.
uint sign_bits(uint field) {
  const uint seven = field & 127u;
  return seven | ((uint(bitCount(seven)) & 1u) << 7);
}

// Point l of a group (values 8l..8l+7): its unsigned values with `signs`
// applied (IQ2, IQ3), or IQ1's level 8 * value + 1, - 1 where the delta is
// negative (iq_quants.cpp's unpacking).
void signed_point(uvec2 point, uint signs, uint l, inout int level[32]) {
  for (uint k = 0u; k < 8u; ++k) {
    const int v = int(point_byte(point, k));
    level[8u * l + k] = ((signs >> k) & 1u) != 0u ? -v : v;
  }
}
void shifted_point(uvec2 point, bool negative_delta, uint l, inout int level[32]) {
  for (uint k = 0u; k < 8u; ++k)
    level[8u * l + k] = 8 * (int(point_byte(point, k) << 24) >> 24) + (negative_delta ? -1 : 1);
}
uint low_nibble_scale(uint b) { return 2u * (byte_at(b) & 15u) + 1u; }
uint high_nibble_scale(uint b) { return 2u * (byte_at(b) >> 4) + 1u; }

// Group g of the row (32 values of a 256-value block) unpacked as the CPU
// does: x = (d * scale[i / 16]) * level[i] * kGridFactor, scale odd.
void grid_group(uint row, uint g, out float d, out uint scale[2], out int level[32]) {
  const uint sub = g & 7u;
#if defined(TYPE_IQ2_XXS)
  // 66 bytes: d, then per group 4 point bytes and a word of 4 sign fields and the scale.
  const uint b = row + (g >> 3) * 66u, q = b + 2u + sub * 8u, word = word_at(q + 4u);
  d = half_at(b);
  scale[0] = scale[1] = 2u * (word >> 28) + 1u;
  for (uint l = 0u; l < 4u; ++l) signed_point(grid_point(byte_at(q + l)), sign_bits(word >> (7u * l)), l, level);
#elif defined(TYPE_IQ2_XS)
  // 74 bytes: d, 32 16-bit codes (9-bit point, 7 sign bits), 8 scale bytes.
  const uint b = row + (g >> 3) * 74u;
  d = half_at(b);
  scale[0] = low_nibble_scale(b + 66u + sub);
  scale[1] = high_nibble_scale(b + 66u + sub);
  for (uint l = 0u; l < 4u; ++l) {
    const uint code = byte_at(b + 2u + (sub * 4u + l) * 2u) | (byte_at(b + 3u + (sub * 4u + l) * 2u) << 8);
    signed_point(grid_point(code & 511u), sign_bits(code >> 9), l, level);
  }
#elif defined(TYPE_IQ2_S)
  // 82 bytes: d, 32 point bytes, 32 sign bytes, 8 bytes of index bits 8..9, 8 scale bytes.
  const uint b = row + (g >> 3) * 82u, high = byte_at(b + 66u + sub);
  d = half_at(b);
  scale[0] = low_nibble_scale(b + 74u + sub);
  scale[1] = high_nibble_scale(b + 74u + sub);
  for (uint l = 0u; l < 4u; ++l) {
    const uint index = byte_at(b + 2u + sub * 4u + l) | (((high >> (2u * l)) & 3u) << 8);
    signed_point(grid_point(index), byte_at(b + 34u + sub * 4u + l), l, level);
  }
#elif defined(TYPE_IQ3_XXS)
  // 98 bytes: d, 64 point bytes (4 values each), per group a word of 4 sign fields and the scale.
  const uint b = row + (g >> 3) * 98u, points = b + 2u + sub * 8u, word = word_at(b + 66u + sub * 4u);
  d = half_at(b);
  scale[0] = scale[1] = 2u * (word >> 28) + 1u;
  for (uint l = 0u; l < 4u; ++l) {
    const uvec2 pair = uvec2(grid[byte_at(points + 2u * l)], grid[byte_at(points + 2u * l + 1u)]);
    signed_point(pair, sign_bits(word >> (7u * l)), l, level);
  }
#elif defined(TYPE_IQ3_S)
  // 110 bytes: d, 64 point bytes, 8 bytes of index bit 8, 32 sign bytes, 4 scale bytes.
  const uint b = row + (g >> 3) * 110u, points = b + 2u + sub * 8u, high = byte_at(b + 66u + sub);
  d = half_at(b);
  scale[0] = scale[1] = 2u * ((byte_at(b + 106u + sub / 2u) >> (4u * (sub & 1u))) & 15u) + 1u;
  for (uint l = 0u; l < 4u; ++l) {
    const uint first = byte_at(points + 2u * l) | (((high >> (2u * l)) & 1u) << 8);
    const uint second = byte_at(points + 2u * l + 1u) | (((high >> (2u * l + 1u)) & 1u) << 8);
    signed_point(uvec2(grid[first], grid[second]), byte_at(b + 74u + sub * 4u + l), l, level);
  }
#elif defined(TYPE_IQ1_S)
  // 50 bytes: d, 32 point bytes, per group a 16-bit word of index bits 8..10, the scale, the delta's sign.
  const uint b = row + (g >> 3) * 50u, high = byte_at(b + 34u + sub * 2u) | (byte_at(b + 35u + sub * 2u) << 8);
  d = half_at(b);
  scale[0] = scale[1] = 2u * ((high >> 12) & 7u) + 1u;
  for (uint l = 0u; l < 4u; ++l)
    shifted_point(grid_point(byte_at(b + 2u + sub * 4u + l) | (((high >> (3u * l)) & 7u) << 8)), (high & 0x8000u) != 0u,
                  l, level);
#elif defined(TYPE_IQ1_M)
  // 56 bytes: 32 point bytes, 16 bytes of a nibble per point (index bits
  // 8..10, the delta's sign), 4 16-bit words of 3-bit scales whose top
  // nibbles together are d.
  const uint b = row + (g >> 3) * 56u;
  uint d_bits = 0u;
  for (uint w = 0u; w < 4u; ++w) d_bits |= (byte_at(b + 49u + 2u * w) >> 4) << (4u * w);
  d = unpackHalf2x16(d_bits).x;
  const uint word = byte_at(b + 48u + (sub >> 1) * 2u) | (byte_at(b + 49u + (sub >> 1) * 2u) << 8);
  const uint shift = 6u * (sub & 1u);
  scale[0] = 2u * ((word >> shift) & 7u) + 1u;
  scale[1] = 2u * ((word >> (shift + 3u)) & 7u) + 1u;
  for (uint l = 0u; l < 4u; ++l) {
    const uint nibble = (byte_at(b + 32u + sub * 2u + l / 2u) >> (4u * (l & 1u))) & 15u;
    shifted_point(grid_point(byte_at(b + sub * 4u + l) | ((nibble & 7u) << 8)), (nibble & 8u) != 0u, l, level);
  }
#endif
}

#if defined(TYPE_IQ3_XXS)
const float kGridFactor = 0.25;
#elif defined(TYPE_IQ3_S)
const float kGridFactor = 1.0;
#else
const float kGridFactor = 0.125;
#endif
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block's 12 bytes.
void scale_min(uint scales, uint j, out float sc, out float m) {
  if (j < 4u) {
    sc = float(byte_at(scales + j) & 63u);
    m = float(byte_at(scales + j + 4u) & 63u);
  } else {
    sc = float((byte_at(scales + j + 4u) & 15u) | ((byte_at(scales + j - 4u) >> 6) << 4));
    m = float((byte_at(scales + j + 4u) >> 4) | ((byte_at(scales + j) >> 6) << 4));
  }
}
#endif

void dequant_group(uint row, uint g, out float v[32]) {
#if defined(TYPE_F32)
  for (uint i = 0u; i < 32u; ++i) v[i] = uintBitsToFloat(w[(row >> 2) + g * 32u + i]);
#elif defined(TYPE_F16)
  for (uint i = 0u; i < 32u; ++i) v[i] = half_at(row + (g * 32u + i) * 2u);
#elif defined(TYPE_BF16)
  for (uint i = 0u; i < 32u; ++i) v[i] = bfloat_at(row + (g * 32u + i) * 2u);
#elif defined(TYPE_Q8_0)
  const uint b = row + g * 34u;
  const float d = half_at(b);
  for (uint i = 0u; i < 32u; ++i) v[i] = d * float(signed_byte_at(b + 2u + i));
#elif defined(TYPE_Q4_0)
  const uint b = row + g * 18u;
  const float d = half_at(b);
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(b + 2u + i);
    v[i] = d * float(int(q & 15u) - 8);
    v[i + 16u] = d * float(int(q >> 4) - 8);
  }
#elif defined(TYPE_Q4_1)
  const uint b = row + g * 20u;
  const float d = half_at(b), m = half_at(b + 2u);
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(b + 4u + i);
    v[i] = d * float(q & 15u) + m;
    v[i + 16u] = d * float(q >> 4) + m;
  }
#elif defined(TYPE_Q5_0)
  const uint b = row + g * 22u;
  const float d = half_at(b);
  const uint qh = word_at(b + 2u);
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(b + 6u + i);
    const uint h0 = ((qh >> i) << 4) & 16u, h1 = (qh >> (i + 12u)) & 16u;
    v[i] = d * float(int((q & 15u) | h0) - 16);
    v[i + 16u] = d * float(int((q >> 4) | h1) - 16);
  }
#elif defined(TYPE_Q5_1)
  const uint b = row + g * 24u;
  const float d = half_at(b), m = half_at(b + 2u);
  const uint qh = word_at(b + 4u);
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(b + 8u + i);
    const uint h0 = ((qh >> i) << 4) & 16u, h1 = (qh >> (i + 12u)) & 16u;
    v[i] = d * float((q & 15u) | h0) + m;
    v[i + 16u] = d * float((q >> 4) | h1) + m;
  }
#elif defined(TYPE_Q4_K)
  const uint b = row + (g >> 3) * 144u, sub = g & 7u;
  float sc, m;
  scale_min(b + 4u, sub, sc, m);
  const float d = half_at(b) * sc, dm = half_at(b + 2u) * m;
  const uint q = b + 16u + (sub >> 1) * 32u, shift = (sub & 1u) * 4u;
  for (uint i = 0u; i < 32u; ++i) v[i] = d * float((byte_at(q + i) >> shift) & 15u) - dm;
#elif defined(TYPE_Q5_K)
  const uint b = row + (g >> 3) * 176u, sub = g & 7u;
  float sc, m;
  scale_min(b + 4u, sub, sc, m);
  const float d = half_at(b) * sc, dm = half_at(b + 2u) * m;
  const uint q = b + 48u + (sub >> 1) * 32u, shift = (sub & 1u) * 4u, high = 1u << sub;
  for (uint i = 0u; i < 32u; ++i) {
    const uint h = (byte_at(b + 16u + i) & high) != 0u ? 16u : 0u;
    v[i] = d * float(((byte_at(q + i) >> shift) & 15u) + h) - dm;
  }
#elif defined(TYPE_Q6_K)
  const uint b = row + (g >> 3) * 210u, sub = g & 7u;
  const uint half_index = sub >> 2, quarter = sub & 3u;
  const uint ql = b + half_index * 64u + (quarter & 1u) * 32u, qh = b + 128u + half_index * 32u;
  const uint low_shift = (quarter >> 1) * 4u, high_shift = quarter * 2u;
  const float d = half_at(b + 208u);
  for (uint i = 0u; i < 32u; ++i) {
    const int q = int(((byte_at(ql + i) >> low_shift) & 15u) | (((byte_at(qh + i) >> high_shift) & 3u) << 4)) - 32;
    const float s = float(signed_byte_at(b + 192u + half_index * 8u + i / 16u + quarter * 2u));
    v[i] = d * s * float(q);
  }
#elif defined(TYPE_Q2_K)
  // 84 bytes: 16 scale bytes (low nibble scale, high nibble min), 64 bytes
  // of 2-bit weights, d, dmin. Group g: half g / 4, bit pair g % 4; its
  // first 16 weights take one scale byte, the next 16 the following one.
  const uint b = row + (g >> 3) * 84u, sub = g & 7u, half_index = sub >> 2, shift = (sub & 3u) * 2u;
  const uint q = b + 16u + half_index * 32u, scale = b + half_index * 8u + (sub & 3u) * 2u;
  const float d = half_at(b + 80u), dmin = half_at(b + 82u);
  for (uint i = 0u; i < 32u; ++i) {
    const uint sc = byte_at(scale + i / 16u);
    v[i] = d * float(sc & 15u) * float((byte_at(q + i) >> shift) & 3u) - dmin * float(sc >> 4);
  }
#elif defined(TYPE_Q3_K)
  // 110 bytes: 32 bytes of high bits, 64 of 2-bit weights, 12 bytes of 16
  // packed 6-bit scales (offset 32), d. A weight is its two bits, less 4
  // where its high bit is clear.
  const uint b = row + (g >> 3) * 110u, sub = g & 7u, half_index = sub >> 2, shift = (sub & 3u) * 2u;
  const uint q = b + 32u + half_index * 32u, high = 1u << sub, scales = b + 96u;
  const float d = half_at(b + 108u);
  for (uint h = 0u; h < 2u; ++h) {
    const uint k = half_index * 8u + (sub & 3u) * 2u + h;
    const uint low = k < 8u ? byte_at(scales + k) & 15u : byte_at(scales + k - 8u) >> 4;
    const uint top = (byte_at(scales + 8u + (k & 3u)) >> (2u * (k >> 2))) & 3u;
    const float dl = d * float(int(low | (top << 4)) - 32);
    for (uint i = h * 16u; i < h * 16u + 16u; ++i) {
      const int w3 = int((byte_at(q + i) >> shift) & 3u) - ((byte_at(b + i) & high) != 0u ? 0 : 4);
      v[i] = dl * float(w3);
    }
  }
#elif defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
  // A non-linear codebook of 16 levels, a float16 scale per 32 weights
  // (IQ4_NL) or one per 256 with a 6-bit factor per 32 (IQ4_XS).
  const int kLevels[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#if defined(TYPE_IQ4_NL)
  const uint b = row + g * 18u, qs = b + 2u;
  const float scale = half_at(b);
#else
  const uint b = row + (g >> 3) * 136u, sub = g & 7u, qs = b + 8u + sub * 16u;
  const uint factor = ((byte_at(b + 4u + sub / 2u) >> (4u * (sub & 1u))) & 15u) |
                      (((byte_at(b + 2u) | (byte_at(b + 3u) << 8)) >> (2u * sub)) & 3u) << 4;
  const float scale = half_at(b) * float(int(factor) - 32);
#endif
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(qs + i);
    v[i] = scale * float(kLevels[q & 15u]);
    v[i + 16u] = scale * float(kLevels[q >> 4]);
  }
#elif defined(TYPE_MXFP4)
  // 17 bytes: an E8M0 exponent, then 16 bytes of E2M1 codes in Q4_0's
  // nibble order. The levels are the codes' values doubled, the scale
  // 2^(e - 128) (blocks.h: mxfp4_scale; e < 2 is a subnormal).
  const int kLevels[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const uint b = row + g * 17u, e = byte_at(b);
  const float scale = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
  for (uint i = 0u; i < 16u; ++i) {
    const uint q = byte_at(b + 1u + i);
    v[i] = float(kLevels[q & 15u]) * scale;
    v[i + 16u] = float(kLevels[q >> 4]) * scale;
  }
#elif defined(GRID_TYPE)
  float d;
  uint scale[2];
  int level[32];
  grid_group(row, g, d, scale, level);
  for (uint i = 0u; i < 32u; ++i) v[i] = (d * float(scale[i / 16u])) * float(level[i]) * kGridFactor;
#else
#error "no weight type defined"
#endif
}
