// Gemma 4's per-layer embeddings and layer output factor (config.h's
// Gemma4), the step model.cpp runs after each of its blocks, and its FFN
// of a dense branch beside experts. The float
// steps follow llama.cpp's gemma4 graph, so that the logits match its
// within the golden tolerances.
#include <cmath>
#include <span>

#include "model/model.h"
#include "model/ops.h"
#include "quant/quant.h"

namespace revis {

// Token t's input for layer i, n_embd_per_layer values:
//   (norm(P x_t / sqrt(n_embd))_i + E[token]_i sqrt(n_embd_per_layer)) / sqrt(2)
// where x_t is its scaled embedding, P per_layer_model_proj, E
// per_layer_token_embd, and norm the RMS norm of one slice.
void Model::gemma4_per_layer_inputs(const int32_t* tokens, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, e = c.gemma4.n_embd_per_layer, width = e * c.n_layer;
  if (e == 0) return;
  per_layer_in_.resize(static_cast<size_t>(n) * width);
  matmul_.run(pool, weights_.per_layer_model_proj, x_.data(), n, d, per_layer_in_.data(), width);
  const float projection_scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float embedding_scale = std::sqrt(static_cast<float>(e));
  const float mix_scale = 1.0f / std::sqrt(2.0f);
  std::vector<float> embedded(width);
  const Matrix& table = weights_.per_layer_embd;
  for (int t = 0; t < n; ++t) {
    dequantize_row(table.type, table.row(tokens[t]), embedded.data(), width);
    for (int layer = 0; layer < c.n_layer; ++layer) {
      float* in = &per_layer_in_[static_cast<size_t>(t) * width + layer * e];
      const float* own = &embedded[layer * e];
      for (int i = 0; i < e; ++i) in[i] *= projection_scale;
      rms_norm(in, in, weights_.per_layer_proj_norm.data(), e, c.rms_eps);
      for (int i = 0; i < e; ++i) in[i] = (in[i] + own[i] * embedding_scale) * mix_scale;
    }
  }
}

// x += norm(W_proj (gelu(W_gate x) * input_layer)), then x *= factor.
void Model::gemma4_layer_end(const LayerWeights& l, int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd, e = c.gemma4.n_embd_per_layer, width = e * c.n_layer;
  if (e > 0) {
    per_layer_act_.resize(static_cast<size_t>(n) * e);
    matmul_.run(pool, l.per_layer_gate, x_.data(), n, d, per_layer_act_.data(), e);
    for (int t = 0; t < n; ++t)
      geglu(&per_layer_act_[static_cast<size_t>(t) * e], &per_layer_in_[static_cast<size_t>(t) * width + layer * e], e);
    matmul_.run(pool, l.per_layer_proj, per_layer_act_.data(), n, e, xb_.data(), d);
    for (int t = 0; t < n; ++t) rms_norm(&xb_[t * d], &xb_[t * d], l.per_layer_post_norm.data(), d, c.rms_eps);
    add(x_.data(), xb_.data(), n * d);
  }
  if (!l.out_scale.empty())
    for (float& v : std::span(x_.data(), static_cast<size_t>(n) * d)) v *= l.out_scale[0];
}

// xb_ = post_norm_1(dense(xb_)) + post_norm_2(experts(pre_norm_2(x_))),
// the experts picked by a router that reads norm(x_) / sqrt(n_embd) *
// router_scale, each one's weight times its output factor (the same
// product in another order than llama.cpp's, within float rounding).
void Model::gemma4_ffn_with_experts(const LayerWeights& l, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int d = c.n_embd;
  const size_t rows = static_cast<size_t>(n) * d;
  std::vector<float> branch(rows), logits(static_cast<size_t>(n) * c.n_expert);
  const float router_factor = 1.0f / std::sqrt(static_cast<float>(d));
  for (int t = 0; t < n; ++t) {
    float* r = &branch[t * d];
    rms_norm(r, &x_[t * d], nullptr, d, c.rms_eps);
    for (int i = 0; i < d; ++i) r[i] = r[i] * router_factor * l.router_scale[i];
  }
  matmul_.run(pool, l.router, branch.data(), n, d, logits.data(), c.n_expert);
  choose_experts(c, l, logits.data(), n, routed_);
  if (!l.down_exps_scale.empty())
    for (int e = 0; e < c.n_expert; ++e)
      for (auto& [row, weight] : routed_[e]) weight *= l.down_exps_scale[e];
  for (int t = 0; t < n; ++t) rms_norm(&branch[t * d], &x_[t * d], l.ffn_pre_norm_2.data(), d, c.rms_eps);
  routed_experts(l, branch.data(), n, pool);

  gated_ffn(l.w_gate, l.w_up, l.w_down, xb_.data(), n, xb_.data(), pool);
  for (int t = 0; t < n; ++t) {
    rms_norm(&xb_[t * d], &xb_[t * d], l.ffn_post_norm_1.data(), d, c.rms_eps);
    rms_norm(&moe_out_[t * d], &moe_out_[t * d], l.ffn_post_norm_2.data(), d, c.rms_eps);
  }
  add(xb_.data(), moe_out_.data(), static_cast<int>(rows));
}

}  // namespace revis
