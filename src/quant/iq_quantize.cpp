// Quantizing to the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S and IQ1_M (blocks.h): per 8 (IQ2) or 4 (IQ3) values one point of
// the format's grid, per 8 values their signs (7 free plus parity for
// IQ2_XXS, IQ2_XS and IQ3_XXS, all 8 for IQ2_S and IQ3_S), per 32 (IQ2_XS,
// IQ2_S: 16) values an odd 4-bit scale, and one half d per 256:
// x = d * (2s + 1) * kFactor * point * sign. IQ1's grid points are signed
// (-1, 0, 1) and carry no signs; each point is shifted by a delta of +-1/8,
// one per 32 values in IQ1_S, per point in IQ1_M, and the odd scales have
// 3 bits, per 32 (IQ1_S) or 16 (IQ1_M) values: x = d * (2s + 1) *
// (point + delta).
//
// One search serves the seven formats; only the grid, the scale group, the
// sign rule and the bit packing differ. IQ1_M's grid is taken as 4096
// points, each of the 2048 with either delta; IQ1_S's group-wide delta is
// searched by fitting each group once per delta and keeping the better.
// Each value's squared error is weighed by w_i = importance_i * (rms +
// |x_i|), importance_i being the importance matrix's mean squared
// activation of input channel i (1 where none is given): at three bits and
// less most values are far off, and only the channels the activations
// drive hard can be kept close.
//  1. Signs: each value's own, except that under the parity rule a group
//     of 8 with an odd count of negatives flips the value whose flip costs
//     least (smallest w_i |x_i|), which then aims at minus its magnitude.
//     (IQ1: none; the points aim at the values themselves.)
//  2. Scale: for a fan of trial scales (the group's largest magnitude over
//     0.45..1.15 times the grid's largest value), each point takes the grid
//     point of least weighted error at that scale, then the group's scale
//     is refitted by least squares; the trial with the least error wins,
//     and its points are re-picked once at the refitted scale.
//  3. The super-block: d puts the largest group scale at the top odd
//     scale (31, IQ1: 15); each group's scale is rounded to an odd
//     multiple of d * kFactor and its points re-picked for the stored
//     scale.
// Each point search tries every grid point, with the sums over its values
// taken once per group (tabulate): about 10^3 operations a value for the
// 512-point grids.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/kernels.h"
#include "quant/scale_search.h"

namespace revis::quant {
namespace {

constexpr int kSignGroup = 8;   // values under one sign byte
constexpr int kMaxGroup = 32;   // values under one 4-bit scale, at most

enum class Signs { kParity, kFree, kNone };

struct GridFormat {
  std::vector<float> levels;  // n_points x point_size grid values
  int n_points = 0;
  int point_size = 8;   // 8 or 4
  int scale_group = 32; // 32 or 16
  Signs signs = Signs::kParity;  // kParity: the eighth sign of each 8 follows from the other seven
  float factor = 1;     // kFactor
  int scale_max = 15;   // the largest stored scale s (4 or 3 bits)
  float largest = 0;    // the grid's largest magnitude
};

// The grid's points as levels; IQ1's (signed bytes) each shifted by every
// delta in turn: point p + k * N is point p with deltas[k].
template <typename Word, size_t N>
GridFormat make_format(const std::array<Word, N>& grid, int point_size, int scale_group, Signs signs, float factor,
                       int scale_max = 15, std::initializer_list<float> deltas = {0.0f}) {
  GridFormat f{{}, static_cast<int>(N * deltas.size()), point_size, scale_group, signs, factor, scale_max, 0};
  for (float delta : deltas)
    for (Word point : grid)
      for (int k = 0; k < point_size; ++k) {
        const uint8_t value = grid_value(point, k);
        f.levels.push_back((signs == Signs::kNone ? static_cast<float>(static_cast<int8_t>(value))
                                                  : static_cast<float>(value)) + delta);
        f.largest = std::max(f.largest, std::fabs(f.levels.back()));
      }
  return f;
}

constexpr float kIq1Delta = 0.125f;

const GridFormat& iq2_xxs() { static const GridFormat f = make_format(kGridIq2Xxs, 8, 32, Signs::kParity, 0.125f); return f; }
const GridFormat& iq2_xs() { static const GridFormat f = make_format(kGridIq2Xs, 8, 16, Signs::kParity, 0.125f); return f; }
const GridFormat& iq2_s() { static const GridFormat f = make_format(kGridIq2S, 8, 16, Signs::kFree, 0.125f); return f; }
const GridFormat& iq3_xxs() { static const GridFormat f = make_format(kGridIq3Xxs, 4, 32, Signs::kParity, 0.25f); return f; }
const GridFormat& iq3_s() { static const GridFormat f = make_format(kGridIq3S, 4, 32, Signs::kFree, 1.0f); return f; }
// IQ1_S: one format per delta; IQ1_M: both deltas in one grid.
const GridFormat& iq1_s(bool negative_delta) {
  static const GridFormat plus = make_format(kGridIq1S, 8, 32, Signs::kNone, 1.0f, 7, {kIq1Delta});
  static const GridFormat minus = make_format(kGridIq1S, 8, 32, Signs::kNone, 1.0f, 7, {-kIq1Delta});
  return negative_delta ? minus : plus;
}
const GridFormat& iq1_m() {
  static const GridFormat f = make_format(kGridIq1S, 8, 16, Signs::kNone, 1.0f, 7, {kIq1Delta, -kIq1Delta});
  return f;
}

// One super-block as the search leaves it, before packing.
struct GridBlock {
  uint16_t d = 0;
  int scale[kSuperBlock / 16] = {};       // per scale group, 0..scale_max
  int variant[kSuperBlock / 16] = {};     // per scale group, which of the formats searched (IQ1_S: the delta)
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
  if (f.signs == Signs::kNone) {
    std::copy(x, x + f.scale_group, out.t);
    std::copy(w, w + f.scale_group, out.w);
    return;
  }
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
    if (f.signs == Signs::kParity && std::popcount(negative) % 2 != 0) {
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
  if (sum_pp > 0 && sum_tp > 0) {
    fit.scale = static_cast<float>(sum_tp / sum_pp);
    fit.score = sum_tp * sum_tp / sum_pp;
  }
  return fit;
}

GroupFit fit_group(const GridFormat& f, const Targets& g, const PointSums& sums) {
  float largest = 0;
  for (int i = 0; i < f.scale_group; ++i) largest = std::fmax(largest, std::fabs(g.t[i]));
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

// `formats`: the alternatives each scale group may take (IQ1_S: one per
// delta; otherwise one), alike but for their levels.
void search_block(std::span<const GridFormat* const> formats, const float* x, const float* importance,
                  GridBlock& out) {
  const GridFormat& f = *formats[0];
  float w[kSuperBlock];
  importance_weights(x, kSuperBlock, w);
  if (importance != nullptr)
    for (int i = 0; i < kSuperBlock; ++i) w[i] *= importance[i];

  const int n_groups = kSuperBlock / f.scale_group;
  const int points_per_group = f.scale_group / f.point_size;
  Targets targets[kSuperBlock / 16];
  std::vector<PointSums> sums(formats.size() * n_groups);  // [variant * n_groups + g]
  GroupFit fits[kSuperBlock / 16];
  float largest_scale = 0;
  for (int g = 0; g < n_groups; ++g) {
    const int first = g * f.scale_group;
    make_targets(f, x + first, w + first, targets[g], out.signs + first / kSignGroup);
    for (size_t v = 0; v < formats.size(); ++v) {
      PointSums& variant_sums = sums[v * n_groups + g];
      tabulate(*formats[v], targets[g], variant_sums);
      const GroupFit fit = fit_group(*formats[v], targets[g], variant_sums);
      if (v == 0 || fit.score > fits[g].score) {
        fits[g] = fit;
        out.variant[g] = static_cast<int>(v);
      }
    }
    largest_scale = std::fmax(largest_scale, fits[g].scale);
  }
  out.d = encode_scale(largest_scale / (static_cast<float>(2 * f.scale_max + 1) * f.factor));
  const float d = half_to_float(out.d);
  if (!(d > 0) || !std::isfinite(d)) {  // all zero (or not finite): a zero block
    out = GridBlock{};
    return;
  }
  for (int g = 0; g < n_groups; ++g) {
    out.scale[g] = quantize_clamped((fits[g].scale / (d * f.factor) - 1.0f) / 2.0f, 0, f.scale_max);
    const size_t v = static_cast<size_t>(out.variant[g]);
    const GroupFit stored =
        fit_points(*formats[v], sums[v * n_groups + g], d * f.factor * static_cast<float>(2 * out.scale[g] + 1));
    std::copy(stored.point, stored.point + points_per_group, out.point + g * points_per_group);
  }
}

// Calls pack(fit, block b) for each super-block of the row.
template <typename Block, typename Pack>
void quantize_blocks(std::span<const GridFormat* const> formats, const float* src, void* dst, int64_t n,
                     const float* importance, Pack pack) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    GridBlock fit;
    search_block(formats, src + b * kSuperBlock, importance ? importance + b * kSuperBlock : nullptr, fit);
    std::memset(&blocks[b], 0, sizeof(Block));
    pack(fit, blocks[b]);
  }
}

std::array<const GridFormat*, 1> only(const GridFormat& f) { return {&f}; }

// Four 7-bit sign fields, then the scale in bits 28..31 (IQ2_XXS, IQ3_XXS).
uint32_t signs_and_scale(const GridBlock& fit, int g) {
  uint32_t word = static_cast<uint32_t>(fit.scale[g]) << 28;
  for (int l = 0; l < 4; ++l) word |= static_cast<uint32_t>(fit.signs[4 * g + l] & 127) << (7 * l);
  return word;
}

}  // namespace

void quantize_iq2_xxs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ2_XXS>(only(iq2_xxs()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ2_XXS& out) {
    out.d = fit.d;
    for (int g = 0; g < kSuperBlock / 32; ++g) {
      for (int l = 0; l < 4; ++l) out.qs[8 * g + l] = static_cast<uint8_t>(fit.point[4 * g + l]);
      const uint32_t word = signs_and_scale(fit, g);
      std::memcpy(out.qs + 8 * g + 4, &word, sizeof word);
    }
  });
}

void quantize_iq2_xs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ2_XS>(only(iq2_xs()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ2_XS& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 8; ++p)
      out.qs[p] = static_cast<uint16_t>(fit.point[p] | ((fit.signs[p] & 127) << 9));
    for (int g = 0; g < kSuperBlock / 32; ++g)
      out.scales[g] = static_cast<uint8_t>(fit.scale[2 * g] | (fit.scale[2 * g + 1] << 4));
  });
}

void quantize_iq3_xxs(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ3_XXS>(only(iq3_xxs()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ3_XXS& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 4; ++p) out.qs[p] = static_cast<uint8_t>(fit.point[p]);
    for (int g = 0; g < kSuperBlock / 32; ++g) {
      const uint32_t word = signs_and_scale(fit, g);
      std::memcpy(out.qs + kSuperBlock / 4 + 4 * g, &word, sizeof word);
    }
  });
}

void quantize_iq3_s(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ3_S>(only(iq3_s()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ3_S& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 4; ++p) {
      out.qs[p] = static_cast<uint8_t>(fit.point[p] & 255);
      out.qh[p / 8] |= static_cast<uint8_t>((fit.point[p] >> 8) << (p % 8));
    }
    std::copy(fit.signs, fit.signs + kSuperBlock / 8, out.signs);
    for (int g = 0; g < kSuperBlock / 32; ++g) out.scales[g / 2] |= static_cast<uint8_t>(fit.scale[g] << (4 * (g % 2)));
  });
}

void quantize_iq2_s(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ2_S>(only(iq2_s()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ2_S& out) {
    out.d = fit.d;
    for (int p = 0; p < kSuperBlock / 8; ++p) {
      out.qs[p] = static_cast<uint8_t>(fit.point[p] & 255);
      out.qh[p / 4] |= static_cast<uint8_t>((fit.point[p] >> 8) << (2 * (p % 4)));
      out.qs[kSuperBlock / 8 + p] = fit.signs[p];
    }
    for (int g = 0; g < kSuperBlock / 32; ++g)
      out.scales[g] = static_cast<uint8_t>(fit.scale[2 * g] | (fit.scale[2 * g + 1] << 4));
  });
}

void quantize_iq1_s(const float* src, void* dst, int64_t n, const float* importance) {
  const std::array<const GridFormat*, 2> deltas = {&iq1_s(false), &iq1_s(true)};
  quantize_blocks<BlockIQ1_S>(deltas, src, dst, n, importance, [](const GridBlock& fit, BlockIQ1_S& out) {
    out.d = fit.d;
    for (int g = 0; g < kSuperBlock / 32; ++g) {
      unsigned high = static_cast<unsigned>(fit.scale[g]) << 12 | static_cast<unsigned>(fit.variant[g]) << 15;
      for (int l = 0; l < 4; ++l) {
        out.qs[4 * g + l] = static_cast<uint8_t>(fit.point[4 * g + l] & 255);
        high |= static_cast<unsigned>(fit.point[4 * g + l] >> 8) << (3 * l);
      }
      out.qh[g] = static_cast<uint16_t>(high);
    }
  });
}

void quantize_iq1_m(const float* src, void* dst, int64_t n, const float* importance) {
  quantize_blocks<BlockIQ1_M>(only(iq1_m()), src, dst, n, importance, [](const GridBlock& fit, BlockIQ1_M& out) {
    constexpr int kPoints = static_cast<int>(kGridIq1S.size());  // grid points past it have the negative delta
    uint16_t words[4] = {};
    for (int p = 0; p < kSuperBlock / 8; ++p) {
      const int index = fit.point[p] % kPoints;
      const int nibble = (index >> 8) | (fit.point[p] >= kPoints ? 8 : 0);
      out.qs[p] = static_cast<uint8_t>(index & 255);
      out.qh[p / 2] |= static_cast<uint8_t>(nibble << (4 * (p % 2)));
    }
    for (int g = 0; g < kSuperBlock / 32; ++g)
      words[g / 2] |= static_cast<uint16_t>((fit.scale[2 * g] | fit.scale[2 * g + 1] << 3) << (6 * (g % 2)));
    for (int w = 0; w < 4; ++w) {
      words[w] |= static_cast<uint16_t>(((fit.d >> (4 * w)) & 15) << 12);
      out.scales[2 * w] = static_cast<uint8_t>(words[w] & 255);
      out.scales[2 * w + 1] = static_cast<uint8_t>(words[w] >> 8);
    }
  });
}

}  // namespace revis::quant
