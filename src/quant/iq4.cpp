// IQ4_NL (32-value blocks, activations in Q8_0) and IQ4_XS (256-value
// super-blocks of 8 groups with 6-bit group scales, activations in Q8_K):
// 4-bit indices into one fixed non-uniform codebook, kIq4Values, whose
// levels are denser near zero where trained weights cluster.
//
// Quantizing fits a scale per group by least squares over a fan of
// candidate grids, as scale_search.cpp does for the uniform grids, except
// that "rounding" means picking the nearest codebook level.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/scale_search.h"

namespace revis::quant {
namespace {

constexpr int kGroup = 32;  // both formats index 32 values per scale

// Index of the codebook level nearest v: count the midpoints below it.
int nearest_level(float v) {
  int index = 0;
  for (int k = 0; k < 15; ++k) {
    const float midpoint = 0.5f * static_cast<float>(kIq4Values[k] + kIq4Values[k + 1]);
    index += v > midpoint ? 1 : 0;
  }
  return index;
}

// Same nibble order as Q4_0: value j < 16 low nibble of byte j, j + 16 high.
void unpack_levels(const uint8_t* qs, int* level) {
  for (int j = 0; j < kGroup / 2; ++j) {
    level[j] = kIq4Values[qs[j] & 0x0f];
    level[j + kGroup / 2] = kIq4Values[qs[j] >> 4];
  }
}

void pack_indices(const uint8_t* index, uint8_t* qs) {
  for (int j = 0; j < kGroup / 2; ++j) qs[j] = static_cast<uint8_t>(index[j] | (index[j + kGroup / 2] << 4));
}

void indices_for_scale(const float* x, float scale, uint8_t* index) {
  const float inverse = scale != 0 ? 1.0f / scale : 0.0f;
  for (int j = 0; j < kGroup; ++j) index[j] = static_cast<uint8_t>(nearest_level(x[j] * inverse));
}

// Least-squares fit x ~= scale * kIq4Values[index]; returns scale and writes
// index. Scores like fit_symmetric: with the indices fixed the error left is
// sum w x^2 - (sum w x v)^2 / sum w v^2.
float fit_codebook(const float* x, const float* w, uint8_t* index) {
  float extreme = 0;
  for (int j = 0; j < kGroup; ++j)
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
  std::fill(index, index + kGroup, uint8_t{8});  // level 1, the closest to zero
  if (!(std::fabs(extreme) > 0) || !std::isfinite(extreme)) return 0;

  double best_score = 0;
  float best_scale = 0;
  uint8_t trial[kGroup];
  auto try_scale = [&](float scale) {
    indices_for_scale(x, scale, trial);
    double sum_xv = 0, sum_vv = 0;
    for (int j = 0; j < kGroup; ++j) {
      const double v = kIq4Values[trial[j]];
      sum_xv += w[j] * x[j] * v;
      sum_vv += w[j] * v * v;
    }
    const double score = sum_xv * sum_xv / sum_vv;  // sum_vv > 0: no level is 0
    if (score > best_score) {
      best_score = score;
      best_scale = static_cast<float>(sum_xv / sum_vv);
      std::copy(trial, trial + kGroup, index);
      return true;
    }
    return false;
  };
  // The extreme value on either end of the codebook (-127 or +113), give or
  // take half the spacing of the outer levels.
  for (int step = -10; step <= 10; ++step) {
    try_scale(extreme / (-127.0f + static_cast<float>(step)));
    try_scale(extreme / (113.0f + static_cast<float>(step)));
  }
  // Re-pick the levels for the fitted scale until that stops helping.
  for (int round = 0; round < 3 && try_scale(best_scale); ++round) {
  }
  return best_scale;
}

double group_error(const float* x, const float* w, float scale, const uint8_t* index) {
  double error = 0;
  for (int j = 0; j < kGroup; ++j) {
    const double diff = static_cast<double>(scale * kIq4Values[index[j]]) - x[j];
    error += w[j] * diff * diff;
  }
  return error;
}

}  // namespace

// --- IQ4_NL ----------------------------------------------------------------

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n / kGroup; ++b) {
    int level[kGroup];
    unpack_levels(blocks[b].qs, level);
    const float d = half_to_float(blocks[b].d);
    float* y = dst + b * kGroup;
    for (int j = 0; j < kGroup; ++j) y[j] = d * static_cast<float>(level[j]);
  }
}

void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t b = 0; b < n / kGroup; ++b) {
    const float* x = src + b * kGroup;
    float w[kGroup];
    uint8_t index[kGroup];
    importance_weights(x, kGroup, w);
    blocks[b].d = encode_scale(fit_codebook(x, w, index));
    // The levels were picked for the exact scale; re-pick them for the
    // stored half if that is closer.
    const float d = half_to_float(blocks[b].d);
    uint8_t rounded[kGroup];
    indices_for_scale(x, d, rounded);
    if (group_error(x, w, d, rounded) < group_error(x, w, d, index)) std::copy(rounded, rounded + kGroup, index);
    pack_indices(index, blocks[b].qs);
  }
}

float dot_iq4_nl(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kGroup; ++b) {
    int level[kGroup];
    unpack_levels(wb[b].qs, level);
    int integer_dot = 0;
    for (int j = 0; j < kGroup; ++j) integer_dot += level[j] * ab[b].qs[j];
    sum += static_cast<float>(integer_dot) * (half_to_float(wb[b].d) * half_to_float(ab[b].d));
  }
  return sum;
}

// --- IQ4_XS ----------------------------------------------------------------

namespace {

constexpr int kGroupsXs = kSuperBlock / kGroup;

// Group scale as stored: 6 bits, minus 32.
int group_scale_xs(const BlockIQ4_XS& b, int g) {
  const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
  const int high = (b.scales_h >> (2 * g)) & 3;
  return (low | (high << 4)) - 32;
}

struct XsFit {
  uint16_t d_bits = 0;
  int scale[kGroupsXs] = {};
  uint8_t index[kSuperBlock] = {};
};

void reindex_xs(const float* x, XsFit& fit) {
  const float d = half_to_float(fit.d_bits);
  for (int g = 0; g < kGroupsXs; ++g)
    indices_for_scale(x + g * kGroup, d * static_cast<float>(fit.scale[g]), fit.index + g * kGroup);
}

double error_xs(const float* x, const float* w, const XsFit& fit) {
  const float d = half_to_float(fit.d_bits);
  double error = 0;
  for (int g = 0; g < kGroupsXs; ++g)
    error += group_error(x + g * kGroup, w + g * kGroup, d * static_cast<float>(fit.scale[g]), fit.index + g * kGroup);
  return error;
}

}  // namespace

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = half_to_float(blocks[b].d);
    for (int g = 0; g < kGroupsXs; ++g) {
      int level[kGroup];
      unpack_levels(blocks[b].qs + g * kGroup / 2, level);
      const float scale = d * static_cast<float>(group_scale_xs(blocks[b], g));
      float* y = dst + b * kSuperBlock + g * kGroup;
      for (int j = 0; j < kGroup; ++j) y[j] = scale * static_cast<float>(level[j]);
    }
  }
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n, const float* importance) {
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* x = src + b * kSuperBlock;
    float w[kSuperBlock];
    float group_scales[kGroupsXs];
    XsFit fit;
    float extreme = 0;
    for (int g = 0; g < kGroupsXs; ++g) {
      weighted_importance(x + g * kGroup, importance ? importance + b * kSuperBlock + g * kGroup : nullptr, kGroup,
                          w + g * kGroup);
      group_scales[g] = fit_codebook(x + g * kGroup, w + g * kGroup, fit.index + g * kGroup);
      if (std::fabs(group_scales[g]) > std::fabs(extreme)) extreme = group_scales[g];
    }
    auto assign = [&](XsFit& f) {
      const float d = half_to_float(f.d_bits);
      for (int g = 0; g < kGroupsXs; ++g) f.scale[g] = d != 0 ? quantize_clamped(group_scales[g] / d, -32, 31) : 0;
      reindex_xs(x, f);
      return error_xs(x, w, f);
    };
    // The largest group scale takes the long end of the 6-bit range, -32.
    fit.d_bits = encode_scale(extreme / -32.0f);
    double error = assign(fit);
    const uint16_t centre = fit.d_bits;
    for (int step : kNeighbourSteps) {
      XsFit candidate = fit;
      candidate.d_bits = neighbour_half(centre, step);
      if (candidate.d_bits == centre) continue;
      const double candidate_error = assign(candidate);
      if (candidate_error < error) {
        fit = candidate;
        error = candidate_error;
      }
    }

    // With the group scales and indices fixed, refit d by least squares.
    for (int round = 0; round < 2; ++round) {
      double saa = 0, sxa = 0;
      for (int i = 0; i < kSuperBlock; ++i) {
        const double a = static_cast<double>(fit.scale[i / kGroup]) * kIq4Values[fit.index[i]];
        saa += w[i] * a * a;
        sxa += w[i] * x[i] * a;
      }
      if (!(saa > 0)) break;
      XsFit candidate = fit;
      candidate.d_bits = encode_scale(static_cast<float>(sxa / saa));
      reindex_xs(x, candidate);
      const double candidate_error = error_xs(x, w, candidate);
      if (!(candidate_error < error)) break;
      fit = candidate;
      error = candidate_error;
    }

    BlockIQ4_XS& out = blocks[b];
    out.d = fit.d_bits;
    out.scales_h = 0;
    std::fill(out.scales_l, out.scales_l + 4, uint8_t{0});
    for (int g = 0; g < kGroupsXs; ++g) {
      const int stored = fit.scale[g] + 32;
      out.scales_l[g / 2] |= static_cast<uint8_t>((stored & 0x0f) << (4 * (g % 2)));
      out.scales_h |= static_cast<uint16_t>((stored >> 4) << (2 * g));
      pack_indices(fit.index + g * kGroup, out.qs + g * kGroup / 2);
    }
  }
}

float dot_iq4_xs(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    // |level * a| <= 127 * 128, 32 per group, |scale| <= 32, 8 groups: < 2^28.
    int scaled_dot = 0;
    for (int g = 0; g < kGroupsXs; ++g) {
      int level[kGroup];
      unpack_levels(wb[b].qs + g * kGroup / 2, level);
      const int8_t* aq = ab[b].qs + g * kGroup;
      int group_dot = 0;
      for (int j = 0; j < kGroup; ++j) group_dot += level[j] * aq[j];
      scaled_dot += group_scale_xs(wb[b], g) * group_dot;
    }
    sum += (half_to_float(wb[b].d) * ab[b].d) * static_cast<float>(scaled_dot);
  }
  return sum;
}

}  // namespace revis::quant
