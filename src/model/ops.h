// The elementwise and per-vector operations of a transformer block, in
// float32. Each is a plain function over contiguous arrays.
#pragma once

#include <cstdint>

namespace revis {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]   (out may alias x)
void rms_norm(float* out, const float* x, const float* weight, int n, float eps);

// In place: x[i] = exp(x[i] - max) / sum, over n values.
void softmax(float* x, int n);

// In place: gate[i] = silu(gate[i]) * up[i]  (the SwiGLU activation)
void swiglu(float* gate, const float* up, int n);

// out[i] += x[i]
void add(float* out, const float* x, int n);

// In place: x[i] = the nearest float16 value, as a float.
void round_to_f16(float* x, int n);

// out[i] += scale * x[i]
void axpy(float* out, float scale, const float* x, int n);

// scores[p] = scale * dot(q, keys[p]) for the n rows of `dim` floats in keys.
void attention_scores(const float* q, const float* keys, int n, int dim, float scale, float* scores);

// out += sum over p of weights[p] * rows[p], for n rows of `dim` floats.
void add_weighted_sum(const float* weights, const float* rows, int n, int dim, float* out);

}  // namespace revis
