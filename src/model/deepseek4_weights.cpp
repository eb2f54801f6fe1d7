// deepseek4's tensors (weights.h's Deepseek4Layer), bound with the shapes
// config.h's Deepseek4 implies.
#include <string>

#include "model/tensor_binder.h"

namespace revis {
namespace {

// hc_*: the mix logits of n_hc weights to read the copies with, n_hc to
// write the block's output into them, and n_hc x n_hc to carry them over.
Status bind_hyper_mix(const Binder& bind, const std::string& p, int64_t d, int64_t n_hc, int64_t n_mix, int64_t n_scale,
                      HyperMix& m) {
  Status s;
  if (!(s = bind.matrix(p + "_fn.weight", {n_hc * d, n_mix}, m.fn)).ok()) return s;
  if (!(s = bind.vector(p + "_base.weight", n_mix, m.base)).ok()) return s;
  return bind.vector(p + "_scale.weight", n_scale, m.scale);
}

// A compressor of `ratio` into keys of `dim` values (prefix blk.N.attn_ or
// blk.N.indexer_).
Status bind_compressor(const Binder& bind, const std::string& p, int64_t d, int64_t dim, int ratio, Compressor& comp) {
  const int64_t width = ratio == 4 ? 2 * dim : dim;
  Status s;
  if (!(s = bind.matrix(p + "compressor_kv.weight", {d, width}, comp.wkv)).ok()) return s;
  if (!(s = bind.matrix(p + "compressor_gate.weight", {d, width}, comp.wgate)).ok()) return s;
  // The position biases are a [width, ratio] matrix: read as one run.
  Matrix ape;
  if (!(s = bind.matrix(p + "compressor_ape.weight", {width, ratio}, ape)).ok()) return s;
  comp.ape.resize(width * ratio);
  for (int r = 0; r < ratio; ++r) dequantize_row(ape.type, ape.row(r), &comp.ape[r * width], width);
  if (!(s = bind.vector(p + "compressor_norm.weight", dim, comp.norm)).ok()) return s;
  comp.ratio = ratio;
  return {};
}

Status bind_block(const Binder& bind, const ModelConfig& c, int i, Deepseek4Layer& l) {
  const Deepseek4& ds = c.ds4;
  const std::string p = "blk." + std::to_string(i) + ".";
  const int64_t d = c.n_embd, heads = c.n_head, head = c.head_dim_k, q_rank = ds.q_lora_rank;
  const int64_t n_hc = ds.n_hc, n_mix = (2 + n_hc) * n_hc;
  Status s;
  if (!(s = bind_hyper_mix(bind, p + "hc_attn", d, n_hc, n_mix, 3, l.hc_attn)).ok()) return s;
  if (!(s = bind_hyper_mix(bind, p + "hc_ffn", d, n_hc, n_mix, 3, l.hc_ffn)).ok()) return s;
  if (!(s = bind.vector(p + "attn_norm.weight", d, l.attn_norm)).ok()) return s;
  if (!(s = bind.vector(p + "attn_sinks.weight", heads, l.sinks)).ok()) return s;
  if (!(s = bind.matrix(p + "attn_q_a.weight", {d, q_rank}, l.wq_a)).ok()) return s;
  if (!(s = bind.vector(p + "attn_q_a_norm.weight", q_rank, l.q_a_norm)).ok()) return s;
  if (!(s = bind.matrix(p + "attn_q_b.weight", {q_rank, heads * head}, l.wq_b)).ok()) return s;
  if (!(s = bind.matrix(p + "attn_kv.weight", {d, head}, l.wkv)).ok()) return s;
  if (!(s = bind.vector(p + "attn_kv_a_norm.weight", head, l.kv_norm)).ok()) return s;
  // Stored 2-D as converters write it: group g's out_rank rows one after
  // another, each reading that group's heads.
  const int64_t group_width = heads * head / ds.out_groups;
  if (!(s = bind.matrix(p + "attn_output_a.weight", {group_width, ds.out_rank * ds.out_groups}, l.wo_a)).ok()) return s;
  l.wo_a.rows = ds.out_rank;
  l.wo_a.n_mats = ds.out_groups;
  if (!(s = bind.matrix(p + "attn_output_b.weight", {ds.out_groups * ds.out_rank, d}, l.wo_b)).ok()) return s;

  const int ratio = ds.compress_ratios[i];
  if (ratio != 0 && !(s = bind_compressor(bind, p + "attn_", d, head, ratio, l.compressor)).ok()) return s;
  if (ratio == 4) {
    const int64_t ih = ds.indexer_heads, idim = ds.indexer_dim;
    if (!(s = bind.matrix(p + "indexer.proj.weight", {d, ih}, l.indexer_proj)).ok()) return s;
    if (!(s = bind.matrix(p + "indexer.attn_q_b.weight", {q_rank, ih * idim}, l.indexer_q_b)).ok()) return s;
    if (!(s = bind_compressor(bind, p + "indexer_", d, idim, ratio, l.indexer_compressor)).ok()) return s;
  }

  const int64_t e = c.n_expert, f = c.n_ff_expert, fs = f * c.n_expert_shared;
  if (!(s = bind.vector(p + "ffn_norm.weight", d, l.ffn_norm)).ok()) return s;
  if (!(s = bind.matrix(p + "ffn_gate_inp.weight", {d, e}, l.router)).ok()) return s;
  if (i < ds.n_hash_layer) {
    if (!(s = bind.int32s(p + "ffn_gate_tid2eid.weight", {c.n_expert_used, c.n_vocab}, l.token_experts)).ok())
      return s;
    for (int32_t id : l.token_experts)
      if (id < 0 || id >= e)
        return Status::error("tensor '" + p + "ffn_gate_tid2eid.weight': expert " + std::to_string(id) +
                             " (expected 0.." + std::to_string(e - 1) + ")");
  } else if (!(s = bind.vector(p + "exp_probs_b.bias", e, l.expert_bias)).ok()) {
    return s;
  }
  if (!(s = bind.matrix(p + "ffn_gate_exps.weight", {d, f, e}, l.gate_exps)).ok()) return s;
  if (!(s = bind.matrix(p + "ffn_up_exps.weight", {d, f, e}, l.up_exps)).ok()) return s;
  if (!(s = bind.matrix(p + "ffn_down_exps.weight", {f, d, e}, l.down_exps)).ok()) return s;
  if (fs > 0) {
    if (!(s = bind.matrix(p + "ffn_gate_shexp.weight", {d, fs}, l.gate_shexp)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_up_shexp.weight", {d, fs}, l.up_shexp)).ok()) return s;
    if (!(s = bind.matrix(p + "ffn_down_shexp.weight", {fs, d}, l.down_shexp)).ok()) return s;
  }
  return {};
}

}  // namespace

Status bind_deepseek4(const Binder& bind, const ModelConfig& c, ModelWeights& w) {
  const int64_t n_hc = c.ds4.n_hc;
  Status s;
  if (!(s = bind_hyper_mix(bind, "output_hc", c.n_embd, n_hc, n_hc, 1, w.hc_head)).ok()) return s;
  w.ds4_layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i)
    if (!(s = bind_block(bind, c, i, w.ds4_layers[i])).ok()) return s;

  // The first multi-token-prediction block, as llama.cpp finds it: by its
  // eh_proj. It attends to raw rows only (llama.cpp refuses others).
  const std::string p = "blk." + std::to_string(c.n_layer) + ".";
  if (c.n_nextn_layer == 0 || !bind.has(p + "nextn.eh_proj.weight")) return {};
  if (c.ds4.compress_ratios[c.n_layer] != 0)
    return Status::error("deepseek4.attention.compress_ratios: the multi-token-prediction block " +
                         std::to_string(c.n_layer) + " has " + std::to_string(c.ds4.compress_ratios[c.n_layer]) +
                         " (expected 0)");
  Deepseek4Layer block;
  NextnWeights n;
  if (!(s = bind_block(bind, c, c.n_layer, block)).ok()) return s;
  if (!(s = bind_nextn_head(bind, c, w, n)).ok()) return s;
  w.ds4_layers.push_back(std::move(block));
  w.nextn.push_back(std::move(n));
  return {};
}

}  // namespace revis
