#include "model/ops.h"

#include <cmath>

#include "quant/quant.h"

// The attention loops (dot_f32, axpy) are compiled twice on x86-64, for the
// baseline and for AVX2+FMA, and the loader picks one per CPU: the rest of
// the binary stays runnable on any x86-64.
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

REVIS_VECTOR_CLONES
float dot_f32(const float* a, const float* b, int n) {
  // Eight independent partial sums: the compiler may keep them in one vector
  // register without reordering any single sum, so it vectorises without
  // -ffast-math.
  float partial[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

void round_to_f16(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

REVIS_VECTOR_CLONES
void axpy(float* out, float scale, const float* x, int n) {
  for (int i = 0; i < n; ++i) out[i] += scale * x[i];
}

}  // namespace revis
