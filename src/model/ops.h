// The elementwise and per-vector operations of a transformer block, in
// float32. Each is a plain function over contiguous arrays.
#pragma once

#include <cstddef>
#include <cstdint>

namespace revis {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]   (out may alias x);
// a null weight multiplies by nothing (gemma4's values).
void rms_norm(float* out, const float* x, const float* weight, int n, float eps);

// In place: x[i] = exp(x[i] - max) / sum, over n values.
void softmax(float* x, int n);

// One tile of a softmax taken a tile at a time (the online softmax of flash
// attention). max and sum carry the largest value and the sum of
// e^(value - max) over the tiles before (sum = 0 before the first). In
// place x[i] = e^(x[i] - max'), where max' = the larger of max and the
// tile's values, and max = max', sum = sum * e^(max - max') + the tile's
// terms. Returns e^(max - max'), the factor for whatever was accumulated
// with the old weights (1 when the max stays; 0 on the first tile).
float softmax_step(float* x, int n, float& max, float& sum);

// In place: gate[i] = silu(gate[i]) * up[i]  (the SwiGLU activation)
void swiglu(float* gate, const float* up, int n);

// In place: gate[i] = g / (1 + e^(-alpha g)) * (u + 1), where g is gate[i]
// capped at limit and u is up[i] clamped to [-limit, limit]: the SwiGLU of
// gpt-oss's experts (alpha 1.702, limit 7), in ggml's float steps.
void swiglu_clamped(float* gate, const float* up, int n, float alpha, float limit);

// In place: gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gemma's GeGLU). As
// llama.cpp's CPU backend computes it: gelu(x) is looked up by x rounded to
// float16 and comes back rounded to float16; below -10 it is 0, from 10 up x.
void geglu(float* gate, const float* up, int n);

// out[i] += x[i]
void add(float* out, const float* x, int n);

// In place: x[i] = the nearest float16 value, as a float.
void round_to_f16(float* x, int n);

// out[i] += scale * x[i]
void axpy(float* out, float scale, const float* x, int n);

// Attention for the query heads that share one KV head, over float16 rows
// of a KV cache (rows of dim halves one after another). The heads are
// taken together so that each cache row is read and converted once for
// all of them. The kernels read rows [0, n) and ask for the lines of the
// rows ahead of the ones they multiply, up to row n_cached (>= n): a caller
// that walks the cache a tile at a time passes the rows that follow the tile.
//
// scores[g * scores_stride + p] = scale * dot(q + g * q_stride, keys[p])
// for g < heads, p < n.
void attention_scores(const float* q, size_t q_stride, int heads, const uint16_t* keys, int n, int n_cached, int dim,
                      float scale, float* scores, size_t scores_stride);

// out[g * out_stride + i] += sum over p < n of weights[g * weights_stride + p] * values[p][i]
// for g < heads, i < dim, where row p of values starts at values + p * row_stride
// (row_stride >= dim: MLA's values are the first halves of its key rows);
// n_cached as above.
void add_weighted_values(const float* weights, size_t weights_stride, int heads, const uint16_t* values, int n,
                         int n_cached, int dim, int row_stride, float* out, size_t out_stride);

}  // namespace revis
