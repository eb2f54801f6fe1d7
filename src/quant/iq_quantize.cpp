// Quantizing to the grid types IQ2_XXS, IQ2_XS, IQ3_XXS and IQ3_S
// (blocks.h): per 8 (IQ2) or 4 (IQ3) values one point of the format's grid,
// per 8 values their signs (7 free plus parity for IQ2_XXS, IQ2_XS and
// IQ3_XXS, all 8 for IQ3_S), per 32 (IQ2_XS: 16) values an odd 4-bit scale,
// and one half d per 256: x = d * (2s + 1) * kFactor * point * sign.
//
// One search serves the four formats; only the grid, the scale group, the
// sign rule and the bit packing differ. Each value's squared error is
// weighed by w_i = importance_i * (rms + |x_i|), importance_i being the
// importance matrix's mean squared activation of input channel i (1 where
// none is given): at two and three bits most values are far off, and only
// the channels the activations drive hard can be kept close.
//  1. Signs: each value's own, except that under the parity rule a group
//     of 8 with an odd count of negatives flips the value whose flip costs
//     least (smallest w_i |x_i|), which then aims at minus its magnitude.
//  2. Scale: for a fan of trial scales (the group's largest magnitude over
//     0.45..1.15 times the grid's largest value), each point takes the grid
//     point of least weighted error at that scale, then the group's scale
//     is refitted by least squares; the trial with the least error wins,
//     and its points are re-picked once at the refitted scale.
//  3. The super-block: d puts the largest group scale at the top odd
//     scale 31; each group's scale is rounded to an odd multiple of d *
//     kFactor and its points re-picked for the stored scale.
// Each point search tries every grid point, with the sums over its values
// taken once per group (tabulate): about 10^3 operations a value for the
// 512-point grids.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/scale_search.h"

namespace revis::quant {
namespace {

constexpr int kSignGroup = 8;   // values under one sign byte
constexpr int kMaxGroup = 32;   // values under one 4-bit scale, at most

struct GridFormat {
  std::vector<float> levels;  // n_points x point_size grid values
  int n_points;
  int point_size;   // 8 or 4
  int scale_group;  // 32 or 16
  bool parity;      // the eighth sign of each 8 follows from the other seven
  float factor;     // kFactor
  float largest;    // the grid's largest value
};

template <typename Word, size_t N>
GridFormat make_format(const std::array<Word, N>& grid, int point_size, int scale_group, bool parity, float factor) {
  GridFormat f{{}, static_cast<int>(N), point_size, scale_group, parity, factor, 0};
  for (Word point : grid)
    for (int k = 0; k < point_size; ++k) {
      f.levels.push_back(static_cast<float>(grid_value(point, k)));
      f.largest = std::max(f.largest, f.levels.back());
    }
  return f;
}

const GridFormat& iq2_xxs() { static const GridFormat f = make_format(kGridIq2Xxs, 8, 32, true, 0.125f); return f; }
const GridFormat& iq2_xs() { static const GridFormat f = make_format(kGridIq2Xs, 8, 16, true, 0.125f); return f; }
const GridFormat& iq3_xxs() { static const GridFormat f = make_format(kGridIq3Xxs, 4, 32, true, 0.25f); return f; }
const GridFormat& iq3_s() { static const GridFormat f = make_format(kGridIq3S, 4, 32, false, 1.0f); return f; }

// One super-block as the search leaves it, before packing.
struct GridBlock {
  uint16_t d = 0;
  int scale[kSuperBlock / 16] = {};       // per scale group, 0..15
  uint16_t point[kSuperBlock / 4] = {};   // per point
  uint8_t signs[kSuperBlock / kSignGroup] = {};  // bit j set: value j negative
};

// The values of one scale group in the magnitude domain: t_i = |x_i|, or
// -|x_i| for a value whose sign was flipped for parity.
struct Targets {
  float t[kMaxGroup];
  float w[kMaxGroup];
};

void make_targets(const GridFormat& f, const float* x, const float* w, Targets& out, uint8_t* signs) {
  for (int k = 0; k < f.scale_group / kSignGroup; ++k) {
    uint8_t negative = 0;
    int cheapest = 0;
    for (int j = 0; j < kSignGroup; ++j) {
      const int i = kSignGroup * k + j;
      out.t[i] = std::fabs(x[i]);
      out.w[i] = w[i];
      if (x[i] < 0) negative |= static_cast<uint8_t>(1u << j);
      if (w[i] * out.t[i] < w[kSignGroup * k + cheapest] * out.t[kSignGroup * k + cheapest]) cheapest = j;
    }
    if (f.parity && std::popcount(negative) % 2 != 0) {
      negative ^= static_cast<uint8_t>(1u << cheapest);
      out.t[kSignGroup * k + cheapest] = -out.t[kSignGroup * k + cheapest];
    }
    signs[k] = negative;
  }
}

// For each point k of a group and each grid point p, b = sum w t p and
// c = sum w p^2 over the point's values: the weighted error of p at scale s
// is then sum w t^2 - 2 s b + s^2 c, so trying a scale costs two operations
// a grid point instead of a pass over its values.
struct PointSums {
  std::vector<float> b, c;  // [k * n_points + p]
};

void tabulate(const GridFormat& f, const Targets& g, PointSums& sums) {
  const int n_points_in_group = f.scale_group / f.point_size;
  sums.b.resize(static_cast<size_t>(n_points_in_group) * f.n_points);
  sums.c.resize(sums.b.size());
  for (int k = 0; k < n_points_in_group; ++k) {
    const float* t = g.t + f.point_size * k;
    const float* w = g.w + f.point_size * k;
    for (int p = 0; p < f.n_points; ++p) {
      const float* level = &f.levels[static_cast<size_t>(p) * f.point_size];
      float b = 0, c = 0;
      for (int j = 0; j < f.point_size; ++j) {
        b += w[j] * t[j] * level[j];
        c += w[j] * level[j] * level[j];
      }
      sums.b[static_cast<size_t>(k) * f.n_points + p] = b;
      sums.c[static_cast<size_t>(k) * f.n_points + p] = c;
    }
  }
}

struct GroupFit {
  uint16_t point[kMaxGroup / 4] = {};
  float scale = 0;    // least-squares scale for these points
  double score = -1;  // (sum w t p)^2 / sum w p^2: larger is a smaller error
};

// Each point's grid point of least weighted error at trial_scale (> 0),
// then the least-squares scale for them.
GroupFit fit_points(const GridFormat& f, const PointSums& sums, float trial_scale) {
  GroupFit fit;
  double sum_tp = 0, sum_pp = 0;
  for (int k = 0; k < f.scale_group / f.point_size; ++k) {
    const float* b = &sums.b[static_cast<size_t>(k) * f.n_points];
    const float* c = &sums.c[static_cast<size_t>(k) * f.n_points];
    int best = 0;
    float best_cost = INFINITY;  // (s^2 c - 2 s b) / s
    for (int p = 0; p < f.n_points; ++p) {
      const float cost = trial_scale * c[p] - 2 * b[p];
      if (cost < best_cost) {
        best_cost = cost;
        best = p;
      }
    }
    fit.point[k] = static_cast<uint16_t>(best);
    sum_tp += b[best];
    sum_pp += c[best];
  }
  if (sum_pp > 0) {
    fit.scale = static_cast<float>(sum_tp / sum_pp);
    fit.score = sum_tp * sum_tp / sum_pp;
  }
  return fit;
}

GroupFit fit_group(const GridFormat& f, const Targets& g, const PointSums& sums) {
  float largest = 0;
  for (int i = 0; i < f.scale_group; ++i) largest = std::fmax(largest, g.t[i]);
  GroupFit best;
  if (!(largest > 0) || !std::isfinite(largest)) return best;
  for (int step = 0; step <= 14; ++step) {
    const GroupFit fit = fit_points(f, sums, largest / (f.largest * (0.45f + 0.05f * static_cast<float>(step))));
    if (fit.score > best.score) best = fit;
  }
  if (!(best.scale > 0)) return best;
  const GroupFit refined = fit_points(f, sums, best.scale);
  return refined.score > best.score ? refined : best;
}

void search_block(const GridFormat& f, const float* x, const float* importance, GridBlock& out) {
  float w[kSuperBlock];
  importance_weights(x, kSuperBlock, w);
  if (importance != nullptr)
    for (int i = 0; i < kSuperBlock; ++i) w[i] *= importance[i];

  const int n_groups = kSuperBlock / f.scale_group;
  const int points_per_group = f.scale_group / f.point_size;
  Targets targets[kSuperBlock / 16];
  PointSums sums[kSuperBlock / 16];
  GroupFit fits[kSuperBlock / 16];
  float largest_scale = 0;
  for (int g = 0; g < n_groups; ++g) {
    const int first = g * f.scale_group;
    make_targets(f, x + first, w + first, targets[g], out.signs + first / kSignGroup);
    tabulate(f, targets[g], sums[g]);
    fits[g] = fit_group(f, targets[g], sums[g]);
    largest_scale = std::fmax(largest_scale, fits[g].scale);
  }
  out.d = encode_scale(largest_scale / (31.0f * f.factor));
  const float d = half_to_float(out.d);
  if (!(d > 0) || !std::isfinite(d)) {  // all zero (or not finite): a zero block
    out = GridBlock{};
    return;
  }
  for (int g = 0; g < n_groups; ++g) {
    out.scale[g] = quantize_clamped((fits[g].scale / (d * f.factor) - 1.0f) / 2.0f, 0, 15);
    const GroupFit stored = fit_points(f, sums[g], d * f.factor * static_cast<float>(2 * out.scale[g] + 1));
    std::copy(stored.point, stored.point + points_per_group, out.point + g * points_per_group);
  }
}

// Calls pack(fit, block b) for each super-block of the row.
template <typename Block, typename Pack>
void quantize_blocks(const GridFormat& f, const float* src, void* dst, int64_t n, const float* importance, Pack pack) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    GridBlock fit;
    search_block(f, src + b * kSuperBlock, importance ? importance + b * kSuperBlock : nullptr, fit);
    std::memset(&blocks[b], 0, sizeof(Block));
    pack(fit, blocks[b]);
  }
}

// Four 7-bit sign fields, then the scale in bits 28..31 (IQ2_XXS, IQ3_XXS).
uint32_t signs_and_scale(const GridBlock& fit, int g) {
  uint32_t word = static_cast<uint32_t>(fit.scale[g]) << 28;
  for (int l = 0; l < 4; ++l) word |= static_cast<uint32_t>(fit.signs[4 * g + l] & 127) << (7 * l);
  return word;
}

}  // namespace

void quantize_iq2_xxs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ2_XXS>(iq2_xxs(), src, dst, n, importance, [](const GridBlock& fit, BlockIQ2_XXS& out) {
    out.d = fit.d;
    for (int g = 0; g < kSuperBlock / 32; ++g) {
      for (int l = 0; l < 4; ++l) out.qs[8 * g + l] = static_cast<uint8_t>(fit.point[4 * g + l]);
      const uint32_t word = signs_and_scale(fit, g);
      std::memcpy(out.qs + 8 * g + 4, &word, sizeof word);
    }
  });
}

void quantize_iq2_xs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ2_XS>(iq2_xs(), src, dst, n, importance, [](const GridBlock& fit, BlockIQ2_XS& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 8; ++p)
      out.qs[p] = static_cast<uint16_t>(fit.point[p] | ((fit.signs[p] & 127) << 9));
    for (int g = 0; g < kSuperBlock / 32; ++g)
      out.scales[g] = static_cast<uint8_t>(fit.scale[2 * g] | (fit.scale[2 * g + 1] << 4));
  });
}

void quantize_iq3_xxs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ3_XXS>(iq3_xxs(), src, dst, n, importance, [](const GridBlock& fit, BlockIQ3_XXS& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 4; ++p) out.qs[p] = static_cast<uint8_t>(fit.point[p]);
    for (int g = 0; g < kSuperBlock / 32; ++g) {
      const uint32_t word = signs_and_scale(fit, g);
      std::memcpy(out.qs + kSuperBlock / 4 + 4 * g, &word, sizeof word);
    }
  });
}

void quantize_iq3_s(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ3_S>(iq3_s(), src, dst, n, importance, [](const GridBlock& fit, BlockIQ3_S& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 4; ++p) {
      out.qs[p] = static_cast<uint8_t>(fit.point[p] & 255);
      out.qh[p / 8] |= static_cast<uint8_t>((fit.point[p] >> 8) << (p % 8));
    }
    std::copy(fit.signs, fit.signs + kSuperBlock / 8, out.signs);
    for (int g = 0; g < kSuperBlock / 32; ++g) out.scales[g / 2] |= static_cast<uint8_t>(fit.scale[g] << (4 * (g % 2)));
  });
}

}  // namespace revis::quant
