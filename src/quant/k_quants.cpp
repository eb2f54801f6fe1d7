// The K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and their activation format
// Q8_K: 256-value super-blocks split into 16 or 8 groups, each group with a
// small integer scale (and for Q2_K/Q4_K/Q5_K an integer minimum) times one
// or two half-precision super-block scales.
//
// Every format is handled as "unpack to plain integers, then one generic
// loop": the bit packing lives in the unpack_* / pack_* pairs below, the
// arithmetic in the shared decode and dot loops. Dequantization evaluates
// (d * sc) * q - (dmin * m) in GGUF's reference order, which makes it
// bit-exact; dot products sum q * a in integers per group, weight the group
// sums by the integer scales, and apply the float scales once per block.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/scale_search.h"
#include "quant/superblock.h"

namespace revis::quant {
namespace {

constexpr int kBlock = kSuperBlock;

// One super-block as integers: q per value, scale (and min) per group.
struct Unpacked {
  int q[kBlock];
  int scale[16];
  int min[16];
};

// --- Bit layouts ---------------------------------------------------------

// Q2_K and the low bits of Q3_K: in each half of 128 values, value
// 32 * k + l of the half is bits 2k..2k+1 of byte l of that half's 32 bytes.
void unpack_2bit(const uint8_t* qs, int* q) {
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) q[128 * half + 32 * k + l] = (qs[32 * half + l] >> (2 * k)) & 3;
}

void pack_2bit(const int* q, uint8_t* qs) {
  std::fill(qs, qs + kBlock / 4, uint8_t{0});
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) qs[32 * half + l] |= static_cast<uint8_t>((q[128 * half + 32 * k + l] & 3) << (2 * k));
}

// Q4_K/Q5_K low bits: in each 64 values, the first 32 are the low nibbles
// of 32 bytes and the next 32 their high nibbles.
void unpack_4bit(const uint8_t* qs, int* q) {
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int l = 0; l < 32; ++l) {
      q[64 * chunk + l] = qs[32 * chunk + l] & 0x0f;
      q[64 * chunk + 32 + l] = qs[32 * chunk + l] >> 4;
    }
}

void pack_4bit(const int* q, uint8_t* qs) {
  for (int chunk = 0; chunk < 4; ++chunk)
    for (int l = 0; l < 32; ++l)
      qs[32 * chunk + l] = static_cast<uint8_t>((q[64 * chunk + l] & 0x0f) | ((q[64 * chunk + 32 + l] & 0x0f) << 4));
}

// Q3_K's and Q5_K's extra top bit: bit v / 32 of mask[v % 32], at weight `bit_value`.
void add_top_bits(const uint8_t* mask, int bit_value, int* q) {
  for (int k = 0; k < 8; ++k)
    for (int l = 0; l < 32; ++l) q[32 * k + l] += ((mask[l] >> k) & 1) * bit_value;
}

void pack_top_bits(const int* q, int bit_value, uint8_t* mask) {
  std::fill(mask, mask + 32, uint8_t{0});
  for (int k = 0; k < 8; ++k)
    for (int l = 0; l < 32; ++l) mask[l] |= static_cast<uint8_t>(((q[32 * k + l] / bit_value) & 1) << k);
}

void pack_scales_6bit(const uint8_t* scale, const uint8_t* min, uint8_t* s) {
  for (int g = 0; g < 4; ++g) {
    s[g] = scale[g] & 63;
    s[g + 4] = min[g] & 63;
  }
  for (int g = 4; g < 8; ++g) {
    s[g + 4] = static_cast<uint8_t>((scale[g] & 0x0f) | ((min[g] & 0x0f) << 4));
    s[g - 4] |= static_cast<uint8_t>((scale[g] >> 4) << 6);
    s[g] |= static_cast<uint8_t>((min[g] >> 4) << 6);
  }
}

// Q3_K: sixteen 6-bit scales (stored + 32) in 12 bytes: low nibbles of
// groups 0..7 / 8..15 in the low / high nibbles of bytes 0..7, top 2 bits of
// group g in byte 8 + g % 4 at bit 2 * (g / 4).
void unpack_scales_q3(const uint8_t* s, int* scale) {
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? (s[g] & 0x0f) : (s[g - 8] >> 4);
    const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    scale[g] = (low | (high << 4)) - 32;
  }
}

void pack_scales_q3(const int8_t* scale, uint8_t* s) {
  std::fill(s, s + 12, uint8_t{0});
  for (int g = 0; g < 16; ++g) {
    const int stored = scale[g] + 32;
    s[g % 8] |= static_cast<uint8_t>((stored & 0x0f) << (g < 8 ? 0 : 4));
    s[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
  }
}

// Q6_K: per half of 128 values, value 32 * k + l takes its low nibble from
// ql[l + 32 * (k % 2)] (low nibble for k < 2, high for k >= 2) and its top
// 2 bits from qh[l] at bit 2k.
void unpack_6bit(const uint8_t* ql, const uint8_t* qh, int* q) {
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
        const int high = (qh[32 * half + l] >> (2 * k)) & 3;
        q[128 * half + 32 * k + l] = (low | (high << 4)) - 32;
      }
}

void pack_6bit(const int* q, uint8_t* ql, uint8_t* qh) {
  std::fill(ql, ql + kBlock / 2, uint8_t{0});
  std::fill(qh, qh + kBlock / 4, uint8_t{0});
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int stored = q[128 * half + 32 * k + l] + 32;
        ql[64 * half + 32 * (k % 2) + l] |= static_cast<uint8_t>((stored & 0x0f) << (4 * (k / 2)));
        qh[32 * half + l] |= static_cast<uint8_t>((stored >> 4) << (2 * k));
      }
}

// --- Per-format unpacking to integers ---------------------------------------

void unpack(const BlockQ2_K& b, Unpacked& u) {
  unpack_2bit(b.qs, u.q);
  for (int g = 0; g < 16; ++g) {
    u.scale[g] = b.scales[g] & 0x0f;
    u.min[g] = b.scales[g] >> 4;
  }
}

void unpack(const BlockQ3_K& b, Unpacked& u) {
  unpack_2bit(b.qs, u.q);
  add_top_bits(b.hmask, 4, u.q);
  for (int i = 0; i < kBlock; ++i) u.q[i] -= 4;  // a clear top bit means "minus 4"
  unpack_scales_q3(b.scales, u.scale);
}

void unpack(const BlockQ4_K& b, Unpacked& u) {
  unpack_4bit(b.qs, u.q);
  unpack_scales_6bit(b.scales, u.scale, u.min);
}

void unpack(const BlockQ5_K& b, Unpacked& u) {
  unpack_4bit(b.qs, u.q);
  add_top_bits(b.qh, 16, u.q);
  unpack_scales_6bit(b.scales, u.scale, u.min);
}

void unpack(const BlockQ6_K& b, Unpacked& u) {
  unpack_6bit(b.ql, b.qh, u.q);
  for (int g = 0; g < 16; ++g) u.scale[g] = b.scales[g];
}

// --- Generic decode and dot -----------------------------------------------

struct Geometry {
  int group_size;
  bool has_min;  // x = d*sc*q - dmin*m rather than d*sc*q
};
constexpr Geometry kQ2 = {16, true}, kQ3 = {16, false}, kQ4 = {32, true}, kQ5 = {32, true}, kQ6 = {16, false};

float dmin_of(const BlockQ2_K& b) { return half_to_float(b.dmin); }
float dmin_of(const BlockQ4_K& b) { return half_to_float(b.dmin); }
float dmin_of(const BlockQ5_K& b) { return half_to_float(b.dmin); }
float dmin_of(const BlockQ3_K&) { return 0; }
float dmin_of(const BlockQ6_K&) { return 0; }

template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n, Geometry geometry) {
  const auto* blocks = static_cast<const Block*>(src);
  Unpacked u;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    unpack(blocks[b], u);
    const float d = half_to_float(blocks[b].d);
    const float dmin = dmin_of(blocks[b]);
    float* y = dst + b * kBlock;
    for (int g = 0; g < kBlock / geometry.group_size; ++g) {
      const float scale = d * static_cast<float>(u.scale[g]);
      const float offset = geometry.has_min ? dmin * static_cast<float>(u.min[g]) : 0.0f;
      const int begin = g * geometry.group_size;
      if (geometry.has_min) {
        for (int i = begin; i < begin + geometry.group_size; ++i) y[i] = scale * static_cast<float>(u.q[i]) - offset;
      } else {
        for (int i = begin; i < begin + geometry.group_size; ++i) y[i] = scale * static_cast<float>(u.q[i]);
      }
    }
  }
}

template <typename Block>
float dot_blocks(const void* w, const void* a, int64_t n, Geometry geometry) {
  return dot_superblocks<Block, Unpacked>(
      w, a, n, [](const Block& b, Unpacked& u) { unpack(b, u); },
      [geometry](const Block& b, const Unpacked& u, const BlockQ8_K& ab) {
        // |q * a| <= 32 * 128 and |scale| <= 128 keep these sums far inside int32.
        const int scaled_dot = scaled_group_dot(u.q, ab.qs, u.scale, geometry.group_size, kBlock);
        int min_dot = 0;
        for (int g = 0; g < kBlock / geometry.group_size && geometry.has_min; ++g) {
          // Q8_K carries the sum of every 16 activations, which is all the
          // group minimum needs.
          const int begin = g * geometry.group_size;
          int activation_sum = 0;
          for (int s = begin / 16; s < (begin + geometry.group_size) / 16; ++s) activation_sum += ab.bsums[s];
          min_dot += u.min[g] * activation_sum;
        }
        return (half_to_float(b.d) * ab.d) * static_cast<float>(scaled_dot) -
               (dmin_of(b) * ab.d) * static_cast<float>(min_dot);
      });
}

}  // namespace

// Q4_K/Q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes. Groups
// 0..3 keep scale and min whole in bytes 0..3 and 4..7; groups 4..7 keep
// their low nibbles in bytes 8..11 and park their top 2 bits in the unused
// top bits of bytes 0..3 (scales) and 4..7 (mins).
void unpack_scales_6bit(const uint8_t* s, int* scale, int* min) {
  for (int g = 0; g < 4; ++g) {
    scale[g] = s[g] & 63;
    min[g] = s[g + 4] & 63;
  }
  for (int g = 4; g < 8; ++g) {
    scale[g] = (s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4);
    min[g] = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
  }
}

// --- Q2_K ------------------------------------------------------------------

void dequantize_q2_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ2_K>(src, dst, n, kQ2); }
float dot_q2_k(const void* w, const void* a, int64_t n) { return dot_blocks<BlockQ2_K>(w, a, n, kQ2); }

void quantize_q2_k(const float* src, void* dst, int64_t n, const float* importance) {
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  AffineSuperBlock fit;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    fit_affine_superblock(src + b * kBlock, importance ? importance + b * kBlock : nullptr, 16, 16, /*q_max=*/3, /*sc_max=*/15, fit);
    int q[kBlock];
    std::copy(fit.q, fit.q + kBlock, q);
    pack_2bit(q, blocks[b].qs);
    for (int g = 0; g < 16; ++g) blocks[b].scales[g] = static_cast<uint8_t>(fit.sc[g] | (fit.m[g] << 4));
    blocks[b].d = fit.d_bits;
    blocks[b].dmin = fit.dmin_bits;
  }
}

// --- Q3_K ------------------------------------------------------------------

void dequantize_q3_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ3_K>(src, dst, n, kQ3); }
float dot_q3_k(const void* w, const void* a, int64_t n) { return dot_blocks<BlockQ3_K>(w, a, n, kQ3); }

void quantize_q3_k(const float* src, void* dst, int64_t n, const float* importance) {
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  SymmetricSuperBlock fit;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    fit_symmetric_superblock(src + b * kBlock, importance ? importance + b * kBlock : nullptr, 16, 16, -4, 3, -32, 31, fit);
    int stored[kBlock];  // q + 4, 3 bits
    for (int i = 0; i < kBlock; ++i) stored[i] = fit.q[i] + 4;
    pack_2bit(stored, blocks[b].qs);
    pack_top_bits(stored, 4, blocks[b].hmask);
    pack_scales_q3(fit.sc, blocks[b].scales);
    blocks[b].d = fit.d_bits;
  }
}

// --- Q4_K ------------------------------------------------------------------

void dequantize_q4_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ4_K>(src, dst, n, kQ4); }
float dot_q4_k(const void* w, const void* a, int64_t n) { return dot_blocks<BlockQ4_K>(w, a, n, kQ4); }

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  AffineSuperBlock fit;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    fit_affine_superblock(src + b * kBlock, nullptr, 8, 32, /*q_max=*/15, /*sc_max=*/63, fit);
    int q[kBlock];
    std::copy(fit.q, fit.q + kBlock, q);
    pack_4bit(q, blocks[b].qs);
    pack_scales_6bit(fit.sc, fit.m, blocks[b].scales);
    blocks[b].d = fit.d_bits;
    blocks[b].dmin = fit.dmin_bits;
  }
}

// --- Q5_K ------------------------------------------------------------------

void dequantize_q5_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ5_K>(src, dst, n, kQ5); }
float dot_q5_k(const void* w, const void* a, int64_t n) { return dot_blocks<BlockQ5_K>(w, a, n, kQ5); }

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  AffineSuperBlock fit;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    fit_affine_superblock(src + b * kBlock, nullptr, 8, 32, /*q_max=*/31, /*sc_max=*/63, fit);
    int q[kBlock];
    std::copy(fit.q, fit.q + kBlock, q);
    pack_4bit(q, blocks[b].qs);
    pack_top_bits(q, 16, blocks[b].qh);
    pack_scales_6bit(fit.sc, fit.m, blocks[b].scales);
    blocks[b].d = fit.d_bits;
    blocks[b].dmin = fit.dmin_bits;
  }
}

// --- Q6_K ------------------------------------------------------------------

void dequantize_q6_k(const void* src, float* dst, int64_t n) { dequantize_blocks<BlockQ6_K>(src, dst, n, kQ6); }
float dot_q6_k(const void* w, const void* a, int64_t n) { return dot_blocks<BlockQ6_K>(w, a, n, kQ6); }

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  SymmetricSuperBlock fit;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    fit_symmetric_superblock(src + b * kBlock, nullptr, 16, 16, -32, 31, -128, 127, fit);
    int q[kBlock];
    std::copy(fit.q, fit.q + kBlock, q);
    pack_6bit(q, blocks[b].ql, blocks[b].qh);
    std::copy(fit.sc, fit.sc + 16, blocks[b].scales);
    blocks[b].d = fit.d_bits;
  }
}

// --- Q8_K ------------------------------------------------------------------

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float d = blocks[b].d;
    float* y = dst + b * kBlock;
    for (int i = 0; i < kBlock; ++i) y[i] = d * static_cast<float>(blocks[b].qs[i]);
  }
}

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* x = src + b * kBlock;
    BlockQ8_K& out = blocks[b];
    float extreme = 0;  // signed value of largest magnitude
    for (int i = 0; i < kBlock; ++i)
      if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
    if (extreme == 0 || !std::isfinite(extreme)) {
      // No scale fits an infinite value; a zero block at least keeps the
      // dot products finite instead of spreading NaN through a layer.
      out = BlockQ8_K{};
    } else {
      // The extreme value maps to -127 (not the long end -128): that is
      // llama.cpp's choice for its activations, and matching it keeps our
      // logits within float rounding of the reference.
      const float inverse = -127.0f / extreme;
      out.d = 1.0f / inverse;
      for (int i = 0; i < kBlock; ++i) out.qs[i] = static_cast<int8_t>(quantize_clamped(x[i] * inverse, -128, 127));
    }
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int i = 16 * s; i < 16 * (s + 1); ++i) sum += out.qs[i];
      out.bsums[s] = static_cast<int16_t>(sum);
    }
  }
}

float dot_q8_k(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    int integer_dot = 0;
    for (int i = 0; i < kBlock; ++i) integer_dot += wb[b].qs[i] * ab[b].qs[i];
    sum += (wb[b].d * ab[b].d) * static_cast<float>(integer_dot);
  }
  return sum;
}

}  // namespace revis::quant
