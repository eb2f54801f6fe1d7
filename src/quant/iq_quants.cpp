// The grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M
// (blocks.h): dequantization and dot products against Q8_K.
//
// Like k_quants.cpp, every format is first unpacked to plain integers, one
// signed level per value and one odd integer scale per 16 values, so that
//   x = d * scale * level * kFactor
// with kFactor a power of two fixed per format (1/8 for IQ2 and IQ1, 1/4 for
// IQ3_XXS, 1 for IQ3_S). IQ1's shift by +-1/8 is folded into the level
// (8 * point +- 1, factor 1/8). Dequantization evaluates (d * scale) * level
// and then applies kFactor: the reference computes d * scale / 2^k first,
// but scaling by a power of two is exact at these magnitudes, so the
// results are the same bits. Dot products sum level * a in integers per 16
// values, weight the sums by the scales, and apply the floats once a block.
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/superblock.h"

namespace revis::quant {
namespace {

constexpr int kBlock = kSuperBlock;
constexpr int kGroups = kBlock / 32;

struct Unpacked {
  float d;
  int8_t level[kBlock];
  int scale[kBlock / 16];
};

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 8 values of an unsigned grid point with the signs in `signs` applied.
void signed_point(uint64_t point, uint8_t signs, int8_t* out) {
  for (int k = 0; k < 8; ++k) {
    const int v = grid_value(point, k);
    out[k] = static_cast<int8_t>((signs >> k) & 1 ? -v : v);
  }
}

// Two 4-value IQ3 points side by side, 8 signs over both.
void signed_point_pair(uint32_t first, uint32_t second, uint8_t signs, int8_t* out) {
  signed_point(static_cast<uint64_t>(first) | (static_cast<uint64_t>(second) << 32), signs, out);
}

void unpack(const BlockIQ2_XXS& b, Unpacked& u) {
  for (int g = 0; g < kGroups; ++g) {
    const uint8_t* group = b.qs + 8 * g;
    const uint32_t word = load_u32(group + 4);
    for (int l = 0; l < 4; ++l)
      signed_point(kGridIq2Xxs[group[l]], sign_bits(word >> (7 * l)), u.level + 32 * g + 8 * l);
    u.scale[2 * g] = u.scale[2 * g + 1] = 2 * static_cast<int>(word >> 28) + 1;
  }
}

void unpack(const BlockIQ2_XS& b, Unpacked& u) {
  for (int g = 0; g < kGroups; ++g) {
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = b.qs[4 * g + l];
      signed_point(kGridIq2Xs[q & 511], sign_bits(q >> 9), u.level + 32 * g + 8 * l);
    }
    u.scale[2 * g] = 2 * (b.scales[g] & 0x0f) + 1;
    u.scale[2 * g + 1] = 2 * (b.scales[g] >> 4) + 1;
  }
}

void unpack(const BlockIQ2_S& b, Unpacked& u) {
  const uint8_t* signs = b.qs + kBlock / 8;
  for (int g = 0; g < kGroups; ++g) {
    for (int l = 0; l < 4; ++l) {
      const int index = b.qs[4 * g + l] | (((b.qh[g] >> (2 * l)) & 3) << 8);
      signed_point(kGridIq2S[index], signs[4 * g + l], u.level + 32 * g + 8 * l);
    }
    u.scale[2 * g] = 2 * (b.scales[g] & 0x0f) + 1;
    u.scale[2 * g + 1] = 2 * (b.scales[g] >> 4) + 1;
  }
}

void unpack(const BlockIQ3_XXS& b, Unpacked& u) {
  for (int g = 0; g < kGroups; ++g) {
    const uint8_t* points = b.qs + 8 * g;
    const uint32_t word = load_u32(b.qs + kBlock / 4 + 4 * g);
    for (int l = 0; l < 4; ++l)
      signed_point_pair(kGridIq3Xxs[points[2 * l]], kGridIq3Xxs[points[2 * l + 1]], sign_bits(word >> (7 * l)),
                        u.level + 32 * g + 8 * l);
    u.scale[2 * g] = u.scale[2 * g + 1] = 2 * static_cast<int>(word >> 28) + 1;
  }
}

void unpack(const BlockIQ3_S& b, Unpacked& u) {
  for (int g = 0; g < kGroups; ++g) {
    auto point = [&](int k) { return kGridIq3S[b.qs[8 * g + k] | (((b.qh[g] >> k) & 1) << 8)]; };
    for (int l = 0; l < 4; ++l)
      signed_point_pair(point(2 * l), point(2 * l + 1), b.signs[4 * g + l], u.level + 32 * g + 8 * l);
    u.scale[2 * g] = u.scale[2 * g + 1] = 2 * ((b.scales[g / 2] >> (4 * (g % 2))) & 0x0f) + 1;
  }
}

// IQ1's level for one value: 8 * point + 1, or - 1 when the delta is negative.
void shifted_point(uint64_t point, bool negative_delta, int8_t* out) {
  for (int k = 0; k < 8; ++k)
    out[k] = static_cast<int8_t>(8 * static_cast<int8_t>(grid_value(point, k)) + (negative_delta ? -1 : 1));
}

void unpack(const BlockIQ1_S& b, Unpacked& u) {
  for (int g = 0; g < kGroups; ++g) {
    const unsigned high = b.qh[g];
    for (int l = 0; l < 4; ++l) {
      const int index = b.qs[4 * g + l] | (((high >> (3 * l)) & 7) << 8);
      shifted_point(kGridIq1S[index], (high & 0x8000) != 0, u.level + 32 * g + 8 * l);
    }
    u.scale[2 * g] = u.scale[2 * g + 1] = 2 * static_cast<int>((high >> 12) & 7) + 1;
  }
}

uint16_t scale_word_iq1_m(const BlockIQ1_M& b, int w) {
  return static_cast<uint16_t>(b.scales[2 * w] | (b.scales[2 * w + 1] << 8));
}

void unpack(const BlockIQ1_M& b, Unpacked& u) {
  uint16_t words[4];
  for (int w = 0; w < 4; ++w) words[w] = scale_word_iq1_m(b, w);
  for (int g = 0; g < kGroups; ++g) {
    for (int l = 0; l < 4; ++l) {
      const unsigned nibble = (b.qh[2 * g + l / 2] >> (4 * (l % 2))) & 0x0f;
      const int index = b.qs[4 * g + l] | ((nibble & 7) << 8);
      shifted_point(kGridIq1S[index], (nibble & 8) != 0, u.level + 32 * g + 8 * l);
    }
    const unsigned word = words[g / 2];
    u.scale[2 * g] = 2 * static_cast<int>((word >> (6 * (g % 2))) & 7) + 1;
    u.scale[2 * g + 1] = 2 * static_cast<int>((word >> (6 * (g % 2) + 3)) & 7) + 1;
  }
}

float block_scale(const BlockIQ2_XXS& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ2_XS& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ2_S& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ3_XXS& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ3_S& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ1_S& b) { return half_to_float(b.d); }
float block_scale(const BlockIQ1_M& b) {
  uint16_t d = 0;
  for (int w = 0; w < 4; ++w) d |= static_cast<uint16_t>((scale_word_iq1_m(b, w) >> 12) << (4 * w));
  return half_to_float(d);
}

template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n, float factor) {
  const auto* blocks = static_cast<const Block*>(src);
  Unpacked u;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    unpack(blocks[b], u);
    const float d = block_scale(blocks[b]);
    float* y = dst + b * kBlock;
    for (int i = 0; i < kBlock; ++i) {
      const float scale = d * static_cast<float>(u.scale[i / 16]);
      y[i] = scale * static_cast<float>(u.level[i]) * factor;
    }
  }
}

template <typename Block>
float dot_blocks(const void* w, const void* a, int64_t n, float factor) {
  return dot_superblocks<Block, Unpacked>(
      w, a, n, [](const Block& b, Unpacked& u) { unpack(b, u); },
      [factor](const Block& b, const Unpacked& u, const BlockQ8_K& ab) {
        // |level * a| <= 62 * 128, 16 per group, scale <= 31, 16 groups: < 2^27.
        const int scaled_dot = scaled_group_dot(u.level, ab.qs, u.scale, 16, kBlock);
        return (block_scale(b) * ab.d * factor) * static_cast<float>(scaled_dot);
      });
}

constexpr float kEighth = 0.125f, kQuarter = 0.25f, kOne = 1.0f;

}  // namespace

void dequantize_iq2_xxs(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ2_XXS>(src, dst, n, kEighth); }
float dot_iq2_xxs(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ2_XXS>(w, a, n, kEighth); }
void dequantize_iq2_xs(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ2_XS>(src, dst, n, kEighth); }
float dot_iq2_xs(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ2_XS>(w, a, n, kEighth); }
void dequantize_iq2_s(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ2_S>(src, dst, n, kEighth); }
float dot_iq2_s(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ2_S>(w, a, n, kEighth); }
void dequantize_iq3_xxs(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ3_XXS>(src, dst, n, kQuarter); }
float dot_iq3_xxs(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ3_XXS>(w, a, n, kQuarter); }
void dequantize_iq3_s(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ3_S>(src, dst, n, kOne); }
float dot_iq3_s(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ3_S>(w, a, n, kOne); }
void dequantize_iq1_s(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ1_S>(src, dst, n, kEighth); }
float dot_iq1_s(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ1_S>(w, a, n, kEighth); }
void dequantize_iq1_m(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockIQ1_M>(src, dst, n, kEighth); }
float dot_iq1_m(const void* w, const void* a, int64_t n) { return dot_blocks<BlockIQ1_M>(w, a, n, kEighth); }

}  // namespace revis::quant
