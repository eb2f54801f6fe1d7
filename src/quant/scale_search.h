// Error-minimising choice of block scales, shared by the quantizers of the
// K-quants: least-squares fits of a group of values onto an integer grid,
// and the two-level (super-block scale x small integer group scale) fits
// built on them.
//
// All fits minimise a weighted squared error sum w_i (x_i - x'_i)^2 with
// importance weights from importance_weights(), and accumulate in double so
// that inputs anywhere in float's range neither overflow nor lose the sums.
//
// Internal to src/quant.
#pragma once

#include <cstdint>

namespace revis::quant {

// w_i = rms(x) + |x_i|: errors on large weights move a matrix product's
// output most, so they count more, while the rms term keeps a group of small
// values from being given up entirely.
void importance_weights(const float* x, int n, float* w);

// x_i ~= scale * q_i with q_i in [q_low, q_high]; returns scale (its sign is
// free) and writes q. An all-zero group gives scale 0 and q = 0.
float fit_symmetric(const float* x, const float* w, int n, int q_low, int q_high, int8_t* q);

// x_i ~= scale * q_i - offset with q_i in [0, q_max], scale >= 0, offset >= 0
// (offset stands for minus the group's minimum, which formats with unsigned
// per-group minimums require to be <= 0).
struct AffineFit {
  float scale = 0;
  float offset = 0;
};
AffineFit fit_affine(const float* x, const float* w, int n, int q_max, uint8_t* q);

// The super-block fits weigh value i's error by importance_weights() times
// importance[i], the importance matrix's weight of its input channel (null:
// 1 for every value).
//
// A super-block of n_groups groups of group_size values each:
//   x ~= d * sc[g] * q - dmin * m[g]    with sc, m in [0, sc_max], q in [0, q_max]
// d and dmin are the stored halves and their decoded values.
struct AffineSuperBlock {
  uint16_t d_bits = 0, dmin_bits = 0;
  uint8_t sc[16] = {}, m[16] = {};
  uint8_t q[256] = {};
};
void fit_affine_superblock(const float* x, const float* importance, int n_groups, int group_size, int q_max,
                           int sc_max, AffineSuperBlock& out);

// x ~= d * sc[g] * q with sc in [sc_low, sc_high], q in [q_low, q_high].
struct SymmetricSuperBlock {
  uint16_t d_bits = 0;
  int8_t sc[16] = {};
  int8_t q[256] = {};
};
void fit_symmetric_superblock(const float* x, const float* importance, int n_groups, int group_size, int q_low,
                              int q_high, int sc_low, int sc_high, SymmetricSuperBlock& out);

// importance_weights(x, n, w) times importance[i] where importance is set.
void weighted_importance(const float* x, const float* importance, int n, float* w);

}  // namespace revis::quant
