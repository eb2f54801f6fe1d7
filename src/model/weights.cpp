#include "model/weights.h"

#include <algorithm>

#include "model/tensor_binder.h"
#include "quant/quant.h"

namespace revis {
namespace {

// A float32 matrix over `values` (rows x cols, row-major), which `w` keeps.
Matrix derived_matrix(ModelWeights& w, std::vector<float> values, int64_t cols, int64_t rows, int64_t n_mats) {
  w.derived.push_back(std::move(values));
  Matrix m;
  m.type = TensorType::F32;
  m.cols = cols;
  m.rows = rows;
  m.n_mats = n_mats;
  m.row_bytes = cols * sizeof(float);
  m.data = reinterpret_cast<const uint8_t*>(w.derived.back().data());
  return m;
}

// Older deepseek2 files fuse attn_k_b and attn_v_b into attn_kv_b: per head,
// head_dim_nope rows that make the key's no-RoPE part from the latent, then
// head_dim_v rows that make the value. Absorbed attention wants the key rows
// transposed (a query's no-RoPE part -> latent) and the value rows as they are.
Status split_kv_b(const Binder& bind, const std::string& name, const ModelConfig& c, ModelWeights& w, LayerWeights& l) {
  const int64_t latent = c.mla.kv_lora_rank, nope = c.mla.head_dim_nope, v = c.mla.head_dim_v, heads = c.n_head;
  Matrix kv_b;
  if (Status s = bind.matrix(name, {latent, heads * (nope + v)}, kv_b); !s.ok()) return s;
  std::vector<float> row(latent), k_b(heads * latent * nope), v_b(heads * v * latent);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < nope + v; ++i) {
      dequantize_row(kv_b.type, kv_b.row(h * (nope + v) + i), row.data(), latent);
      for (int64_t r = 0; r < latent; ++r) {
        if (i < nope)
          k_b[(h * latent + r) * nope + i] = row[r];
        else
          v_b[(h * v + i - nope) * latent + r] = row[r];
      }
    }
  l.wk_b = derived_matrix(w, std::move(k_b), nope, latent, heads);
  l.wv_b = derived_matrix(w, std::move(v_b), latent, v, heads);
  return {};
}

// The attention of a deepseek2 layer (multi-head latent attention).
Status bind_mla(Binder& bind, const std::string& p, const ModelConfig& c, ModelWeights& w, LayerWeights& l) {
  const Mla& m = c.mla;
  const int64_t d = c.n_embd, heads = c.n_head, latent = m.kv_lora_rank;
  Status s;
  if (m.q_lora_rank > 0) {
    if (!(s = bind.matrix(p + "attn_q_a.weight", {d, m.q_lora_rank}, l.wq_a)).ok()) return s;
    if (!(s = bind.vector(p + "attn_q_a_norm.weight", m.q_lora_rank, l.q_a_norm)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_q_b.weight", {m.q_lora_rank, c.q_dim()}, l.wq_b)).ok()) return s;
  } else if (!(s = bind.matrix(p + "attn_q.weight", {d, c.q_dim()}, l.wq)).ok()) {
    return s;
  }
  if (!(s = bind.matrix(p + "attn_kv_a_mqa.weight", {d, latent + c.rope_dims}, l.wkv_a)).ok()) return s;
  if (!(s = bind.vector(p + "attn_kv_a_norm.weight", latent, l.kv_a_norm)).ok()) return s;
  if (!bind.has(p + "attn_k_b.weight") && !bind.has(p + "attn_v_b.weight") && bind.has(p + "attn_kv_b.weight")) {
    if (!(s = split_kv_b(bind, p + "attn_kv_b.weight", c, w, l)).ok()) return s;
  } else {
    if (!(s = bind.matrix(p + "attn_k_b.weight", {m.head_dim_nope, latent, heads}, l.wk_b)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_v_b.weight", {latent, m.head_dim_v, heads}, l.wv_b)).ok()) return s;
  }
  return bind.matrix(p + "attn_output.weight", {heads * m.head_dim_v, d}, l.wo);
}

// The rows `order` of m, in that order, as a matrix of m's type that `w`
// keeps; m (a file's tensor) is noted as a split source.
Matrix rows_of(ModelWeights& w, const Matrix& m, const std::vector<int64_t>& order) {
  std::vector<uint8_t> bytes(order.size() * m.row_bytes);
  for (size_t i = 0; i < order.size(); ++i) std::copy_n(m.row(order[i]), m.row_bytes, &bytes[i * m.row_bytes]);
  w.derived_rows.push_back(std::move(bytes));
  if (std::find(w.split_sources.begin(), w.split_sources.end(), m.data) == w.split_sources.end())
    w.split_sources.push_back(m.data);
  Matrix out = m;
  out.rows = static_cast<int64_t>(order.size());
  out.data = w.derived_rows.back().data();
  return out;
}

// qwen3next's fused projections, grouped by key head: ssm_ba holds per key
// head [its value heads' beta | their alpha], and ssm_in (where the file
// has no attn_qkv and attn_gate, as qwen35's) per key head [q | k | its
// value heads' v | their z]. Split into qwen35's layout, each value head
// keeping its place (key head g's j-th is value head g r + j).
Status split_qkvz(const Binder& bind, const std::string& p, const ModelConfig& c, ModelWeights& w, LayerWeights& l) {
  const GatedDeltaNet& g = c.delta_net;
  const int64_t d = c.n_embd, hd = g.head_dim, r = g.v_heads / g.k_heads;
  const int64_t group = 2 * hd + 2 * r * hd;
  Matrix qkvz, ba;
  Status s;
  if (!(s = bind.matrix(p + "ssm_ba.weight", {d, 2 * g.v_heads}, ba)).ok()) return s;
  std::vector<int64_t> qkv, z, beta, alpha;
  for (int64_t k = 0; k < g.k_heads; ++k)
    for (int64_t j = 0; j < r; ++j) beta.push_back(k * 2 * r + j), alpha.push_back(k * 2 * r + r + j);
  l.ssm_beta = rows_of(w, ba, beta);
  l.ssm_alpha = rows_of(w, ba, alpha);
  if (bind.has(p + "attn_qkv.weight")) {
    if (!(s = bind.matrix(p + "attn_qkv.weight", {d, g.conv_channels()}, l.ssm_qkv)).ok()) return s;
    return bind.matrix(p + "attn_gate.weight", {d, g.value_dim()}, l.ssm_z);
  }
  if (!(s = bind.matrix(p + "ssm_in.weight", {d, g.k_heads * group}, qkvz)).ok()) return s;
  for (int part = 0; part < 3; ++part)  // all the q rows, then k, then v
    for (int64_t k = 0; k < g.k_heads; ++k) {
      const int64_t first = k * group + (part == 0 ? 0 : part == 1 ? hd : 2 * hd);
      for (int64_t i = 0; i < (part == 2 ? r * hd : hd); ++i) qkv.push_back(first + i);
    }
  for (int64_t k = 0; k < g.k_heads; ++k)
    for (int64_t i = 0; i < r * hd; ++i) z.push_back(k * group + 2 * hd + r * hd + i);
  l.ssm_qkv = rows_of(w, qkvz, qkv);
  l.ssm_z = rows_of(w, qkvz, z);
  return {};
}

// A recurrent layer's gated delta-net (config.h's GatedDeltaNet).
Status bind_delta_net(const Binder& bind, const std::string& p, const ModelConfig& c, ModelWeights& w,
                      LayerWeights& l) {
  const GatedDeltaNet& g = c.delta_net;
  const int64_t d = c.n_embd, heads = g.v_heads;
  Status s;
  if (c.arch == Architecture::kQwen3Next) {
    if (!(s = split_qkvz(bind, p, c, w, l)).ok()) return s;
  } else {
    if (!(s = bind.matrix(p + "attn_qkv.weight", {d, g.conv_channels()}, l.ssm_qkv)).ok()) return s;
    if (!(s = bind.matrix(p + "attn_gate.weight", {d, g.value_dim()}, l.ssm_z)).ok()) return s;
    if (!(s = bind.matrix(p + "ssm_beta.weight", {d, heads}, l.ssm_beta)).ok()) return s;
    if (!(s = bind.matrix(p + "ssm_alpha.weight", {d, heads}, l.ssm_alpha)).ok()) return s;
  }
  if (!(s = bind.rows(p + "ssm_conv1d.weight", g.conv_kernel, g.conv_channels(), l.ssm_conv)).ok()) return s;
  if (!(s = bind.vector(p + "ssm_dt.bias", heads, l.ssm_dt_bias)).ok()) return s;
  if (!(s = bind.vector(p + "ssm_a", heads, l.ssm_a)).ok()) return s;
  if (!(s = bind.vector(p + "ssm_norm.weight", g.head_dim, l.ssm_norm)).ok()) return s;
  return bind.matrix(p + "ssm_out.weight", {g.value_dim(), d}, l.ssm_out);
}

// The gate and up expert stacks of a MoE layer: ffn_gate_exps and
// ffn_up_exps, or the two fused into ffn_gate_up_exps (published Gemma 4
// MoE files): per expert n_ff_expert gate rows, then as many up rows, the
// halves llama.cpp takes of the fused product. The fused stack is split
// into copies that `w` keeps, so every path (striping, devices) sees the
// usual two stacks; once they are in stripes, the copies and the file's
// fused tensor are given back (Model::keep_weights_in_stripes).
Status bind_gate_up_exps(const Binder& bind, const std::string& p, const ModelConfig& c, ModelWeights& w,
                         LayerWeights& l) {
  const int64_t d = c.n_embd, e = c.n_expert, f = c.n_ff_expert;
  Status s;
  if (bind.has(p + "ffn_gate_exps.weight") || !bind.has(p + "ffn_gate_up_exps.weight")) {
    if (!(s = bind.matrix(p + "ffn_gate_exps.weight", {d, f, e}, l.gate_exps)).ok()) return s;
    return bind.matrix(p + "ffn_up_exps.weight", {d, f, e}, l.up_exps);
  }
  Matrix fused;
  if (!(s = bind.matrix(p + "ffn_gate_up_exps.weight", {d, 2 * f, e}, fused)).ok()) return s;
  std::vector<int64_t> gate, up;
  for (int64_t x = 0; x < e; ++x)
    for (int64_t r = 0; r < f; ++r) gate.push_back(x * 2 * f + r), up.push_back(x * 2 * f + f + r);
  l.gate_exps = rows_of(w, fused, gate);
  l.up_exps = rows_of(w, fused, up);
  l.gate_exps.rows = l.up_exps.rows = f;
  return {};
}

// gemma4's per-layer embedding and output factor of one layer.
Status bind_gemma4_extras(const Binder& bind, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t d = c.n_embd, e = c.gemma4.n_embd_per_layer;
  Status s;
  if (!(s = bind.vector(p + "layer_output_scale.weight", 1, l.out_scale, /*optional=*/true)).ok()) return s;
  if (e == 0) return {};
  if (!(s = bind.matrix(p + "inp_gate.weight", {d, e}, l.per_layer_gate)).ok()) return s;
  if (!(s = bind.matrix(p + "proj.weight", {e, d}, l.per_layer_proj)).ok()) return s;
  return bind.vector(p + "post_norm.weight", d, l.per_layer_post_norm);
}

// gemma4's experts beside its dense FFN (config.h's Gemma4).
Status bind_gemma4_experts(const Binder& bind, const std::string& p, const ModelConfig& c, int layer,
                           LayerWeights& l) {
  const int64_t d = c.n_embd, f = c.ff_width(layer);
  Status s;
  if (!(s = bind.matrix(p + "ffn_gate.weight", {d, f}, l.w_gate)).ok()) return s;
  if (!(s = bind.matrix(p + "ffn_up.weight", {d, f}, l.w_up)).ok()) return s;
  if (!(s = bind.matrix(p + "ffn_down.weight", {f, d}, l.w_down)).ok()) return s;
  if (!(s = bind.vector(p + "ffn_gate_inp.scale", d, l.router_scale)).ok()) return s;
  if (!(s = bind.vector(p + "pre_ffw_norm_2.weight", d, l.ffn_pre_norm_2)).ok()) return s;
  if (!(s = bind.vector(p + "post_ffw_norm_1.weight", d, l.ffn_post_norm_1)).ok()) return s;
  if (!(s = bind.vector(p + "post_ffw_norm_2.weight", d, l.ffn_post_norm_2)).ok()) return s;
  return bind.vector(p + "ffn_down_exps.scale", c.n_expert, l.down_exps_scale, /*optional=*/true);
}

// Block i's tensors (blk.i.*): attention (or qwen35's recurrent layer),
// then a dense or an expert FFN as the config says of layer i.
Status bind_layer(Binder& bind, const ModelConfig& c, int i, ModelWeights& w, LayerWeights& l) {
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t d = c.n_embd;
  Status s;
  // qwen35's queries carry each head's output gate after it; gemma4's
  // widths and KV heads are the layer's own.
  const int64_t hk = c.is_mla() ? c.head_dim_q() : c.key_width(i), hv = c.value_width(i), kv_heads = c.kv_heads(i);
  const int64_t q = c.n_head * hk * (c.is_hybrid() ? 2 : 1), kvk = kv_heads * hk, kvv = kv_heads * hv;
  if (!(s = bind.vector(p + "attn_norm.weight", d, l.attn_norm)).ok()) return s;
  if (c.is_recurrent(i)) {
    if (!(s = bind_delta_net(bind, p, c, w, l)).ok()) return s;
  } else if (c.is_mla()) {
    if (!(s = bind_mla(bind, p, c, w, l)).ok()) return s;
  } else {
    // gemma4: its shared layers make no keys or values (any in the file
    // go unread), and a layer without attn_v takes its keys' projection.
    const bool own_kv = !c.is_gemma4() || i < c.gemma4.first_shared_kv;
    if (!(s = bind.matrix(p + "attn_q.weight", {d, q}, l.wq)).ok()) return s;
    if (own_kv && !(s = bind.matrix(p + "attn_k.weight", {d, kvk}, l.wk)).ok()) return s;
    if (own_kv && !(s = bind.matrix(p + "attn_v.weight", {d, kvv}, l.wv, /*optional=*/c.is_gemma4())).ok()) return s;
    if (!(s = bind.matrix(p + "attn_output.weight", {c.n_head * hv, d}, l.wo)).ok()) return s;
  }
  if (c.has_qkv_bias) {
    if (!(s = bind.vector(p + "attn_q.bias", q, l.bq)).ok()) return s;
    if (!(s = bind.vector(p + "attn_k.bias", kvk, l.bk)).ok()) return s;
    if (!(s = bind.vector(p + "attn_v.bias", kvv, l.bv)).ok()) return s;
  }
  if (c.has_qk_norm && !c.is_recurrent(i)) {
    if (!(s = bind.vector(p + "attn_q_norm.weight", hk, l.q_norm)).ok()) return s;
    if (!l.wk.empty() && !(s = bind.vector(p + "attn_k_norm.weight", hk, l.k_norm)).ok()) return s;
  }
  if (c.is_gemma4() && !(s = bind_gemma4_extras(bind, p, c, l)).ok()) return s;
  // gpt-oss and qwen35 store the FFN's norm under the name gemma3 gives its
  // post norm.
  const bool post_named = c.arch == Architecture::kGptOss || c.is_hybrid();
  const std::string ffn_norm = post_named ? "post_attention_norm.weight" : "ffn_norm.weight";
  if (!(s = bind.vector(p + ffn_norm, d, l.ffn_norm)).ok()) return s;
  if (c.has_attn_sinks && !(s = bind.vector(p + "attn_sinks.weight", c.n_head, l.attn_sinks)).ok()) return s;
  if (c.has_ffn_biases && !(s = bind.vector(p + "attn_output.bias", d, l.bo)).ok()) return s;
  if (c.has_post_norms) {
    if (!(s = bind.vector(p + "post_attention_norm.weight", d, l.attn_post_norm)).ok()) return s;
    if (!(s = bind.vector(p + "post_ffw_norm.weight", d, l.ffn_post_norm)).ok()) return s;
  }
  if (c.is_moe_layer(i)) {
    const int64_t e = c.n_expert, f = c.n_ff_expert;
    if (c.is_gemma4() && !(s = bind_gemma4_experts(bind, p, c, i, l)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_gate_inp.weight", {d, e}, l.router)).ok()) return s;
    if (!(s = bind.vector(p + "exp_probs_b.bias", e, l.expert_bias, /*optional=*/true)).ok()) return s;
    if (!(s = bind_gate_up_exps(bind, p, c, w, l)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_down_exps.weight", {f, d, e}, l.down_exps)).ok()) return s;
    if (c.has_ffn_biases) {
      if (!(s = bind.vector(p + "ffn_gate_inp.bias", e, l.router_bias)).ok()) return s;
      if (!(s = bind.rows(p + "ffn_gate_exps.bias", f, e, l.gate_exps_bias)).ok()) return s;
      if (!(s = bind.rows(p + "ffn_up_exps.bias", f, e, l.up_exps_bias)).ok()) return s;
      if (!(s = bind.rows(p + "ffn_down_exps.bias", d, e, l.down_exps_bias)).ok()) return s;
    }
    if (c.n_ff_shared > 0 && !(s = bind.vector(p + "ffn_gate_inp_shexp.weight", d, l.shexp_gate)).ok()) return s;
    if (c.n_expert_shared > 0 || c.n_ff_shared > 0) {
      const int64_t fs = c.n_ff_shared > 0 ? c.n_ff_shared : f * c.n_expert_shared;
      if (!(s = bind.matrix(p + "ffn_gate_shexp.weight", {d, fs}, l.gate_shexp)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_up_shexp.weight", {d, fs}, l.up_shexp)).ok()) return s;
      if (!(s = bind.matrix(p + "ffn_down_shexp.weight", {fs, d}, l.down_shexp)).ok()) return s;
    }
  } else {
    const int64_t f = c.ff_width(i);
    if (!(s = bind.matrix(p + "ffn_gate.weight", {d, f}, l.w_gate)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_up.weight", {d, f}, l.w_up)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_down.weight", {f, d}, l.w_down)).ok()) return s;
  }
  return {};
}

// The multi-token-prediction block after the model's n_layer (blk.{n_layer}):
// absent when the file has no tensor of that block (files converted without
// it), else every required tensor must be there.
Status bind_nextn(Binder& bind, const gguf::GgufFile& file, const ModelConfig& c, ModelWeights& w) {
  const std::string p = "blk." + std::to_string(c.n_layer) + ".";
  const bool present = std::any_of(file.tensors().begin(), file.tensors().end(),
                                   [&](const gguf::TensorInfo& t) { return t.name.rfind(p, 0) == 0; });
  if (c.n_nextn_layer == 0 || !present) return {};
  NextnWeights n;
  Status s;
  if (!(s = bind_layer(bind, c, c.n_layer, w, n.layer)).ok()) return s;
  if (!(s = bind_nextn_head(bind, c, w, n)).ok()) return s;
  w.nextn.push_back(std::move(n));
  return {};
}

}  // namespace

Status bind_nextn_head(const Binder& bind, const ModelConfig& c, const ModelWeights& w, NextnWeights& n) {
  const std::string p = "blk." + std::to_string(c.n_layer) + ".";
  const int64_t d = c.n_embd, v = c.n_vocab;
  Status s;
  if (!(s = bind.matrix(p + "nextn.eh_proj.weight", {2 * d, d}, n.eh_proj)).ok()) return s;
  if (!(s = bind.vector(p + "nextn.enorm.weight", d, n.enorm)).ok()) return s;
  if (!(s = bind.vector(p + "nextn.hnorm.weight", d, n.hnorm)).ok()) return s;
  if (!(s = bind.matrix(p + "nextn.embed_tokens.weight", {d, v}, n.embed, /*optional=*/true)).ok()) return s;
  if (!(s = bind.matrix(p + "nextn.shared_head_head.weight", {d, v}, n.head, /*optional=*/true)).ok()) return s;
  if (!(s = bind.vector(p + "nextn.shared_head_norm.weight", d, n.head_norm, /*optional=*/true)).ok()) return s;
  if (n.embed.empty()) n.embed = w.token_embd;
  if (n.head.empty()) n.head = w.output;
  if (n.head_norm.empty()) n.head_norm = w.output_norm;
  return {};
}

namespace {
template <class Layer>
auto all_matrices(Layer& l) {
  return std::array{&l.wq,      &l.wk,        &l.wv,         &l.wo,       &l.wq_a,       &l.wq_b,     &l.wkv_a,
                    &l.wk_b,    &l.wv_b,      &l.w_gate,     &l.w_up,     &l.w_down,     &l.router,   &l.gate_exps,
                    &l.up_exps, &l.down_exps, &l.gate_shexp, &l.up_shexp, &l.down_shexp, &l.ssm_qkv,
                    &l.ssm_z,   &l.ssm_beta,  &l.ssm_alpha,  &l.ssm_out, &l.per_layer_gate, &l.per_layer_proj};
}
auto all_deepseek4_matrices(auto& l) {
  return std::array{&l.hc_attn.fn,          &l.hc_ffn.fn,       &l.wq_a,
                    &l.wq_b,                &l.wkv,             &l.wo_a,
                    &l.wo_b,                &l.compressor.wkv,  &l.compressor.wgate,
                    &l.indexer_compressor.wkv, &l.indexer_compressor.wgate, &l.indexer_proj,
                    &l.indexer_q_b,         &l.router,          &l.gate_exps,
                    &l.up_exps,             &l.down_exps,       &l.gate_shexp,
                    &l.up_shexp,            &l.down_shexp};
}
}  // namespace

std::array<Matrix*, LayerWeights::kMatrices> LayerWeights::matrices() { return all_matrices(*this); }
std::array<const Matrix*, LayerWeights::kMatrices> LayerWeights::matrices() const { return all_matrices(*this); }
std::array<Matrix*, Deepseek4Layer::kMatrices> Deepseek4Layer::matrices() { return all_deepseek4_matrices(*this); }
std::array<const Matrix*, Deepseek4Layer::kMatrices> Deepseek4Layer::matrices() const {
  return all_deepseek4_matrices(*this);
}

int64_t Matrix::stored_rows() const {
  if (!stripes) return rows;
  const int64_t r = stripes->weight_rows;
  return (rows + r - 1) / r * r;
}

Matrix Matrix::slice(int64_t mat) const {
  Matrix m = *this;
  m.n_mats = 1;
  m.data = data + static_cast<size_t>(mat) * stored_rows() * row_bytes;
  return m;
}

Result<ModelWeights> load_model_weights(const gguf::GgufFile& file, ModelConfig& c) {
  ModelWeights w;
  Binder bind(file);
  const gguf::TensorInfo* embd = file.tensor("token_embd.weight");
  if (!embd) return Status::error("tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2) return Status::error("tensor 'token_embd.weight': expected 2 dimensions, found " + embd->shape_string());
  if (embd->dims[1] > (1 << 24)) return Status::error("tensor 'token_embd.weight': vocabulary of " + std::to_string(embd->dims[1]) + " is too large");
  c.n_vocab = static_cast<int>(embd->dims[1]);
  const int64_t d = c.n_embd, v = c.n_vocab;
  Status s;
  if (!(s = bind.matrix("token_embd.weight", {d, v}, w.token_embd)).ok()) return s;
  if (!(s = bind.vector("output_norm.weight", d, w.output_norm)).ok()) return s;
  if (!(s = bind.matrix("output.weight", {d, v}, w.output, /*optional=*/true)).ok()) return s;
  if (w.output.empty()) w.output = w.token_embd;  // tied embeddings
  if (!(s = bind.vector("rope_freqs.weight", c.rope_dims / 2, w.rope_freq_factors, true)).ok()) return s;

  if (c.is_gemma4() && c.gemma4.n_embd_per_layer > 0) {
    const int64_t slices = int64_t{c.gemma4.n_embd_per_layer} * c.n_layer;
    if (!(s = bind.matrix("per_layer_token_embd.weight", {slices, v}, w.per_layer_embd)).ok()) return s;
    if (!(s = bind.matrix("per_layer_model_proj.weight", {d, slices}, w.per_layer_model_proj)).ok()) return s;
    if (!(s = bind.vector("per_layer_proj_norm.weight", c.gemma4.n_embd_per_layer, w.per_layer_proj_norm)).ok())
      return s;
  }
  if (c.is_deepseek4()) {
    if (!(s = bind_deepseek4(bind, c, w)).ok()) return s;
    return w;
  }
  w.layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i)
    if (!(s = bind_layer(bind, c, i, w, w.layers[i])).ok()) return s;
  if (!(s = bind_nextn(bind, file, c, w)).ok()) return s;
  return w;
}

}  // namespace revis
