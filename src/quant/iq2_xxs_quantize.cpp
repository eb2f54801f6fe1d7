// Quantizing to IQ2_XXS (blocks.h): per group of 32 values an odd 4-bit
// scale, and for each 8 values one of the 256 points of kGridIq2Xxs with 7
// free signs (the eighth keeps the count of minus signs even).
//
// The search, per group, weighs each value's squared error by
// w_i = importance_i * (rms + |x_i|), importance_i being the importance
// matrix's mean squared activation of input channel i: at two bits most
// values are far off, and only the channels the activations drive hard can
// be kept close.
//  1. Signs: each value's own, except that a sub-vector of 8 with an odd
//     count of negatives flips the value whose flip costs least (smallest
//     w_i |x_i|), which then aims at minus its magnitude.
//  2. Scale: for a fan of trial scales (the group's largest magnitude over
//     levels 20..48 of the grid's 8..43), each sub-vector takes the point
//     of least weighted error at that scale, then the group's scale is
//     refitted by least squares; the trial with the least error wins, and
//     its points are re-picked once at the refitted scale.
//  3. The super-block: d puts the largest group scale at the top odd scale
//     31/8; each group's scale is rounded to an odd multiple of d/8 and its
//     points re-picked for the stored scale.
// Each point search tries all 256 points: about 10^4 operations a value,
// minutes for the routed experts of a 30B model on one core.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/scale_search.h"

namespace revis::quant {
namespace {

constexpr int kGroup = 32;
constexpr int kSub = 8;

// One group's targets in the magnitude domain: t_i = |x_i|, or -|x_i| for
// the value whose sign was flipped for parity; negative[k] the sign byte of
// sub-vector k.
struct Targets {
  float t[kGroup];
  float w[kGroup];
  uint8_t negative[kGroup / kSub];
};

void make_targets(const float* x, const float* w, Targets& out) {
  for (int k = 0; k < kGroup / kSub; ++k) {
    uint8_t signs = 0;
    int cheapest = 0;
    for (int j = 0; j < kSub; ++j) {
      const int i = kSub * k + j;
      out.t[i] = std::fabs(x[i]);
      out.w[i] = w[i];
      if (x[i] < 0) signs |= static_cast<uint8_t>(1u << j);
      if (w[i] * out.t[i] < w[kSub * k + cheapest] * out.t[kSub * k + cheapest]) cheapest = j;
    }
    if (std::popcount(signs) % 2 != 0) {
      signs ^= static_cast<uint8_t>(1u << cheapest);
      out.t[kSub * k + cheapest] = -out.t[kSub * k + cheapest];
    }
    out.negative[k] = signs;
  }
}

// The point of least sum w (t - scale * p)^2 for one sub-vector.
int best_point(const float* t, const float* w, float scale) {
  int best = 0;
  float best_error = INFINITY;
  for (int p = 0; p < 256; ++p) {
    float error = 0;
    for (int j = 0; j < kSub; ++j) {
      const float diff = t[j] - scale * static_cast<float>(grid_value(kGridIq2Xxs[p], j));
      error += w[j] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      best = p;
    }
  }
  return best;
}

struct GroupFit {
  uint8_t point[kGroup / kSub] = {};
  float scale = 0;     // least-squares scale for these points
  double score = -1;   // (sum w t p)^2 / sum w p^2: larger is a smaller error
};

GroupFit fit_points(const Targets& g, float trial_scale) {
  GroupFit fit;
  double sum_tp = 0, sum_pp = 0;
  for (int k = 0; k < kGroup / kSub; ++k) {
    fit.point[k] = static_cast<uint8_t>(best_point(g.t + kSub * k, g.w + kSub * k, trial_scale));
    for (int j = 0; j < kSub; ++j) {
      const double p = grid_value(kGridIq2Xxs[fit.point[k]], j);
      sum_tp += g.w[kSub * k + j] * g.t[kSub * k + j] * p;
      sum_pp += g.w[kSub * k + j] * p * p;
    }
  }
  if (sum_pp > 0) {
    fit.scale = static_cast<float>(sum_tp / sum_pp);
    fit.score = sum_tp * sum_tp / sum_pp;
  }
  return fit;
}

GroupFit fit_group(const Targets& g) {
  float largest = 0;
  for (float t : g.t) largest = std::fmax(largest, t);
  GroupFit best;
  if (!(largest > 0) || !std::isfinite(largest)) return best;
  for (int level = 20; level <= 48; level += 2) {
    const GroupFit fit = fit_points(g, largest / static_cast<float>(level));
    if (fit.score > best.score) best = fit;
  }
  const GroupFit refined = fit_points(g, best.scale);
  return refined.score > best.score ? refined : best;
}

}  // namespace

void quantize_iq2_xxs(const float* src, void* dst, int64_t n, const float* importance) {
  auto* blocks = static_cast<BlockIQ2_XXS*>(dst);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* x = src + b * kSuperBlock;
    float w[kSuperBlock];
    importance_weights(x, kSuperBlock, w);
    for (int i = 0; i < kSuperBlock; ++i) w[i] *= importance[b * kSuperBlock + i];

    Targets targets[kSuperBlock / kGroup];
    GroupFit fits[kSuperBlock / kGroup];
    float largest_scale = 0;
    for (int g = 0; g < kSuperBlock / kGroup; ++g) {
      make_targets(x + kGroup * g, w + kGroup * g, targets[g]);
      fits[g] = fit_group(targets[g]);
      largest_scale = std::fmax(largest_scale, fits[g].scale);
    }

    BlockIQ2_XXS& out = blocks[b];
    std::memset(&out, 0, sizeof out);
    out.d = encode_scale(largest_scale * 8.0f / 31.0f);
    const float d = half_to_float(out.d);
    if (!(d > 0) || !std::isfinite(d)) continue;  // all zero (or not finite): a zero block
    for (int g = 0; g < kSuperBlock / kGroup; ++g) {
      const int s = quantize_clamped((fits[g].scale * 8.0f / d - 1.0f) / 2.0f, 0, 15);
      const GroupFit stored = fit_points(targets[g], d * static_cast<float>(2 * s + 1) / 8.0f);
      uint32_t word = static_cast<uint32_t>(s) << 28;
      for (int k = 0; k < kGroup / kSub; ++k) {
        out.qs[8 * g + k] = stored.point[k];
        word |= static_cast<uint32_t>(targets[g].negative[k] & 127) << (7 * k);
      }
      std::memcpy(out.qs + 8 * g + 4, &word, sizeof word);
    }
  }
}

}  // namespace revis::quant
