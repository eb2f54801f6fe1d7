// One group of 32 weights of a row, dequantized: group g of the row whose
// bytes start at byte `row`. Each weight type is compiled in by its macro
// (TYPE_F16, TYPE_Q8_0, ...); the float steps are the CPU reference's
// (src/quant), so a weight has the same value on both. The K-quants' 256
// weights per block are its eight groups.

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
#else
#error "no weight type defined"
#endif
}
