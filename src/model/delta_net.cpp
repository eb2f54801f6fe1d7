// Qwen3.5's gated delta-net layer (config.h's GatedDeltaNet), the
// recurrent half of a qwen35 model; Model::transformer_block calls it in
// place of attention. For each token of a sequence, in order:
//
//   [q | k | v] = silu(causal_conv(W_qkv x))   the last conv_kernel inputs
//                                                 of each channel, weighted
//   q, k        = q / |q|, k / |k|               per key head
//   decay       = e^(softplus(W_alpha x + dt_bias) * a)   per value head
//   beta        = sigmoid(W_beta x)                       per value head
//   S           = decay * S                      S: head_dim x head_dim
//   S          += k (beta (v - S^T k))^T         the delta rule
//   out         = S^T q / sqrt(head_dim)
//   y           = rms_norm(out) * silu(W_z x)    per value head
//
// and the layer's result is W_out y. Value head h reads the key head
// config.h's GatedDeltaNet::key_head pairs it with. The convolution's inputs and S
// are the layer's state in the cache (kv_cache.h), carried from one chunk
// to the next; a sequence's tokens are walked in order, each sequence
// against its own state, so a token's result does not depend on what
// else is in the batch. A sequence that asks for its states per token
// (SequenceInput::recurrent_states) gets a copy of each layer's state after
// every token: for the delta rule one more write of a matrix it has just
// read and written several times over, a small share of the layer's cost.
#include <algorithm>
#include <cmath>

#include "model/model.h"
#include "model/ops.h"

namespace revis {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// x / max(|x|, eps), the norm summed in double as llama.cpp does.
void l2_normalize(float* x, int n, float eps) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::fmax(std::sqrt(static_cast<float>(sum)), eps);
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

float dot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void Model::gated_delta_net(const LayerWeights& l, int recurrent, int n, std::span<const Segment> segments,
                            ThreadPool& pool) {
  const ModelConfig& c = config_;
  const GatedDeltaNet& g = c.delta_net;
  const int d = c.n_embd, channels = g.conv_channels(), dim = g.head_dim, taps = g.conv_kernel;
  const int k_heads = g.k_heads, v_heads = g.v_heads, value_dim = g.value_dim();
  mix_.resize(static_cast<size_t>(n) * channels);
  q_.resize(static_cast<size_t>(n) * value_dim);  // the output gate z
  delta_beta_.resize(static_cast<size_t>(n) * v_heads);
  delta_decay_.resize(static_cast<size_t>(n) * v_heads);
  matmul_.run(pool, l.ssm_qkv, xb_.data(), n, d, mix_.data(), channels);
  matmul_.run(pool, l.ssm_z, xb_.data(), n, d, q_.data(), value_dim);
  matmul_.run(pool, l.ssm_beta, xb_.data(), n, d, delta_beta_.data(), v_heads);
  matmul_.run(pool, l.ssm_alpha, xb_.data(), n, d, delta_decay_.data(), v_heads);

  // The causal convolution, channel by channel: each walks its sequence's
  // tokens in order over the window [state | this token], then keeps the
  // last taps - 1 inputs as the state.
  // Where token t of segment s leaves its state (null: nowhere), at this
  // layer's place in the destination.
  const size_t layer_offset = static_cast<size_t>(recurrent) * g.state_floats();
  auto state_copy = [layer_offset](const Segment& s, int t) -> float* {
    if (!s.seq || !s.seq->recurrent_states) return nullptr;
    float* dest = s.seq->recurrent_states[s.first + t - s.row];
    return dest ? dest + layer_offset : nullptr;
  };
  for (const Segment& s : segments) {
    float* state = s.kv->conv_state(recurrent);
    pool.parallel_for(channels, [&](int64_t begin, int64_t end) {
      std::vector<float> window(taps);
      for (int64_t ch = begin; ch < end; ++ch) {
        float* kept = state + ch * (taps - 1);
        const float* w = &l.ssm_conv[ch * taps];
        std::copy_n(kept, taps - 1, window.begin());
        for (int t = s.row; t < s.row + s.n; ++t) {
          float& x = mix_[static_cast<size_t>(t) * channels + ch];
          window[taps - 1] = x;
          float sum = 0.0f;
          for (int k = 0; k < taps; ++k) sum += window[k] * w[k];
          x = silu(sum);
          std::copy(window.begin() + 1, window.end(), window.begin());
          if (float* copy = state_copy(s, t)) std::copy_n(window.begin(), taps - 1, copy + ch * (taps - 1));
        }
        std::copy_n(window.begin(), taps - 1, kept);
      }
    });
  }

  for (int t = 0; t < n; ++t) {
    float* row = &mix_[static_cast<size_t>(t) * channels];
    for (int h = 0; h < 2 * k_heads; ++h) l2_normalize(row + h * dim, dim, c.rms_eps);
    for (int h = 0; h < v_heads; ++h) {
      float& beta = delta_beta_[static_cast<size_t>(t) * v_heads + h];
      float& decay = delta_decay_[static_cast<size_t>(t) * v_heads + h];
      beta = sigmoid(beta);
      decay = std::exp(softplus(decay + l.ssm_dt_bias[h]) * l.ssm_a[h]);
    }
  }

  // The delta rule, value head by value head. The state is kept transposed,
  // row j holding S[.][j], so that every step below walks rows.
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  attn_out_.resize(static_cast<size_t>(n) * value_dim);
  for (const Segment& s : segments) {
    float* states = s.kv->delta_state(recurrent);
    pool.parallel_for(v_heads, [&](int64_t begin, int64_t end) {
      std::vector<float> delta(dim);
      for (int64_t h = begin; h < end; ++h) {
        float* m = states + static_cast<size_t>(h) * dim * dim;
        const int kh = g.key_head(static_cast<int>(h));
        for (int t = s.row; t < s.row + s.n; ++t) {
          const float* row = &mix_[static_cast<size_t>(t) * channels];
          const float* q = row + kh * dim;
          const float* k = row + (k_heads + kh) * dim;
          const float* v = row + 2 * k_heads * dim + h * dim;
          const float beta = delta_beta_[static_cast<size_t>(t) * v_heads + h];
          const float decay = delta_decay_[static_cast<size_t>(t) * v_heads + h];
          for (int i = 0; i < dim * dim; ++i) m[i] *= decay;
          for (int j = 0; j < dim; ++j) delta[j] = (v[j] - dot(&m[j * dim], k, dim)) * beta;
          for (int j = 0; j < dim; ++j) axpy(&m[j * dim], delta[j], k, dim);
          float* out = &attn_out_[static_cast<size_t>(t) * value_dim + h * dim];
          for (int j = 0; j < dim; ++j) out[j] = dot(&m[j * dim], q, dim) * scale;
          if (float* copy = state_copy(s, t))
            std::copy_n(m, dim * dim, copy + g.conv_state_floats() + static_cast<size_t>(h) * dim * dim);
        }
      }
    });
  }

  // Each head's output normed, gated by silu(z).
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < v_heads; ++h) {
      float* out = &attn_out_[static_cast<size_t>(t) * value_dim + h * dim];
      const float* z = &q_[static_cast<size_t>(t) * value_dim + h * dim];
      rms_norm(out, out, l.ssm_norm.data(), dim, c.rms_eps);
      for (int j = 0; j < dim; ++j) out[j] *= silu(z[j]);
    }
}

}  // namespace revis
