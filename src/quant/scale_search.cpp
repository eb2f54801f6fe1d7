// Least-squares scale fitting for the K-quant quantizers (see scale_search.h).
//
// The group fits try a small fan of candidate grids around the naive
// "largest value hits the last level" grid; for each grid the best scale
// (and offset) given the rounded integers has a closed form, so each
// candidate costs one pass. The super-block fits then quantize the group
// scales themselves against the stored super-block half, try its nearest
// neighbouring halves, and finally re-fit the super-block halves by least
// squares with every integer held fixed, which recovers most of what
// rounding the group scales lost.
#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/kernels.h"

namespace revis::quant {
namespace {

// Candidate grids put the extreme value at reach +- kFanSteps * kFanStep
// levels. Doubling the fan's width or density lowers the error by at most
// about 1% (relative) on Gaussian data, at twice the time.
constexpr int kFanSteps = 10;
constexpr float kFanStep = 0.1f;

void decode_affine(const AffineSuperBlock& b, int group, float& scale, float& offset) {
  scale = half_to_float(b.d_bits) * static_cast<float>(b.sc[group]);
  offset = half_to_float(b.dmin_bits) * static_cast<float>(b.m[group]);
}

// Rounds every value to the grid its group's decoded scale and offset give.
void requantize_affine(const float* x, int n_groups, int group_size, int q_max, AffineSuperBlock& b) {
  for (int g = 0; g < n_groups; ++g) {
    float scale, offset;
    decode_affine(b, g, scale, offset);
    const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    for (int i = g * group_size; i < (g + 1) * group_size; ++i)
      b.q[i] = static_cast<uint8_t>(quantize_clamped((x[i] + offset) * inverse, 0, q_max));
  }
}

double affine_error(const float* x, const float* w, int n_groups, int group_size, const AffineSuperBlock& b) {
  double error = 0;
  for (int g = 0; g < n_groups; ++g) {
    float scale, offset;
    decode_affine(b, g, scale, offset);
    for (int i = g * group_size; i < (g + 1) * group_size; ++i) {
      const double diff = static_cast<double>(scale * b.q[i] - offset) - x[i];
      error += w[i] * diff * diff;
    }
  }
  return error;
}

void requantize_symmetric(const float* x, int n_groups, int group_size, int q_low, int q_high,
                          SymmetricSuperBlock& b) {
  const float d = half_to_float(b.d_bits);
  for (int g = 0; g < n_groups; ++g) {
    const float scale = d * static_cast<float>(b.sc[g]);
    const float inverse = scale != 0 ? 1.0f / scale : 0.0f;
    for (int i = g * group_size; i < (g + 1) * group_size; ++i)
      b.q[i] = static_cast<int8_t>(quantize_clamped(x[i] * inverse, q_low, q_high));
  }
}

double symmetric_error(const float* x, const float* w, int n_groups, int group_size,
                       const SymmetricSuperBlock& b) {
  const float d = half_to_float(b.d_bits);
  double error = 0;
  for (int g = 0; g < n_groups; ++g) {
    const float scale = d * static_cast<float>(b.sc[g]);
    for (int i = g * group_size; i < (g + 1) * group_size; ++i) {
      const double diff = static_cast<double>(scale * b.q[i]) - x[i];
      error += w[i] * diff * diff;
    }
  }
  return error;
}

}  // namespace

void importance_weights(const float* x, int n, float* w) {
  double sum_squares = 0;
  for (int i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float rms = static_cast<float>(std::sqrt(sum_squares / n));
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

void weighted_importance(const float* x, const float* importance, int n, float* w) {
  importance_weights(x, n, w);
  if (importance != nullptr)
    for (int i = 0; i < n; ++i) w[i] *= importance[i];
}

float fit_symmetric(const float* x, const float* w, int n, int q_low, int q_high, int8_t* q) {
  float extreme = 0;  // the value of largest magnitude, with its sign
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
  std::fill(q, q + n, int8_t{0});
  if (!(std::fabs(extreme) > 0) || !std::isfinite(extreme)) return 0;

  // The grids are asymmetric (-4..3, -32..31), so try the extreme value on
  // either end: on the long end it gains a level, but the short end may
  // suit the rest of the group better.
  int8_t trial[256];
  double best_score = 0;
  float best_scale = 0;
  for (int end = 0; end < 2; ++end) {
    const float reach = end == 0 ? static_cast<float>(-q_low) : static_cast<float>(q_high);
    const float direction = end == 0 ? -1.0f : 1.0f;
    for (int step = -kFanSteps; step <= kFanSteps; ++step) {
      const float target = reach + kFanStep * static_cast<float>(step);
      if (target < 0.5f) continue;
      const float inverse = direction * target / extreme;
      double sum_xq = 0, sum_qq = 0;
      for (int i = 0; i < n; ++i) {
        const int level = quantize_clamped(inverse * x[i], q_low, q_high);
        trial[i] = static_cast<int8_t>(level);
        sum_xq += static_cast<double>(w[i]) * x[i] * level;
        sum_qq += static_cast<double>(w[i]) * level * level;
      }
      if (!(sum_qq > 0)) continue;
      // With the integers fixed the best scale is sum_xq / sum_qq, and the
      // error left is sum w x^2 - sum_xq^2 / sum_qq: maximise the latter term.
      const double score = sum_xq * sum_xq / sum_qq;
      if (score > best_score) {
        best_score = score;
        best_scale = static_cast<float>(sum_xq / sum_qq);
        std::copy(trial, trial + n, q);
      }
    }
  }
  return best_scale;
}

AffineFit fit_affine(const float* x, const float* w, int n, int q_max, uint8_t* q) {
  float low = 0, high = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    low = std::fmin(low, x[i]);
    high = std::fmax(high, x[i]);
  }
  std::fill(q, q + n, uint8_t{0});
  const float range = high - low;
  if (!(range > 0) || !std::isfinite(range)) return {0, std::isfinite(low) ? -low : 0};

  auto error_of = [&](const uint8_t* levels, double scale, double offset) {
    double error = 0;
    for (int i = 0; i < n; ++i) {
      const double diff = scale * levels[i] - offset - x[i];
      error += w[i] * diff * diff;
    }
    return error;
  };

  // Start from the plain min/max grid, then look for a better-fitting one.
  AffineFit best{range / static_cast<float>(q_max), -low};
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(quantize_clamped((x[i] - low) / best.scale, 0, q_max));
  double best_error = error_of(q, best.scale, best.offset);

  uint8_t trial[256];
  for (int step = -kFanSteps; step <= kFanSteps; ++step) {
    const float inverse = (static_cast<float>(q_max) + kFanStep * static_cast<float>(step)) / range;
    double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
      const int level = quantize_clamped(inverse * (x[i] - low), 0, q_max);
      trial[i] = static_cast<uint8_t>(level);
      const double wi = w[i];
      sw += wi;
      sq += wi * level;
      sqq += wi * level * level;
      sx += wi * x[i];
      sxq += wi * x[i] * level;
    }
    // Least squares for x ~= scale * q + shift with the integers fixed.
    const double det = sw * sqq - sq * sq;
    if (!(det > 0)) continue;
    double scale = (sw * sxq - sq * sx) / det;
    double shift = (sqq * sx - sq * sxq) / det;
    if (shift > 0) {  // the format cannot shift upwards: pin it at zero
      shift = 0;
      scale = sxq / sqq;
    }
    if (!(scale > 0)) continue;
    const double error = error_of(trial, scale, -shift);
    if (error < best_error) {
      best_error = error;
      best = {static_cast<float>(scale), static_cast<float>(-shift)};
      std::copy(trial, trial + n, q);
    }
  }
  return best;
}

void fit_affine_superblock(const float* x, const float* importance, int n_groups, int group_size, int q_max,
                           int sc_max, AffineSuperBlock& out) {
  const int n = n_groups * group_size;
  float w[256];
  float scales[16], offsets[16];
  float max_scale = 0, max_offset = 0;
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group_size;
    weighted_importance(xg, importance ? importance + g * group_size : nullptr, group_size, w + g * group_size);
    const AffineFit fit = fit_affine(xg, w + g * group_size, group_size, q_max, out.q + g * group_size);
    scales[g] = fit.scale;
    offsets[g] = fit.offset;
    max_scale = std::fmax(max_scale, fit.scale);
    max_offset = std::fmax(max_offset, fit.offset);
  }

  // Rounds the group scales and minimums to integers against the stored
  // super-block halves, then the values to the resulting grid.
  auto assign = [&](AffineSuperBlock& b) {
    const float d = half_to_float(b.d_bits);
    const float dmin = half_to_float(b.dmin_bits);
    for (int g = 0; g < n_groups; ++g) {
      b.sc[g] = static_cast<uint8_t>(d > 0 ? quantize_clamped(scales[g] / d, 0, sc_max) : 0);
      b.m[g] = static_cast<uint8_t>(dmin > 0 ? quantize_clamped(offsets[g] / dmin, 0, sc_max) : 0);
    }
    requantize_affine(x, n_groups, group_size, q_max, b);
    return affine_error(x, w, n_groups, group_size, b);
  };
  out.d_bits = encode_scale(max_scale / static_cast<float>(sc_max));
  out.dmin_bits = encode_scale(max_offset / static_cast<float>(sc_max));
  double error = assign(out);
  for (uint16_t AffineSuperBlock::*field : {&AffineSuperBlock::d_bits, &AffineSuperBlock::dmin_bits}) {
    const uint16_t centre = out.*field;
    for (int step : kNeighbourSteps) {
      AffineSuperBlock candidate = out;
      candidate.*field = neighbour_half(centre, step);
      if (candidate.*field == centre) continue;
      const double candidate_error = assign(candidate);
      if (candidate_error < error) {
        out = candidate;
        error = candidate_error;
      }
    }
  }

  // With sc, m and q fixed, x ~= d * (sc q) - dmin * m is linear in (d, dmin):
  // solve the 2x2 normal equations, re-round q to the new grid, keep it if
  // it helped.
  for (int round = 0; round < 2; ++round) {
    double saa = 0, sab = 0, sbb = 0, sxa = 0, sxb = 0;
    for (int i = 0; i < n; ++i) {
      const int g = i / group_size;
      const double a = static_cast<double>(out.sc[g]) * out.q[i];
      const double b = out.m[g];
      saa += w[i] * a * a;
      sab += w[i] * a * b;
      sbb += w[i] * b * b;
      sxa += w[i] * x[i] * a;
      sxb += w[i] * x[i] * b;
    }
    double new_d, new_dmin;
    if (sbb > 0) {
      const double det = sab * sab - saa * sbb;
      if (det == 0) break;
      new_d = (sab * sxb - sbb * sxa) / det;
      new_dmin = (saa * sxb - sab * sxa) / det;
    } else {
      if (!(saa > 0)) break;
      new_d = sxa / saa;
      new_dmin = half_to_float(out.dmin_bits);
    }
    if (!(new_d > 0) || !(new_dmin >= 0)) break;
    AffineSuperBlock candidate = out;
    candidate.d_bits = encode_scale(static_cast<float>(new_d));
    candidate.dmin_bits = encode_scale(static_cast<float>(new_dmin));
    requantize_affine(x, n_groups, group_size, q_max, candidate);
    const double candidate_error = affine_error(x, w, n_groups, group_size, candidate);
    if (!(candidate_error < error)) break;
    out = candidate;
    error = candidate_error;
  }
}

void fit_symmetric_superblock(const float* x, const float* importance, int n_groups, int group_size, int q_low,
                              int q_high, int sc_low, int sc_high, SymmetricSuperBlock& out) {
  const int n = n_groups * group_size;
  float w[256];
  float scales[16];
  float extreme = 0;  // group scale of largest magnitude, with its sign
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group_size;
    weighted_importance(xg, importance ? importance + g * group_size : nullptr, group_size, w + g * group_size);
    scales[g] = fit_symmetric(xg, w + g * group_size, group_size, q_low, q_high, out.q + g * group_size);
    if (std::fabs(scales[g]) > std::fabs(extreme)) extreme = scales[g];
  }
  out.d_bits = 0;
  std::fill(out.sc, out.sc + 16, int8_t{0});
  std::fill(out.q, out.q + n, int8_t{0});
  if (extreme == 0) return;

  auto assign = [&](SymmetricSuperBlock& b) {
    const float d = half_to_float(b.d_bits);
    for (int g = 0; g < n_groups; ++g)
      b.sc[g] = static_cast<int8_t>(d != 0 ? quantize_clamped(scales[g] / d, sc_low, sc_high) : 0);
    requantize_symmetric(x, n_groups, group_size, q_low, q_high, b);
    return symmetric_error(x, w, n_groups, group_size, b);
  };
  // The extreme group scale takes the long end of the signed scale range.
  const float long_end = static_cast<float>(-sc_low >= sc_high ? sc_low : sc_high);
  out.d_bits = encode_scale(extreme / long_end);
  double error = assign(out);
  const uint16_t centre = out.d_bits;
  for (int step : kNeighbourSteps) {
    SymmetricSuperBlock candidate = out;
    candidate.d_bits = neighbour_half(centre, step);
    if (candidate.d_bits == centre) continue;
    const double candidate_error = assign(candidate);
    if (candidate_error < error) {
      out = candidate;
      error = candidate_error;
    }
  }

  // With sc and q fixed the best d is a one-variable least-squares fit.
  for (int round = 0; round < 2; ++round) {
    double saa = 0, sxa = 0;
    for (int i = 0; i < n; ++i) {
      const double a = static_cast<double>(out.sc[i / group_size]) * out.q[i];
      saa += w[i] * a * a;
      sxa += w[i] * x[i] * a;
    }
    if (!(saa > 0)) break;
    SymmetricSuperBlock candidate = out;
    candidate.d_bits = encode_scale(static_cast<float>(sxa / saa));
    requantize_symmetric(x, n_groups, group_size, q_low, q_high, candidate);
    const double candidate_error = symmetric_error(x, w, n_groups, group_size, candidate);
    if (!(candidate_error < error)) break;
    out = candidate;
    error = candidate_error;
  }
}

}  // namespace revis::quant
