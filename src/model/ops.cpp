#include "model/ops.h"

#include <cmath>

#include "quant/quant.h"

// The attention loops (attention_scores, weighted_sum, axpy) are compiled
// twice on x86-64, for the baseline and for AVX2+FMA, and the loader picks
// one per CPU: the rest of the binary stays runnable on any x86-64. Each
// loop over positions is one call, so the per-position work is inlined.
#if defined(__x86_64__) && !defined(__clang__)
#define REVIS_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define REVIS_VECTOR_CLONES
#endif

namespace revis {

void rms_norm(float* out, const float* x, const float* weight, int n, float eps) {
  // Squares in float, summed in double, the mean back in float: the same
  // steps as llama.cpp, so that values rounded to float16 downstream (the KV
  // cache) round the same way as in the reference.
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void softmax(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add(float* out, const float* x, int n) {
  for (int i = 0; i < n; ++i) out[i] += x[i];
}

namespace {

// Eight independent partial sums: the compiler may keep them in one vector
// register without reordering any single sum, so it vectorises without
// -ffast-math. Inline, so that each caller's clone gets its own vector code.
inline float dot(const float* a, const float* b, int n) {
  float partial[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

}  // namespace

// The rounding runs through quant's float16 row kernels (F16C where the CPU
// has it), a stack-sized piece at a time.
void round_to_f16(float* x, int n) {
  constexpr int kPiece = 256;
  uint16_t halves[kPiece];
  for (int i = 0; i < n; i += kPiece) {
    const int m = n - i < kPiece ? n - i : kPiece;
    quantize_row(TensorType::F16, x + i, halves, m);
    dequantize_row(TensorType::F16, halves, x + i, m);
  }
}

REVIS_VECTOR_CLONES
void axpy(float* out, float scale, const float* x, int n) {
  for (int i = 0; i < n; ++i) out[i] += scale * x[i];
}

REVIS_VECTOR_CLONES
void attention_scores(const float* q, const float* keys, int n, int dim, float scale, float* scores) {
  for (int p = 0; p < n; ++p) scores[p] = dot(q, keys + static_cast<int64_t>(p) * dim, dim) * scale;
}

REVIS_VECTOR_CLONES
void weighted_sum(const float* weights, const float* rows, int n, int dim, float* out) {
  for (int i = 0; i < dim; ++i) out[i] = 0.0f;
  for (int p = 0; p < n; ++p) {
    const float* row = rows + static_cast<int64_t>(p) * dim;
    for (int i = 0; i < dim; ++i) out[i] += weights[p] * row[i];
  }
}

}  // namespace revis
