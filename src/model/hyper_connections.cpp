#include "model/hyper_connections.h"

#include <cmath>

namespace revis {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Divides each column (the entries of one src) by its sum plus eps.
void normalise_columns(float* comb, int n_hc, float eps) {
  for (int src = 0; src < n_hc; ++src) {
    float sum = eps;
    for (int dst = 0; dst < n_hc; ++dst) sum += comb[dst + n_hc * src];
    const float inv = 1.0f / sum;
    for (int dst = 0; dst < n_hc; ++dst) comb[dst + n_hc * src] *= inv;
  }
}

// Divides each row (the entries of one dst) by its sum plus eps.
void normalise_rows(float* comb, int n_hc, float eps) {
  for (int dst = 0; dst < n_hc; ++dst) {
    float sum = eps;
    for (int src = 0; src < n_hc; ++src) sum += comb[dst + n_hc * src];
    const float inv = 1.0f / sum;
    for (int src = 0; src < n_hc; ++src) comb[dst + n_hc * src] *= inv;
  }
}

}  // namespace

void rms_normalise(float* out, const float* x, int n, float eps) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
}

// Sinkhorn as the reference model takes it: a softmax over each column,
// plus eps, the rows normalised, then (iterations - 1) rounds of columns
// then rows.
void hyper_weights(const float* logits, const HyperMix& m, int n_hc, float eps, int iterations, float* pre,
                   float* post, float* comb) {
  for (int h = 0; h < n_hc; ++h) {
    pre[h] = sigmoid(logits[h] * m.scale[0] + m.base[h]) + eps;
    post[h] = 2.0f * sigmoid(logits[n_hc + h] * m.scale[1] + m.base[n_hc + h]);
  }
  const float* comb_logits = logits + 2 * n_hc;
  const float* comb_base = m.base.data() + 2 * n_hc;
  for (int src = 0; src < n_hc; ++src) {
    float* column = comb + n_hc * src;
    float max = -INFINITY;
    for (int dst = 0; dst < n_hc; ++dst) {
      column[dst] = comb_logits[dst + n_hc * src] * m.scale[2] + comb_base[dst + n_hc * src];
      max = std::fmax(max, column[dst]);
    }
    float sum = 0.0f;
    for (int dst = 0; dst < n_hc; ++dst) sum += column[dst] = std::exp(column[dst] - max);
    const float inv = 1.0f / sum;
    for (int dst = 0; dst < n_hc; ++dst) column[dst] = column[dst] * inv + eps;
  }
  normalise_rows(comb, n_hc, eps);
  for (int i = 1; i < iterations; ++i) {
    normalise_columns(comb, n_hc, eps);
    normalise_rows(comb, n_hc, eps);
  }
}

void hyper_head_weights(const float* logits, const HyperMix& m, int n_hc, float eps, float* pre) {
  for (int h = 0; h < n_hc; ++h) pre[h] = sigmoid(logits[h] * m.scale[0] + m.base[h]) + eps;
}

void hyper_read(const float* copies, const float* pre, int n_hc, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    float sum = 0.0f;
    for (int h = 0; h < n_hc; ++h) sum += copies[h * n + i] * pre[h];
    out[i] = sum;
  }
}

void hyper_write(const float* x, const float* copies, const float* post, const float* comb, int n_hc, int n,
                 float* out) {
  for (int dst = 0; dst < n_hc; ++dst)
    for (int i = 0; i < n; ++i) {
      float v = x[i] * post[dst];
      for (int src = 0; src < n_hc; ++src) v += copies[src * n + i] * comb[dst + n_hc * src];
      out[dst * n + i] = v;
    }
}

}  // namespace revis
